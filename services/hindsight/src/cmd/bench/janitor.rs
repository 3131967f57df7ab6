//! `hindsight bench janitor`: one real maintenance run over many memories, in
//! a throw-away namespace and database: its time per step and the process's
//! peak memory during the run.
//!
//! The memories are written straight to Postgres, as a first run would find
//! them (nothing decayed yet): users of uneven sizes in up to three tenants,
//! created over two years, most never recalled, a tenth of them episodes
//! about a few topics, some constraints (a share about health), near-duplicate
//! pairs, and memories archived or deleted long ago. Vectors are random unit
//! vectors (384 dimensions; a planted duplicate sits at cosine 0.96–0.995
//! from its original, unrelated ones near 0). Everything comes from one seeded
//! generator, so runs are comparable.
//!
//! The load writes batches through `unnest` with the secondary indexes and
//! the term-statistics trigger off, then builds the indexes and the
//! statistics in bulk, exactly as the migrations define them, and vacuums.

use std::{collections::BTreeMap, time::Instant};

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use hindsight_janitor::{Outcome, RunRequest, Trigger, counts::StepCounts};
use hindsight_shared::service::Context;
use serde::Serialize;
use sqlx::PgPool;

use super::{
    memories::{Batch, DIMENSION, Generator, TENANTS},
    support::sandboxed,
    turns,
};

const BATCH: usize = 5_000;
const MODEL: &str = "bench-model";

#[derive(Serialize)]
pub struct Report {
    pub memories: usize,
    /// Turns in the `turns` archive.
    pub turns: usize,
    pub users: usize,
    pub tenants: usize,
    pub load_seconds: f64,
    /// The load's parts: rows written, indexes built, term statistics, vacuum.
    pub load_parts: BTreeMap<&'static str, f64>,
    pub run_seconds: f64,
    /// Each step's seconds, as the run reports them.
    pub step_seconds: BTreeMap<String, f64>,
    /// Memories changed by each step.
    pub counts: StepCounts,
    /// Transactions the run committed.
    pub chunks: usize,
    /// The process's peak resident memory during the run.
    pub peak_rss_mb: Option<f64>,
    pub database_mb_before: f64,
    pub database_mb_after: f64,
}

pub async fn run(memories: usize, turns: usize, users: usize) -> anyhow::Result<Report> {
    anyhow::ensure!(users > 0, "--users must be at least 1");
    sandboxed(async |ctx| measure(ctx, memories, turns, users).await).await
}

async fn measure(
    ctx: &Context,
    memories: usize,
    turns: usize,
    users: usize,
) -> anyhow::Result<Report> {
    let pool = &ctx.store.pool;
    let now = Utc::now();
    let load_started = Instant::now();
    let load_parts = load(pool, memories, turns, users, now).await?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    tracing::info!(load_seconds, ?load_parts, "loaded; running the janitor");
    let database_mb_before = database_mb(pool).await?;

    let janitor = hindsight_janitor::janitor(&ctx.config, ctx.store.clone(), Some(&ctx.bus));
    let request = RunRequest {
        dry_run: false,
        tenant: None,
        as_of: Some(Utc::now()),
        trigger: Trigger::Manual,
        scheduled_for: None,
    };
    let measured_rss = reset_peak_rss();
    let started = Instant::now();
    let outcome = janitor.run(request).await?;
    let run_seconds = started.elapsed().as_secs_f64();
    let peak_rss_mb = if measured_rss { peak_rss_mb() } else { None };
    let report = match outcome {
        Outcome::Ran(report) => *report,
        other => anyhow::bail!("the janitor did not run: {other:?}"),
    };
    anyhow::ensure!(
        report.status == "finished",
        "the run {}: {}",
        report.status,
        report.errors.join("; ")
    );
    let mut step_seconds = report.counts.seconds.clone();
    step_seconds.remove("total");
    Ok(Report {
        memories,
        turns,
        users,
        tenants: TENANTS.len().min(users),
        load_seconds,
        load_parts,
        run_seconds,
        step_seconds,
        counts: report.counts.total,
        chunks: report.chunks,
        peak_rss_mb,
        database_mb_before,
        database_mb_after: database_mb(pool).await?,
    })
}

async fn database_mb(pool: &PgPool) -> anyhow::Result<f64> {
    let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(pool)
        .await?;
    Ok(bytes as f64 / 1e6)
}

