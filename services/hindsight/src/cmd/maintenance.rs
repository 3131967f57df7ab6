//! `hindsight maintenance`: run the janitor's steps now, undo a run, list runs.
//! A run or restore goes to the running janitor over NATS when one is up
//! (so it takes its turn under the same lock), else it runs in this process.

use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use hindsight_janitor::{
    Outcome, RunReport, RunRequest, Trigger,
    control::{self, RunAsk},
};
use hindsight_shared::{Config, bus::Bus};
use hindsight_store::Store;
use uuid::Uuid;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run repair, decay, archive, merge, review, consolidate, purge and turns now (every tenant, or one).
    Run {
        /// Report what a run would change, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only this tenant's memories.
        #[arg(long)]
        tenant: Option<String>,
        /// Decide as of this instant (RFC 3339, UTC) instead of now: with
        /// --dry-run, a preview of a later run.
        #[arg(long)]
        as_of: Option<DateTime<Utc>>,
        /// Print the run's report as JSON (per-step counts under `counts`).
        #[arg(long)]
        json: bool,
    },
    /// Put back what a run repaired, decayed, merged, archived (reviews included) or
    /// consolidated (its purges and the turns it emptied or deleted are in its export
    /// under HINDSIGHT_DATA_DIR/exports/). Rows come back as they were, clocks included:
    /// with the same settings the next run takes them again.
    Restore {
        run: Uuid,
        /// Also write back what the run exported: the memories it purged and the
        /// turns it emptied or deleted (read by the janitor that ran it).
        #[arg(long)]
        purged: bool,
        #[arg(long)]
        json: bool,
    },
    /// List the latest runs, newest first.
    Runs {
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
}

/// How long to wait for a janitor's answer: a run over a million memories takes minutes.
const ASK_TIMEOUT: Duration = Duration::from_secs(3600);

pub async fn run(command: Command) -> anyhow::Result<()> {
    let config = super::setup()?;
    let bus = match Bus::connect(&config).await {
        Ok(bus) => Some(bus),
        Err(e) => {
            tracing::warn!(error = %e, "NATS unavailable: running in this process without publishing");
            None
        }
    };
    match command {
        Command::Run {
            dry_run,
            tenant,
            as_of,
            json,
        } => {
            let ask = RunAsk {
                dry_run,
                tenant,
                as_of,
            };
            let outcome = match remote(&bus, |c| {
                control::ask_run(c, &config.namespace, &ask, ASK_TIMEOUT)
            })
            .await?
            {
                Some(answer) => answer.map_err(anyhow::Error::msg)?,
                None => {
                    let janitor = local(&config, &bus).await?;
                    janitor
                        .run(RunRequest {
                            dry_run: ask.dry_run,
                            tenant: ask.tenant,
                            as_of: ask.as_of,
                            trigger: Trigger::Manual,
                            scheduled_for: None,
                        })
                        .await?
                }
            };
            match outcome {
                Outcome::Ran(report) => {
                    if json {
                        println!("{}", serde_json::to_string_pretty(&report)?);
                    } else {
                        print_report(&report);
                    }
                    if report.status != "finished" {
                        anyhow::bail!(
                            "run {} {}: {}",
                            report.id,
                            report.status,
                            report.errors.join("; ")
                        );
                    }
                }
                Outcome::Busy => {
                    anyhow::bail!("another maintenance run is executing; try again when it ends")
                }
                Outcome::AlreadyServed { scheduled_for } => {
                    println!("the run of {scheduled_for} was already served")
                }
            }
        }
        Command::Restore { run, purged, json } => {
            let ask = control::RestoreAsk { run, purged };
            let report = match remote(&bus, |c| {
                control::ask_restore(c, &config.namespace, &ask, ASK_TIMEOUT)
            })
            .await?
            {
                Some(answer) => answer.map_err(anyhow::Error::msg)?,
                None => local(&config, &bus).await?.restore(run, purged).await?,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let r = &report.restored;
                println!("restored run {run}:");
                println!(
                    "  repairs undone       {} superseded again, {} joined back",
                    r.resuperseded, r.rejoined
                );
                println!("  undecayed            {}", r.undecayed);
                println!("  unarchived           {}", r.unarchived);
                println!(
                    "  unfolded             {} (merged or consolidated memories active again)",
                    r.unfolded
                );
                println!("  survivors            {}", r.survivors);
                println!(
                    "  summaries removed    {} (kept {}: facts merged into them since)",
                    r.summaries_removed, r.summaries_kept
                );
                println!(
                    "  skipped              {} (changed since the run)",
                    r.skipped
                );
                if purged {
                    println!(
                        "  purged, written back {} of {}",
                        r.purged_restored, r.purged
                    );
                    let t = &report.turns;
                    println!(
                        "  turns                {} refilled, {} written back, {} already there",
                        t.refilled, t.reinserted, t.unchanged
                    );
                } else {
                    println!(
                        "  purged, not restored {} (--purged writes them back from the run's export)",
                        r.purged
                    );
                }
            }
        }
        Command::Runs { limit, json } => {
            let store = Store::connect(&config.database_url, config.db_pool).await?;
            let runs = store.runs(limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
            } else {
                for r in runs {
                    let c = hindsight_janitor::counts::Counts::from_json(&r.counts).total;
                    println!(
                        "{} {} {:<8} {:<8}{} decayed {} merged {} archived {} reviewed {} consolidated {} purged {} turns emptied {} purged {}",
                        r.id,
                        r.started_at.format("%Y-%m-%d %H:%M"),
                        r.trigger,
                        r.status,
                        if r.dry_run { " (dry)" } else { "" },
                        c.decayed,
                        c.merged,
                        c.archived,
                        c.reviewed,
                        c.consolidated,
                        c.purged,
                        c.turns_emptied,
                        c.turns_purged
                    );
                }
            }
        }
    }
    Ok(())
}

