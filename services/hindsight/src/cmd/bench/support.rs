//! What every bench (and `hindsight eval locomo`) shares: the sandbox it runs
//! in, publishing turns and waiting for the pipeline, a seeded generator,
//! percentiles.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishAckFuture};
use hindsight_core::Topic;
use hindsight_shared::{sandbox::Sandbox, service::Context};

/// Runs `work` in a throw-away namespace, database and data directory, which
/// are removed afterwards, also when `work` fails.
pub(crate) async fn sandboxed<T>(
    work: impl AsyncFnOnce(&Context) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let base = crate::cmd::setup()?;
    let sandbox = Sandbox::new(&base, "bench");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let result = work(&ctx).await;
    sandbox.remove(&ctx.bus).await?;
    result
}

/// A seeded generator, so runs draw the same corpus and queries and are comparable.
pub(crate) fn seeded(seed: u64) -> fastrand::Rng {
    fastrand::Rng::with_seed(seed)
}

/// Uniform in [-1, 1): one coordinate of a random vector.
pub(crate) fn unit(rng: &mut fastrand::Rng) -> f32 {
    rng.f32() * 2.0 - 1.0
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Publishes turns of one tenant with their message ids, a window of acks
/// in flight at a time, and waits for every ack.
pub(crate) async fn publish_all(
    ctx: &Context,
    tenant: &str,
    turns: impl Iterator<Item = (String, serde_json::Value)>,
) -> anyhow::Result<()> {
    let subject = ctx.config.namespace.subject(Topic::Turns, tenant);
    let mut in_flight: Vec<PublishAckFuture> = Vec::with_capacity(1024);
    for (msg_id, turn) in turns {
        let msg = jetstream::message::PublishMessage::build()
            .payload(turn.to_string().into_bytes().into())
            .message_id(msg_id);
        in_flight.push(ctx.bus.js.send_publish(subject.clone(), msg).await?);
        if in_flight.len() == 1024 {
            for ack in in_flight.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in in_flight.drain(..) {
        ack.await?;
    }
    Ok(())
}

/// Waits until `done`, for at most 15 minutes.
pub(crate) async fn until(
    what: &str,
    mut done: impl AsyncFnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    while !done().await? {
        if Instant::now() > deadline {
            anyhow::bail!("{what} did not happen within 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
