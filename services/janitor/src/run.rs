//! One maintenance run: repair, decay, archive, merge, review, consolidate,
//! purge, turns, in that order, over every tenant (or one).
//!
//! Exactly one run executes at a time (the Postgres advisory lock of
//! [`Store::try_lock_janitor`]). A real run commits in chunks, each chunk's
//! changes together with its audit events and the run's counts so far, so a
//! run that dies midway is resumed by the next one — same id, same clock —
//! and ends where an uninterrupted run would have. A dry run executes the
//! very same statements inside one transaction and rolls it back: its counts
//! are the real run's by construction, and nothing changes (it holds the row
//! locks of what it touched until it ends).

use std::time::Instant;

use chrono::{DateTime, Utc};
use hindsight_store::maintenance::runs::{NewRun, RunRow};
use sqlx::Connection;
use uuid::Uuid;

use crate::{
    counts::Counts,
    exec::Exec,
    export::Export,
    janitor::Janitor,
    request::{JanitorError, Outcome, RunReport, RunRequest},
};

impl Janitor {
    /// Executes a run if no other is executing. A real run first resumes a
    /// run a dead janitor left unfinished.
    pub async fn run(&self, request: RunRequest) -> Result<Outcome, JanitorError> {
        let Some(lock) = self.store.try_lock_janitor().await? else {
            return Ok(Outcome::Busy);
        };
        let outcome = self.run_locked(request).await;
        if let Err(e) = lock.release().await {
            tracing::warn!(error = %e, "releasing the janitor lock (it goes with its connection)");
        }
        outcome
    }

    async fn run_locked(&self, request: RunRequest) -> Result<Outcome, JanitorError> {
        self.store.abandon_dry_runs().await?;
        if !request.dry_run
            && let Some(row) = self.store.interrupted_run().await?
        {
            tracing::warn!(run = %row.id, as_of = %row.as_of, "resuming a run left unfinished");
            let report = self.execute(&row, true).await?;
            let same_slot =
                request.scheduled_for.is_none() || request.scheduled_for == row.scheduled_for;
            if same_slot {
                return Ok(Outcome::Ran(Box::new(report)));
            }
        }
        if let (Some(slot), false) = (request.scheduled_for, request.dry_run)
            && self.store.slot_served(slot).await?
        {
            return Ok(Outcome::AlreadyServed {
                scheduled_for: slot,
            });
        }
        let id = Uuid::new_v4();
        let as_of = request.as_of.unwrap_or_else(Utc::now);
        let inserted = self
            .store
            .insert_run(&NewRun {
                id,
                tenant: request.tenant.as_deref(),
                as_of,
                scheduled_for: request.scheduled_for,
                trigger: request.trigger.as_str(),
                dry_run: request.dry_run,
                host: &self.host,
            })
            .await?;
        if !inserted {
            return Ok(Outcome::AlreadyServed {
                scheduled_for: request.scheduled_for.unwrap_or(as_of),
            });
        }
        let row = self
            .store
            .run_row(id)
            .await?
            .ok_or(JanitorError::NoSuchRun(id))?;
        Ok(Outcome::Ran(Box::new(self.execute(&row, false).await?)))
    }

    /// Executes (or resumes) the run of `row`, then records and publishes its end.
    async fn execute(&self, row: &RunRow, resumed: bool) -> Result<RunReport, JanitorError> {
        let started = Instant::now();
        let mut exec = Exec {
            janitor: self,
            id: row.id,
            as_of: row.as_of,
            tenant: row.tenant.clone(),
            dry_run: row.dry_run,
            counts: Counts::from_json(&row.counts),
            chunks: 0,
            export: Export::new(&self.exports, row.id),
            reader: None,
        };
        exec.counts.seconds.clear();
        let mut conn = self.store.dedicated_connection().await?;
        if !row.dry_run {
            exec.reader = Some(self.store.dedicated_connection().await?);
        }
        let result = if row.dry_run {
            let mut outer = conn.begin().await?;
            let result = exec.steps(&mut outer).await;
            outer.rollback().await?;
            result
        } else {
            exec.steps(&mut conn).await
        };
        let mut errors = Vec::new();
        let status = match result {
            Ok(()) => "finished",
            Err(JanitorError::Crashed(id)) => return Err(JanitorError::Crashed(id)),
            Err(e) => {
                tracing::error!(run = %row.id, error = %e, "maintenance run failed");
                errors.push(e.to_string());
                "failed"
            }
        };
        exec.counts.expired_working_keys = self.expired_working_keys(row.as_of).await;
        let mut counts = exec.counts;
        counts
            .seconds
            .insert("total".into(), started.elapsed().as_secs_f64());
        self.store
            .finish_run(
                row.id,
                status,
                &counts.to_json(),
                &serde_json::to_value(&errors).unwrap_or_default(),
            )
            .await?;
        let report = RunReport {
            id: row.id,
            dry_run: row.dry_run,
            tenant: row.tenant.clone(),
            trigger: row.trigger.clone(),
            as_of: row.as_of,
            scheduled_for: row.scheduled_for,
            resumed,
            status: status.to_string(),
            counts,
            errors,
            seconds: started.elapsed().as_secs_f64(),
            chunks: exec.chunks,
        };
        crate::metrics::run_finished(&report);
        self.publish(&report).await;
        Ok(report)
    }

    /// Keys of working memory that expired between the previous run and this one.
    async fn expired_working_keys(&self, as_of: DateTime<Utc>) -> Option<u64> {
        let (_, js, ns) = self.bus.as_ref()?;
        let since = match self.store.previous_run_as_of(as_of).await {
            Ok(Some(t)) => t,
            Ok(None) => as_of - chrono::Duration::days(7),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the previous run");
                return None;
            }
        };
        match hindsight_recall::working_expiry::expired_keys(js, ns, self.working_ttl, since, as_of)
            .await
        {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "cannot count expired working-memory keys");
                None
            }
        }
    }

    async fn publish(&self, report: &RunReport) {
        let Some((client, _, ns)) = &self.bus else {
            return;
        };
        let subject = ns.absolute("events.maintenance");
        match serde_json::to_vec(report) {
            Ok(body) => {
                if let Err(e) = client.publish(subject, body.into()).await {
                    tracing::warn!(error = %e, "cannot publish the maintenance summary");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode the maintenance summary"),
        }
    }
}
