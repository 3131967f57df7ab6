//! `hindsight bench`: throughput of the filter and extract stages and of the
//! whole ingest ([`pipeline`]), recall latency ([`recall`]) and one maintenance
//! run ([`janitor`]), each in a throw-away namespace and database
//! ([`support::sandboxed`]), so it can run next to a live deployment without
//! touching it.

mod bare;
mod janitor;
mod memories;
mod pipeline;
mod recall;
pub(crate) mod support;
mod turns;

use crate::stages::StageName;

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
    /// The bare embedder on a file of texts (one per line): texts per second
    /// at batch 16, one call at a time, in the file's order and in windows
    /// sorted by length. `bench ingest` runs it on its facts, with the local
    /// model's calls spread over every core (CANDLE_NUM_THREADS).
    Embedder {
        /// The texts, one per line.
        #[arg(long)]
        texts: std::path::PathBuf,
        /// Texts per window sorted by length.
        #[arg(long, default_value_t = 256)]
        window: usize,
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
    /// One real maintenance run of the janitor over `--memories` memories and a
    /// `turns` archive of `--turns` turns (written straight to Postgres, backdated over
    /// two years, nothing maintained yet): its time per step and the process's peak
    /// memory during the run.
    Janitor {
        /// Memories to load before the run.
        #[arg(long, default_value_t = 1_000_000)]
        memories: usize,
        /// Turns of the `turns` archive to load before the run.
        #[arg(long, default_value_t = 1_000_000)]
        turns: usize,
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

pub async fn run(command: Command) -> anyhow::Result<()> {
    if let Command::Recall {
        memories,
        queries,
        json,
    } = &command
    {
        let r = recall::run(*memories, *queries).await?;
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
        turns,
        users,
        json,
    } = &command
    {
        let r = janitor::run(*memories, *turns, *users).await?;
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
                "janitor: {} memories of {} users ({} tenants) and {} turns, loaded in {:.0} s; one run in {:.1} s ({}; {} chunks): {} decayed, {} merged into {}, {} archived, {} reviewed, {} consolidated into {} summaries, {} purged ({} superseded), turns {} emptied and {} deleted; peak RSS {}; database {:.0} MB before, {:.0} MB after",
                r.memories,
                r.users,
                r.tenants,
                r.turns,
                r.load_seconds,
                r.run_seconds,
                steps.join(", "),
                r.chunks,
                c.decayed,
                c.merged,
                c.merge_survivors,
                c.archived,
                c.reviewed,
                c.consolidated,
                c.summaries,
                c.purged,
                c.purged_superseded,
                c.turns_emptied,
                c.turns_purged,
                r.peak_rss_mb
                    .map_or("unknown".to_string(), |m| format!("{m:.0} MB")),
                r.database_mb_before,
                r.database_mb_after
            );
        }
        return Ok(());
    }
    if let Command::Embedder {
        texts,
        window,
        json,
    } = &command
    {
        let r = bare::measure(texts, *window).await?;
        if *json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "embedder: {} texts ({}; {} threads a call): {:.1} texts/s at batch 16, {:.1} texts/s sorted by length in windows of {}",
                r.texts, r.embedder, r.threads, r.texts_per_s, r.windowed_texts_per_s, r.window
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
        let report = pipeline::ingest(*turns, data, *embed_replicas).await?;
        if *json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!(
                "ingest: {} turns → {} facts → {} memories in {:.1} s: {:.1} turns/s, {:.1} facts/s; publish→searchable p50 {:.0} ms, p99 {:.0} ms; bare embedder ({}, {} threads a call) {:.1} texts/s at batch 16 (ratio {:.2}), {:.1} texts/s sorted by length in windows (ratio {:.2})",
                report.turns,
                report.facts,
                report.memories,
                report.seconds,
                report.turns_per_s,
                report.facts_per_s,
                report.latency_p50_ms,
                report.latency_p99_ms,
                report.embedder,
                report.embedder_threads,
                report.embedder_texts_per_s,
                report.pipeline_to_embedder_ratio,
                report.embedder_windowed_texts_per_s,
                report.pipeline_to_windowed_embedder_ratio
            );
        }
        return Ok(());
    }
    let (report, json) = match command {
        Command::Ingest { .. }
        | Command::Embedder { .. }
        | Command::Recall { .. }
        | Command::Janitor { .. } => {
            return Ok(());
        }
        Command::Filter { turns, json } => (pipeline::bench(StageName::Filter, turns).await?, json),
        Command::Extract { turns, json } => {
            (pipeline::bench(StageName::Extract, turns).await?, json)
        }
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
