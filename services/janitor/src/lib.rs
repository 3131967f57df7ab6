//! The janitor: the weekly maintenance of memory.
//!
//! A run ([`run`], its steps in [`exec`] and [`retention`]) takes every tenant's memories
//! through its steps, in order — repair, decay, merge (cosine ≥ 0.95), archive, review,
//! consolidate, purge — and then the `turns` archive (turns),
//! deciding with the plain functions of [`repair`], [`policy`], [`similarity`] and
//! [`consolidate`], reading and writing in chunks through
//! `hindsight_store::maintenance`. Runs are scheduled ([`schedule`]),
//! asked for over NATS ([`control`]), recorded, reversible ([`restore`]) and
//! one at a time across replicas.

pub mod consolidate;
pub mod control;
pub mod counts;
mod exec;
mod export;
pub mod janitor;
mod metrics;
pub mod policy;
pub mod repair;
pub mod request;
pub mod restore;
mod retention;
pub mod run;
pub mod schedule;
pub mod similarity;
pub mod summary;

use std::time::Duration;

use hindsight_shared::{
    config::Config,
    service::{self, Context, StageTask},
};
use hindsight_store::Store;
pub use janitor::Janitor;
pub use request::{JanitorError, Outcome, RunReport, RunRequest, Trigger};

/// The policy of a configuration.
pub fn policy(config: &Config) -> policy::Policy {
    let days = |d: Duration| chrono::Duration::seconds(d.as_secs() as i64);
    let j = &config.janitor;
    policy::Policy {
        decay_after: days(j.decay_after),
        decay_half_life: days(j.decay_half_life),
        archive_below: j.archive_below,
        archive_idle: days(j.archive_idle),
        consolidate_age: days(j.consolidate_age),
        consolidate_max_accesses: j.consolidate_max_accesses,
        merge_cosine: j.merge_cosine,
        retention: days(j.retention),
        deleted_retention: days(j.deleted_retention),
        quarantine_review: days(j.quarantine_review),
        turn_content_retention: days(j.turn_content_retention),
        turn_retention: days(j.turn_retention),
        safety_floor: j.safety_floor,
    }
}

/// How long working-memory keys live (the `WORKING` bucket's TTL in `streams/`).
pub fn working_ttl() -> Duration {
    hindsight_shared::streams::Topology::load()
        .ok()
        .and_then(|t| {
            t.buckets
                .iter()
                .find(|b| b.name == hindsight_recall::working::BUCKET)
                .map(|b| b.ttl)
        })
        .unwrap_or(Duration::from_secs(3600))
}

/// A janitor for this configuration, publishing on its NATS connection,
/// writing summaries with the configured LLM (`HINDSIGHT_LLM_BASE_URL`) if
/// any, and splitting wrongly merged memories with the configured embedder.
pub fn janitor(config: &Config, store: Store, bus: Option<&hindsight_shared::bus::Bus>) -> Janitor {
    let mut janitor = Janitor::new(store, policy(config), &config.data_dir)
        .with_embed_config(config.embed.clone());
    match hindsight_llm::LlmClient::from_config(&config.llm) {
        Ok(Some(llm)) => janitor = janitor.with_llm(std::sync::Arc::new(llm)),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "consolidating with the rules"),
    }
    match bus {
        Some(bus) => janitor.with_bus(
            bus.client.clone(),
            bus.js.clone(),
            config.namespace.clone(),
            working_ttl(),
        ),
        None => janitor,
    }
}

/// The janitor's tasks, in its own process and in `hindsight up` alike: the
/// schedule (with the run owed at start-up) and the NATS requests of
/// `hindsight maintenance`.
pub fn tasks(ctx: &Context) -> anyhow::Result<Vec<StageTask>> {
    let schedule =
        schedule::Schedule::parse(&ctx.config.janitor.cron).map_err(anyhow::Error::msg)?;
    let janitor = janitor(&ctx.config, ctx.store.clone(), Some(&ctx.bus));
    let (client, ns) = (ctx.bus.client.clone(), ctx.config.namespace.clone());
    Ok(vec![service::background(
        "janitor",
        move |shutdown| async move {
            let control = control::serve(janitor.clone(), client, ns, shutdown.clone());
            let scheduled = schedule::serve(janitor, schedule, shutdown.clone());
            let (a, b) = tokio::join!(control, scheduled);
            for result in [a, b] {
                if let Err(e) = result {
                    tracing::error!(error = %e, "janitor task stopped");
                }
            }
        },
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_defaults_are_the_policys_defaults() {
        let config = Config::from_lookup(|_| None).expect("defaults");
        assert_eq!(policy(&config), policy::Policy::default());
        let tuned = Config::from_lookup(|k| match k {
            "HINDSIGHT_JANITOR_ARCHIVE_BELOW" => Some("0.3".into()),
            "HINDSIGHT_JANITOR_MERGE_COSINE" => Some("0.97".into()),
            "HINDSIGHT_JANITOR_ARCHIVE_IDLE" => Some("60d".into()),
            _ => None,
        })
        .expect("valid");
        let p = policy(&tuned);
        assert_eq!((p.archive_below, p.merge_cosine), (0.3, 0.97));
        assert_eq!(p.archive_idle, chrono::Duration::days(60));
        let refused = Config::from_lookup(|k| {
            (k == "HINDSIGHT_JANITOR_MERGE_COSINE").then(|| "0.5".to_string())
        });
        assert!(refused.is_err());
    }
}
