//! The metrics and log line of a finished run (defined in `hindsight_shared::events`).

use std::time::Duration;

use hindsight_shared::events::MaintenanceRan;

use crate::request::RunReport;

pub fn run_finished(report: &RunReport) {
    let c = &report.counts.total;
    let run = report.id.to_string();
    MaintenanceRan {
        run: &run,
        dry_run: report.dry_run,
        status: &report.status,
        elapsed: Duration::from_secs_f64(report.seconds),
        changes: &[
            ("reinstated", c.reinstated),
            ("split", c.split),
            ("decayed", c.decayed),
            ("merged", c.merged),
            ("archived", c.archived),
            ("reviewed", c.reviewed),
            ("consolidated", c.consolidated),
            ("summaries", c.summaries),
            ("purged", c.purged),
            ("turns_emptied", c.turns_emptied),
            ("turns_purged", c.turns_purged),
        ],
    }
    .emit();
}
