//! The pipeline's benches: one stage (filter, extract) or the whole ingest,
//! timed in a sandbox on generated or LoCoMo turns.

use std::time::Instant;

use async_nats::jetstream::{self, context::PublishAckFuture};
use hindsight_core::Topic;
use hindsight_shared::{
    sandbox::Sandbox,
    service::{self, Context},
    synthetic,
};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{percentile, publish_all, until};
use crate::stages::{self, StageName};

#[derive(Serialize)]
pub(super) struct IngestReport {
    pub(super) turns: usize,
    pub(super) facts: u64,
    pub(super) memories: u64,
    pub(super) seconds: f64,
    pub(super) turns_per_s: f64,
    pub(super) facts_per_s: f64,
    pub(super) latency_p50_ms: f64,
    pub(super) latency_p99_ms: f64,
    pub(super) embedder: String,
    /// Threads one call of the bare embedder ran on (candle's default: one per core).
    pub(super) embedder_threads: String,
    pub(super) embedder_texts_per_s: f64,
    /// facts/s through every stage ÷ texts/s of the bare embedder at batch 16 on the same texts.
    pub(super) pipeline_to_embedder_ratio: f64,
    /// The bare embedder again, with the embed stage's windowing: each window
    /// of `HINDSIGHT_EMBED_WINDOW` texts sorted by length, then batches of 16.
    pub(super) embedder_windowed_texts_per_s: f64,
    /// facts/s through every stage ÷ the windowed bare embedder's texts/s.
    pub(super) pipeline_to_windowed_embedder_ratio: f64,
}

#[derive(Serialize)]
pub(super) struct Report {
    pub(super) stage: &'static str,
    pub(super) turns: usize,
    /// Messages the stage emitted (kept turns, facts).
    pub(super) emitted: u64,
    pub(super) seconds: f64,
    pub(super) turns_per_s: f64,
    pub(super) emitted_per_s: f64,
}

/// Runs the pipeline up to `stage` in a sandbox and times that stage.
pub(super) async fn bench(stage: StageName, turns: usize) -> anyhow::Result<Report> {
    let base = crate::cmd::setup()?;
    let sandbox = Sandbox::new(&base, "bench");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let shutdown = CancellationToken::new();
    let result = measure(&ctx, stage, turns, &shutdown).await;
    shutdown.cancel();
    sandbox.remove(&ctx.bus).await?;
    result
}

async fn start(
    ctx: &Context,
    stage: StageName,
    shutdown: &CancellationToken,
) -> anyhow::Result<service::Running> {
    let running =
        service::start(ctx, stages::tasks(&[stage], ctx).await?, shutdown.clone()).await?;
    running.readiness.wait().await;
    Ok(running)
}

async fn publish(ctx: &Context, turns: usize) -> anyhow::Result<()> {
    publish_all(
        ctx,
        "bench",
        (0..turns).map(|i| (format!("bench:bench-{i}"), synthetic::turn("bench", i))),
    )
    .await
}

async fn messages(ctx: &Context, stream: &str) -> anyhow::Result<u64> {
    let mut stream = ctx
        .bus
        .js
        .get_stream(ctx.config.namespace.stream_name(stream))
        .await?;
    Ok(stream.info().await?.state.messages)
}

async fn measure(
    ctx: &Context,
    stage: StageName,
    turns: usize,
    shutdown: &CancellationToken,
) -> anyhow::Result<Report> {
    let filter = start(ctx, StageName::Filter, shutdown).await?;
    let (seconds, emitted) = match stage {
        StageName::Filter => {
            let started = Instant::now();
            publish(ctx, turns).await?;
            until("every turn on kept", async || {
                Ok(messages(ctx, "KEPT").await? >= turns as u64)
            })
            .await?;
            (
                started.elapsed().as_secs_f64(),
                messages(ctx, "KEPT").await?,
            )
        }
        StageName::Extract => {
            publish(ctx, turns).await?;
            until("every turn on kept", async || {
                Ok(messages(ctx, "KEPT").await? >= turns as u64)
            })
            .await?;
            let started = Instant::now();
            let extract = start(ctx, StageName::Extract, shutdown).await?;
            until("every turn's facts on facts", async || {
                let (settled, facts): (i64, i64) = sqlx::query_as(
                    "SELECT count(*), coalesce(sum(jsonb_array_length(facts)), 0)::bigint
                     FROM turns WHERE extract_outcome IS NOT NULL",
                )
                .fetch_one(&ctx.store.pool)
                .await?;
                Ok(settled >= turns as i64 && messages(ctx, "FACTS").await? >= facts as u64)
            })
            .await?;
            let seconds = started.elapsed().as_secs_f64();
            shutdown.cancel();
            extract.wait().await?;
            (seconds, messages(ctx, "FACTS").await?)
        }
        StageName::Embed | StageName::Persist => {
            anyhow::bail!("`bench ingest` measures embed and persist, end to end")
        }
        StageName::Gateway => anyhow::bail!("`bench recall` measures the gateway's recall"),
        StageName::Janitor => anyhow::bail!("`bench janitor` measures a maintenance run"),
    };
    shutdown.cancel();
    filter.wait().await?;
    Ok(Report {
        stage: stage.name(),
        turns,
        emitted,
        seconds,
        turns_per_s: turns as f64 / seconds,
        emitted_per_s: emitted as f64 / seconds,
    })
}

