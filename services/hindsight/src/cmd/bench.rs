//! `hindsight bench`: throughput of the filter and extract stages and of the
//! whole ingest (`bench recall` lives in `bench_recall.rs`, `bench janitor`
//! in `bench_janitor.rs`), each in a
//! throw-away namespace and database, so it can run next to a live
//! deployment without touching it.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishAckFuture};
use hindsight_core::Topic;
use hindsight_shared::{
    sandbox::Sandbox,
    service::{self, Context},
};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::stages::{self, StageName};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Turns per second through the filter stage, from publish to `kept`.
    Filter {
        /// How many turns to publish.
        #[arg(long, default_value_t = 20_000)]
        turns: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Turns and facts per second from publish to persisted and searchable, through
    /// every stage with the configured extractor and embedder; then, on the same
    /// texts, the bare embedder's throughput at batch 16, and the ratio of the two.
    Ingest {
        /// How many turns to publish (the LoCoMo turns, repeated under new ids).
        #[arg(long, default_value_t = 2_000)]
        turns: usize,
        /// LoCoMo conversations to take the turns from; synthetic turns when absent.
        #[arg(long, default_value = "../shared/eval/locomo-dev.json")]
        data: std::path::PathBuf,
        /// Embed stage replicas (each with its own model) sharing the stage's consumer.
        #[arg(long, default_value_t = 1)]
        embed_replicas: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Recall latency (p50/p90/p99) and qps for one user holding `--memories`
    /// memories, end to end including the query embedding, with each part's
    /// p50/p99 (embedding, vector search, keyword, entity, rows, rank).
    Recall {
        /// Memories of the measured user (20 other users hold 1,000 each).
        #[arg(long, default_value_t = 100_000)]
        memories: usize,
        /// Recall requests to time.
        #[arg(long, default_value_t = 1_000)]
        queries: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// One real maintenance run of the janitor over `--memories` memories
    /// (written straight to Postgres, backdated over two years): its time per
    /// step and the process's peak memory during the run.
    Janitor {
        /// Memories to load before the run.
        #[arg(long, default_value_t = 1_000_000)]
        memories: usize,
        /// Users holding them (unevenly), in up to three tenants.
        #[arg(long, default_value_t = 1_000)]
        users: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Turns and facts per second through the extract stage alone (the
    /// configured extractor: the rules unless HINDSIGHT_LLM_BASE_URL is set).
    /// The filter first fills `kept`; the clock runs from the extract stage's
    /// start until every turn's facts are on `facts`.
    Extract {
        /// How many turns to publish.
        #[arg(long, default_value_t = 20_000)]
        turns: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct IngestReport {
    turns: usize,
    facts: u64,
    memories: u64,
    seconds: f64,
    turns_per_s: f64,
    facts_per_s: f64,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    embedder: String,
    embedder_texts_per_s: f64,
    /// facts/s through every stage ÷ texts/s of the bare embedder at batch 16 on the same texts.
    pipeline_to_embedder_ratio: f64,
    /// The bare embedder again, with the embed stage's windowing: each window
    /// of `HINDSIGHT_EMBED_WINDOW` texts sorted by length, then batches of 16.
    embedder_windowed_texts_per_s: f64,
    /// facts/s through every stage ÷ the windowed bare embedder's texts/s.
    pipeline_to_windowed_embedder_ratio: f64,
}

#[derive(Serialize)]
struct Report {
    stage: &'static str,
    turns: usize,
    /// Messages the stage emitted (kept turns, facts).
    emitted: u64,
    seconds: f64,
    turns_per_s: f64,
    emitted_per_s: f64,
}

const CITIES: &[&str] = &[
    "Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi",
];
const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah",
];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "My favourite restaurant in {city} closed, so {person} suggested a new one on {n}th street.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "我下个月和{person}一起去{city}出差，大概待{n}天。",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

/// A realistic, unique turn for index `i`.
fn turn(tenant: &str, i: usize) -> serde_json::Value {
    let template = TEMPLATES[i % TEMPLATES.len()];
    let content = template
        .replace("{city}", CITIES[(i / 7) % CITIES.len()])
        .replace("{person}", PEOPLE[(i / 3) % PEOPLE.len()])
        .replace("{n}", &(2 + i % 97).to_string());
    json!({
        "tenant": tenant,
        "user_id": format!("user-{}", i % 50),
        "session_id": format!("session-{}", i % 200),
        "turn_id": format!("bench-{i}"),
        "content": format!("{content} (note {i})"),
    })
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    if let Command::Recall {
        memories,
        queries,
        json,
    } = &command
    {
        let r = super::bench_recall::run(*memories, *queries).await?;
        if *json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "recall: {} memories of one user (+{} of others), {} queries: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {:.1} qps ({}; {}); loaded in {:.0} s; {} degraded",
                r.memories,
                r.other_users_memories,
                r.queries,
                r.p50_ms,
                r.p90_ms,
                r.p99_ms,
                r.max_ms,
                r.qps,
                r.embedder,
                r.index,
                r.load_seconds,
                r.degraded
            );
            for (part, s) in &r.parts {
                println!("  {part:<8} p50 {:.1} ms, p99 {:.1} ms", s.p50_ms, s.p99_ms);
            }
        }
        return Ok(());
    }
    if let Command::Janitor {
        memories,
        users,
        json,
    } = &command
    {
        let r = super::bench_janitor::run(*memories, *users).await?;
        if *json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            let steps: Vec<String> = r
                .step_seconds
                .iter()
                .map(|(step, s)| format!("{step} {s:.1} s"))
                .collect();
            let c = &r.counts;
            println!(
                "janitor: {} memories of {} users ({} tenants), loaded in {:.0} s; one run in {:.1} s ({}; {} chunks): {} decayed, {} merged into {}, {} archived, {} consolidated into {} summaries, {} purged; peak RSS {}; database {:.0} MB before, {:.0} MB after",
                r.memories,
                r.users,
                r.tenants,
                r.load_seconds,
                r.run_seconds,
                steps.join(", "),
                r.chunks,
                c.decayed,
                c.merged,
                c.merge_survivors,
                c.archived,
                c.consolidated,
                c.summaries,
                c.purged,
                r.peak_rss_mb
                    .map_or("unknown".to_string(), |m| format!("{m:.0} MB")),
                r.database_mb_before,
                r.database_mb_after
            );
        }
        return Ok(());
    }
    if let Command::Ingest {
        turns,
        data,
        embed_replicas,
        json,
    } = &command
    {
        let report = ingest(*turns, data, *embed_replicas).await?;
        if *json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!(
                "ingest: {} turns → {} facts → {} memories in {:.1} s: {:.1} turns/s, {:.1} facts/s; publish→searchable p50 {:.0} ms, p99 {:.0} ms; bare embedder ({}) {:.1} texts/s at batch 16 (ratio {:.2}), {:.1} texts/s sorted by length in windows (ratio {:.2})",
                report.turns,
                report.facts,
                report.memories,
                report.seconds,
                report.turns_per_s,
                report.facts_per_s,
                report.latency_p50_ms,
                report.latency_p99_ms,
                report.embedder,
                report.embedder_texts_per_s,
                report.pipeline_to_embedder_ratio,
                report.embedder_windowed_texts_per_s,
                report.pipeline_to_windowed_embedder_ratio
            );
        }
        return Ok(());
    }
    let (report, json) = match command {
        Command::Ingest { .. } | Command::Recall { .. } | Command::Janitor { .. } => {
            return Ok(());
        }
        Command::Filter { turns, json } => (bench(StageName::Filter, turns).await?, json),
        Command::Extract { turns, json } => (bench(StageName::Extract, turns).await?, json),
    };
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {} turns in {:.2} s → {:.0} turns/s, {:.0} outputs/s ({} outputs)",
            report.stage,
            report.turns,
            report.seconds,
            report.turns_per_s,
            report.emitted_per_s,
            report.emitted
        );
    }
    Ok(())
}