/// Makes the process's peak resident size (VmHWM) its current size; `false`
/// where the kernel offers no such reset.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Writes `memories` memories (with one provenance row each) and `turns`
/// turns, then the secondary indexes, the term statistics, and vacuums.
async fn load(
    pool: &PgPool,
    memories: usize,
    turns: usize,
    users: usize,
    now: DateTime<Utc>,
) -> anyhow::Result<BTreeMap<&'static str, f64>> {
    let mut parts = BTreeMap::new();
    let started = Instant::now();
    // Every index but those behind constraints (the keys), rebuilt from its definition.
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
         WHERE i.indrelid IN ('memories'::regclass, 'memory_sources'::regclass, 'turns'::regclass)
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
    )
    .fetch_all(pool)
    .await?;
    for (name, _) in &indexes {
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP INDEX {name}")))
            .execute(pool)
            .await?;
    }
    sqlx::query("ALTER TABLE memories DISABLE TRIGGER memories_term_stats")
        .execute(pool)
        .await?;

    let (tx, rx) = tokio::sync::mpsc::channel::<Batch>(2);
    let generator = tokio::task::spawn_blocking(move || {
        let mut generator = Generator::new(users, now);
        let mut left = memories;
        while left > 0 {
            let n = left.min(BATCH);
            if tx.blocking_send(generator.batch(n)).is_err() {
                break;
            }
            left -= n;
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
        .map(|batch| insert(pool, batch))
        .buffer_unordered(2)
        .try_collect::<()>()
        .await?;
    generator.await?;
    parts.insert("rows", started.elapsed().as_secs_f64());
    let started = Instant::now();
    turns::load(pool, turns, users, now).await?;
    parts.insert("turns", started.elapsed().as_secs_f64());

    let started = Instant::now();
    futures::stream::iter(indexes)
        .map(|(_, definition)| async move {
            let mut conn = pool.acquire().await?;
            sqlx::query("SET maintenance_work_mem = '512MB'")
                .execute(&mut *conn)
                .await?;
            sqlx::query(sqlx::AssertSqlSafe(definition))
                .execute(&mut *conn)
                .await?;
            sqlx::query("RESET maintenance_work_mem")
                .execute(&mut *conn)
                .await?;
            anyhow::Ok(())
        })
        .buffer_unordered(2)
        .try_collect::<()>()
        .await?;
    parts.insert("indexes", started.elapsed().as_secs_f64());

    // The statistics the trigger would have kept, as its migration first computes them.
    let started = Instant::now();
    sqlx::raw_sql(
        "INSERT INTO memory_terms (tenant, user_id, term, df)
         SELECT tenant, user_id, t, count(*) FROM memories, unnest(terms) AS t GROUP BY 1, 2, 3;
         INSERT INTO memory_users (tenant, user_id, memories, total_terms)
         SELECT tenant, user_id, count(*), sum(cardinality(terms)) FROM memories GROUP BY 1, 2;
         ALTER TABLE memories ENABLE TRIGGER memories_term_stats;",
    )
    .execute(pool)
    .await?;
    parts.insert("term_stats", started.elapsed().as_secs_f64());

    let started = Instant::now();
    sqlx::query("VACUUM (ANALYZE)").execute(pool).await?;
    // A run finds the load on disk, not in dirty buffers (needs the right to checkpoint).
    if let Err(e) = sqlx::query("CHECKPOINT").execute(pool).await {
        tracing::warn!(error = %e, "no checkpoint after the load");
    }
    parts.insert("vacuum", started.elapsed().as_secs_f64());
    Ok(parts)
}

async fn insert(pool: &PgPool, b: Batch) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO memories (id, tenant, user_id, session_id, kind, fact_type, content, content_key,
                               entities, terms, importance, confidence, source_trust, status,
                               occurred_at, created_at, updated_at, last_accessed_at, access_count,
                               archived_at, index_state, embedding_model, embedding_version,
                               status_at, expires_at)
         SELECT r.id, r.tenant, r.user_id, r.session_id, r.kind, r.fact_type, r.content, r.content_key,
                string_to_array(r.entities, chr(31)), string_to_array(r.terms, chr(31)),
                r.importance, r.confidence, r.trust, r.status, r.occurred_at, r.created_at,
                r.updated_at, r.last_accessed_at, r.access_count, r.archived_at, r.index_state,
                $22, '1', r.status_at, r.expires_at
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[], $8::text[], $9::text[], $10::text[], $11::real[], $12::real[],
                     $13::text[], $14::text[], $15::timestamptz[], $16::timestamptz[],
                     $17::timestamptz[], $18::timestamptz[], $19::int[], $20::timestamptz[],
                     $21::text[], $23::timestamptz[], $24::timestamptz[])
              AS r(id, tenant, user_id, session_id, kind, fact_type, content, content_key, entities,
                   terms, importance, confidence, trust, status, occurred_at, created_at, updated_at,
                   last_accessed_at, access_count, archived_at, index_state, status_at, expires_at)",
    )
    .bind(&b.ids)
    .bind(&b.tenants)
    .bind(&b.users)
    .bind(&b.sessions)
    .bind(&b.kinds)
    .bind(&b.fact_types)
    .bind(&b.contents)
    .bind(&b.keys)
    .bind(&b.entities)
    .bind(&b.terms)
    .bind(&b.importance)
    .bind(&b.confidence)
    .bind(&b.trust)
    .bind(&b.status)
    .bind(&b.occurred_at)
    .bind(&b.created_at)
    .bind(&b.updated_at)
    .bind(&b.last_accessed_at)
    .bind(&b.access_count)
    .bind(&b.archived_at)
    .bind(&b.index_state)
    .bind(MODEL)
    .bind(&b.status_at)
    .bind(&b.expires_at)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO memory_vectors (id, embedding)
         SELECT r.id, ($2::real[])[(r.n - 1) * $3 + 1 : r.n * $3]
         FROM unnest($1::uuid[]) WITH ORDINALITY AS r(id, n)",
    )
    .bind(&b.ids)
    .bind(&b.embeddings)
    .bind(DIMENSION as i32)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id, added_at)
         SELECT id, 'fact-' || id, tenant, 'turn-' || id, created_at
         FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS s(id, tenant, created_at)",
    )
    .bind(&b.ids)
    .bind(&b.tenants)
    .bind(&b.created_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