/// The turns of an ingest: LoCoMo's, repeated under new ids, or synthetic.
fn ingest_turns(turns: usize, data: &std::path::Path) -> Vec<serde_json::Value> {
    let locomo = crate::locomo::load(data)
        .ok()
        .filter(|d| !d.turns.is_empty());
    (0..turns)
        .map(|i| match &locomo {
            Some(d) => {
                let t = &d.turns[i % d.turns.len()];
                let round = i / d.turns.len();
                let mut v = t.envelope();
                v["tenant"] = json!("bench");
                v["turn_id"] = json!(format!("r{round}-{}-{}", t.user_id, t.turn_id));
                v["session_id"] = json!(format!("r{round}-{}", t.session_id));
                v
            }
            None => synthetic::turn("bench", i),
        })
        .collect()
}

pub(super) async fn ingest(
    turns: usize,
    data: &std::path::Path,
    embed_replicas: usize,
) -> anyhow::Result<IngestReport> {
    let base = crate::cmd::setup()?;
    let sandbox = Sandbox::new(&base, "bench");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let shutdown = CancellationToken::new();
    let mut names = stages::PIPELINE.to_vec();
    names.extend(std::iter::repeat_n(
        StageName::Embed,
        embed_replicas.max(1) - 1,
    ));
    let running =
        service::start(&ctx, stages::tasks(&names, &ctx).await?, shutdown.clone()).await?;
    running.readiness.wait().await;
    // The encoder model loads and fits when the first borderline turn comes
    // (a minute or more the first time): before the clock starts, as the
    // learnt model is fit at start.
    if let Some(encoder) =
        hindsight_extract::screen::Encoder::from_config(&ctx.config).map_err(anyhow::Error::msg)?
    {
        encoder.warm().await.map_err(anyhow::Error::msg)?;
    }
    let result = measure_ingest(&ctx, turns, data).await;
    shutdown.cancel();
    running.wait().await?;
    sandbox.remove(&ctx.bus).await?;
    result
}

async fn measure_ingest(
    ctx: &Context,
    turns: usize,
    data: &std::path::Path,
) -> anyhow::Result<IngestReport> {
    let envelopes = ingest_turns(turns, data);
    let subject = ctx.config.namespace.subject(Topic::Turns, "bench");
    let started = Instant::now();
    let mut published_at = std::collections::HashMap::new();
    let mut in_flight: Vec<PublishAckFuture> = Vec::new();
    for v in &envelopes {
        let id = v["turn_id"].as_str().unwrap_or_default().to_string();
        let msg = jetstream::message::PublishMessage::build()
            .payload(v.to_string().into_bytes().into())
            .message_id(format!("bench:{id}"));
        published_at.insert(id, chrono::Utc::now());
        in_flight.push(ctx.bus.js.send_publish(subject.clone(), msg).await?);
        if in_flight.len() == 256 {
            for ack in in_flight.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in in_flight.drain(..) {
        ack.await?;
    }
    // Done when every turn went through the filter (kept or dropped), every kept
    // turn was extracted, every fact is in a memory and the index has caught up.
    until("every turn persisted and searchable", async || {
        Ok(ctx.store.drained(turns).await?)
    })
    .await?;
    let seconds = started.elapsed().as_secs_f64();

    let done_at: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT turn_id, max(added_at) FROM memory_sources GROUP BY turn_id")
            .fetch_all(&ctx.store.pool)
            .await?;
    let mut latencies: Vec<f64> = done_at
        .iter()
        .filter_map(|(id, at)| {
            published_at
                .get(id)
                .map(|p| (*at - *p).num_microseconds().unwrap_or(0) as f64 / 1000.0)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let (facts, memories): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_sources), (SELECT count(*) FROM memories)",
    )
    .fetch_one(&ctx.store.pool)
    .await?;

    // The bare embedder on the same texts, at batch 16, with nothing else
    // running, in a process of its own (see `bare`).
    let texts: Vec<String> = sqlx::query_scalar(
        "SELECT f->>'content' FROM turns, jsonb_array_elements(facts) AS f WHERE facts IS NOT NULL",
    )
    .fetch_all(&ctx.store.pool)
    .await?;
    let bare = super::bare::in_own_process(&texts, ctx.config.embed.window).await?;
    let (embedder_texts_per_s, embedder_windowed_texts_per_s) =
        (bare.texts_per_s, bare.windowed_texts_per_s);
    let facts_per_s = facts as f64 / seconds;
    Ok(IngestReport {
        turns,
        facts: facts as u64,
        memories: memories as u64,
        seconds,
        turns_per_s: turns as f64 / seconds,
        facts_per_s,
        latency_p50_ms: percentile(&latencies, 0.5),
        latency_p99_ms: percentile(&latencies, 0.99),
        embedder: bare.embedder,
        embedder_threads: bare.threads,
        embedder_texts_per_s,
        pipeline_to_embedder_ratio: facts_per_s / embedder_texts_per_s,
        embedder_windowed_texts_per_s,
        pipeline_to_windowed_embedder_ratio: facts_per_s / embedder_windowed_texts_per_s,
    })
}