/// Runs `work` in a throw-away namespace, database and data directory, which
/// are removed afterwards, also when `work` fails.
pub(crate) async fn sandboxed<T>(
    work: impl AsyncFnOnce(&Context) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let base = super::setup()?;
    let sandbox = Sandbox::new(&base, "bench");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let result = work(&ctx).await;
    sandbox.remove(&ctx.bus).await?;
    result
}

/// Runs the pipeline up to `stage` in a sandbox and times that stage.
async fn bench(stage: StageName, turns: usize) -> anyhow::Result<Report> {
    let base = super::setup()?;
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
        (0..turns).map(|i| (format!("bench:bench-{i}"), turn("bench", i))),
    )
    .await
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

async fn messages(ctx: &Context, stream: &str) -> anyhow::Result<u64> {
    let mut stream = ctx
        .bus
        .js
        .get_stream(ctx.config.namespace.stream_name(stream))
        .await?;
    Ok(stream.info().await?.state.messages)
}

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
            None => turn("bench", i),
        })
        .collect()
}

/// A small deterministic generator (xorshift), so runs are comparable.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Uniform in [0, 1).
    pub fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.fraction() * n as f64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.fraction() < p
    }
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn ingest(
    turns: usize,
    data: &std::path::Path,
    embed_replicas: usize,
) -> anyhow::Result<IngestReport> {
    let base = super::setup()?;
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

    // The bare embedder on the same texts, at batch 16, with nothing else running.
    let texts: Vec<String> = sqlx::query_scalar(
        "SELECT f->>'content' FROM turns, jsonb_array_elements(facts) AS f WHERE facts IS NOT NULL",
    )
    .fetch_all(&ctx.store.pool)
    .await?;
    let embedder = hindsight_embed::embedder(&ctx.config.embed)?;
    let bare_started = Instant::now();
    for chunk in texts.chunks(16) {
        embedder.embed(chunk).await?;
    }
    let embedder_texts_per_s = texts.len() as f64 / bare_started.elapsed().as_secs_f64();
    let window = ctx.config.embed.window.max(16);
    let windowed_started = Instant::now();
    for window in texts.chunks(window) {
        let mut sorted = window.to_vec();
        sorted.sort_by_key(String::len);
        for chunk in sorted.chunks(16) {
            embedder.embed(chunk).await?;
        }
    }
    let embedder_windowed_texts_per_s =
        texts.len() as f64 / windowed_started.elapsed().as_secs_f64();
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
        embedder: embedder.model().name.clone(),
        embedder_texts_per_s,
        pipeline_to_embedder_ratio: facts_per_s / embedder_texts_per_s,
        embedder_windowed_texts_per_s,
        pipeline_to_windowed_embedder_ratio: facts_per_s / embedder_windowed_texts_per_s,
    })
}
