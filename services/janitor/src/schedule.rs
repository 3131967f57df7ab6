//! When runs happen: the cron schedule (`HINDSIGHT_JANITOR_CRON`, UTC), and
//! the run a janitor owes at start-up when the latest slot passed with no
//! janitor up. Each run names the slot it serves, so however many janitors
//! fire for a slot, one real run serves it.

use chrono::{DateTime, Timelike, Utc};
use croner::{Cron, parser::CronParser};
use tokio_cron_scheduler::{Job, JobScheduler};
use tokio_util::sync::CancellationToken;

use crate::{
    janitor::Janitor,
    request::{Outcome, RunRequest, Trigger},
};

/// A parsed schedule.
#[derive(Clone)]
pub struct Schedule {
    text: String,
    cron: Cron,
}

impl Schedule {
    /// Parses a six-field cron expression (seconds first), as the scheduler does.
    pub fn parse(text: &str) -> Result<Self, String> {
        let cron = CronParser::builder()
            .seconds(croner::parser::Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(text)
            .map_err(|e| format!("invalid cron {text:?}: {e}"))?;
        Ok(Self {
            text: text.to_string(),
            cron,
        })
    }

    /// The latest slot at or before `now`.
    pub fn previous_slot(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_previous_occurrence(&now, true)
            .ok()
            .map(whole_second)
    }

    /// The first slot after `now`.
    pub fn next_slot(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&now, false)
            .ok()
            .map(whole_second)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The search keeps the sub-second part of its start; a slot is a whole
/// second, the same for every janitor that computes it.
fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(0).unwrap_or(t)
}

/// Runs the slot owed at start-up, then every slot of the schedule, until `shutdown`.
pub async fn serve(
    janitor: Janitor,
    schedule: Schedule,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    if let Some(slot) = schedule.previous_slot(Utc::now())
        && !janitor.store().slot_served(slot).await?
    {
        tracing::info!(%slot, "the latest scheduled run was missed: running it now");
        run_slot(&janitor, slot, Trigger::Startup).await;
    }
    let mut scheduler = JobScheduler::new()
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the scheduler: {e}"))?;
    let (job_janitor, job_schedule) = (janitor.clone(), schedule.clone());
    let job = Job::new_async(schedule.as_str(), move |_, _| {
        let (janitor, schedule) = (job_janitor.clone(), job_schedule.clone());
        Box::pin(async move {
            if let Some(slot) = schedule.previous_slot(Utc::now()) {
                run_slot(&janitor, slot, Trigger::Schedule).await;
            }
        })
    })
    .map_err(|e| anyhow::anyhow!("invalid cron {:?}: {e}", schedule.as_str()))?;
    scheduler
        .add(job)
        .await
        .map_err(|e| anyhow::anyhow!("cannot schedule the janitor: {e}"))?;
    scheduler
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the scheduler: {e}"))?;
    tracing::info!(cron = schedule.as_str(), next = ?schedule.next_slot(Utc::now()), "janitor scheduled");
    shutdown.cancelled().await;
    if let Err(e) = scheduler.shutdown().await {
        tracing::warn!(error = %e, "stopping the scheduler");
    }
    Ok(())
}

async fn run_slot(janitor: &Janitor, slot: DateTime<Utc>, trigger: Trigger) {
    let request = RunRequest {
        dry_run: false,
        tenant: None,
        as_of: None,
        trigger,
        scheduled_for: Some(slot),
    };
    match janitor.run(request).await {
        Ok(Outcome::Ran(report)) => {
            tracing::info!(run = %report.id, %slot, status = %report.status, "scheduled maintenance run ended")
        }
        Ok(Outcome::Busy) => tracing::info!(%slot, "another janitor is running maintenance"),
        Ok(Outcome::AlreadyServed { .. }) => {
            tracing::info!(%slot, "this slot's run was served by another janitor")
        }
        Err(e) => tracing::error!(%slot, error = %e, "scheduled maintenance run failed"),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn the_default_schedule_is_sunday_two_utc() {
        let s = Schedule::parse("0 0 2 * * Sun").expect("parses");
        // Tuesday 2026-12-01 08:00 → previous Sunday 2026-11-29 02:00, next 2026-12-06 02:00.
        let now = Utc
            .with_ymd_and_hms(2026, 12, 1, 8, 0, 0)
            .single()
            .expect("date");
        assert_eq!(
            s.previous_slot(now),
            Utc.with_ymd_and_hms(2026, 11, 29, 2, 0, 0).single()
        );
        assert_eq!(
            s.next_slot(now),
            Utc.with_ymd_and_hms(2026, 12, 6, 2, 0, 0).single()
        );
        assert!(Schedule::parse("every sunday").is_err());
    }
}
