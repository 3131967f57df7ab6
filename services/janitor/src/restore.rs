//! `hindsight maintenance restore RUN_ID`: undoing one run, under the lock.

use hindsight_store::maintenance::{
    restore::Restored,
    retention::{RECORD, TURN, TurnsBack},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{janitor::Janitor, request::JanitorError};

/// What a restore did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreReport {
    pub run: Uuid,
    pub restored: Restored,
    /// Turns the run emptied or deleted, written back from its export (with
    /// `purged`).
    #[serde(default)]
    pub turns: TurnsBack,
}

impl Janitor {
    /// Puts back what run `id` repaired, decayed, merged, archived (reviews
    /// included) or consolidated; with `purged`, also what it exported: the
    /// memories it purged and the turns it emptied or deleted.
    pub async fn restore(&self, id: Uuid, purged: bool) -> Result<RestoreReport, JanitorError> {
        let Some(lock) = self.store.try_lock_janitor().await? else {
            return Err(JanitorError::Busy);
        };
        let result = self.restore_locked(id, purged).await;
        if let Err(e) = lock.release().await {
            tracing::warn!(error = %e, "releasing the janitor lock (it goes with its connection)");
        }
        result
    }

    async fn restore_locked(&self, id: Uuid, purged: bool) -> Result<RestoreReport, JanitorError> {
        let row = self
            .store
            .run_row(id)
            .await?
            .ok_or(JanitorError::NoSuchRun(id))?;
        let refuse = |reason: String| Err(JanitorError::NotRestorable { id, reason });
        if row.dry_run {
            return refuse("it was a dry run: it changed nothing".into());
        }
        // A restored run can still have its purges written back later.
        if let (Some(at), false) = (row.restored_at, purged) {
            return refuse(format!("it was already restored at {at}"));
        }
        // Purged rows first: folded memories may point at them.
        let exported = if purged {
            self.exported(id).await?
        } else {
            Vec::new()
        };
        let (turns, memories): (Vec<_>, Vec<_>) = exported
            .into_iter()
            .partition(|row| row.get(RECORD).and_then(|r| r.as_str()) == Some(TURN));
        let purged_restored = self
            .store
            .reinsert_exported(id, &memories, "janitor-restore")
            .await?;
        let turns = self.store.restore_turns(&turns).await?;
        let mut restored = if row.restored_at.is_some() {
            Restored::default()
        } else {
            self.store.restore_run(id, "janitor-restore").await?
        };
        restored.purged_restored = purged_restored;
        tracing::info!(run = %id, ?restored, ?turns, "maintenance run restored");
        let report = RestoreReport {
            run: id,
            restored,
            turns,
        };
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

    /// The rows run `id` exported before purging them (none if it purged nothing).
    async fn exported(&self, id: Uuid) -> Result<Vec<serde_json::Value>, JanitorError> {
        let path = crate::export::Export::new(&self.exports, id)
            .path()
            .to_path_buf();
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(JanitorError::Export {
                    path,
                    reason: e.to_string(),
                });
            }
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|e| JanitorError::Export {
                    path: path.clone(),
                    reason: format!("unreadable line: {e}"),
                })
            })
            .collect()
    }
}