/// Asks the running janitor; `None` when there is none (or no NATS).
async fn remote<'a, T, F, Fut>(
    bus: &'a Option<Bus>,
    ask: F,
) -> anyhow::Result<Option<Result<T, String>>>
where
    F: FnOnce(&'a async_nats::Client) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Result<T, String>>, String>>,
{
    let Some(bus) = bus else { return Ok(None) };
    let answer = ask(&bus.client).await.map_err(anyhow::Error::msg)?;
    if answer.is_none() {
        tracing::info!("no janitor is running: running in this process");
    }
    Ok(answer)
}

async fn local(config: &Config, bus: &Option<Bus>) -> anyhow::Result<hindsight_janitor::Janitor> {
    let store = Store::connect(&config.database_url, config.db_pool)
        .await
        .context("connecting to Postgres")?;
    Ok(hindsight_janitor::janitor(config, store, bus.as_ref()))
}

fn print_report(r: &RunReport) {
    let c = &r.counts.total;
    println!(
        "run {}{}{} as of {}: {} in {:.1} s",
        r.id,
        if r.dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        },
        if r.resumed { " (resumed)" } else { "" },
        r.as_of.to_rfc3339(),
        r.status,
        r.seconds
    );
    println!(
        "  repaired      {} reinstated, {} split off ({} left whole: no embedder of their model)",
        c.reinstated, c.split, c.unsplit
    );
    println!("  decayed       {}", c.decayed);
    println!(
        "  merged        {} (into {} survivors)",
        c.merged, c.merge_survivors
    );
    println!("  archived      {}", c.archived);
    println!(
        "  reviewed      {} (quarantined past their review, archived)",
        c.reviewed
    );
    println!(
        "  consolidated  {} (into {} summaries)",
        c.consolidated, c.summaries
    );
    println!(
        "  purged        {} ({} of them superseded)",
        c.purged, c.purged_superseded
    );
    println!(
        "  turns         {} emptied, {} deleted",
        c.turns_emptied, c.turns_purged
    );
    if let Some(n) = r.counts.expired_working_keys {
        println!("  working-memory keys expired since the previous run: {n}");
    }
    for e in &r.errors {
        println!("  error: {e}");
    }
}
