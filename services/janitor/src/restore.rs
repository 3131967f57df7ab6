//! `hindsight maintenance restore RUN_ID`: undoing one run, under the lock.

use hindsight_shared::store::maintenance::restore::Restored;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::run::{Janitor, JanitorError};

/// What a restore did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreReport {
    pub run: Uuid,
    pub restored: Restored,
}

impl Janitor {
    /// Puts back what run `id` decayed, merged, archived or consolidated.
    pub async fn restore(&self, id: Uuid) -> Result<RestoreReport, JanitorError> {
        let Some(lock) = self.store.try_lock_janitor().await? else {
            return Err(JanitorError::Busy);
        };
        let result = self.restore_locked(id).await;
        if let Err(e) = lock.release().await {
            tracing::warn!(error = %e, "releasing the janitor lock (it goes with its connection)");
        }
        result
    }

    async fn restore_locked(&self, id: Uuid) -> Result<RestoreReport, JanitorError> {
        let row = self
            .store
            .run_row(id)
            .await?
            .ok_or(JanitorError::NoSuchRun(id))?;
        let refuse = |reason: String| Err(JanitorError::NotRestorable { id, reason });
        if row.dry_run {
            return refuse("it was a dry run: it changed nothing".into());
        }
        if let Some(at) = row.restored_at {
            return refuse(format!("it was already restored at {at}"));
        }
        let restored = self.store.restore_run(id, "janitor-restore").await?;
        tracing::info!(run = %id, ?restored, "maintenance run restored");
        let report = RestoreReport { run: id, restored };
        if let Some((client, _, ns)) = &self.bus
            && let Ok(body) = serde_json::to_vec(&serde_json::json!({"restored": report}))
            && let Err(e) = client
                .publish(ns.absolute("events.maintenance"), body.into())
                .await
        {
            tracing::warn!(error = %e, "cannot publish the restore summary");
        }
        Ok(report)
    }
}
