//! `hindsight bench recall`: recall latency for one user holding many
//! memories, end to end (query embedding, every channel, fusion, rows), in a
//! throw-away namespace, database and data directory.
//!
//! Loading 100,000 memories through the pipeline would take half an hour of
//! embedding, so the memories are written straight to Postgres and the index:
//! a few hundred distinct sentences are embedded for real, and each memory
//! takes one of them with a unique suffix and a slightly perturbed vector.
//! Queries are real text embedded per request, as recall does.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};
use hindsight_index::{Collection, Payload, Point, VectorIndex};
use hindsight_recall::{RecallRequest, Timings};
use hindsight_shared::{service::Context, synthetic::RECALL_QUERIES as QUERIES};
use hindsight_store::memories;
use hindsight_text::statement;
use serde::Serialize;
use uuid::Uuid;

use super::support::{percentile, sandboxed, seeded, unit};

const TENANT: &str = "bench";
const USER: &str = "heavy";

#[derive(Serialize)]
pub struct Report {
    pub memories: usize,
    pub other_users_memories: usize,
    pub queries: usize,
    pub load_seconds: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub qps: f64,
    /// The query embedding alone, for scale.
    pub embed_p50_ms: f64,
    /// Each part's p50 and p99 (ms). The channels run concurrently, each
    /// followed by the read of its candidates' rows (`rows`, the longest of
    /// those reads), so `embed`+`search` (the dense channel), `keyword` and
    /// `entity` overlap; `rank` (fusion, score, budget) follows them.
    pub parts: BTreeMap<&'static str, Split>,
    pub embedder: String,
    pub index: String,
    pub degraded: usize,
    pub mean_returned: f64,
}

#[derive(Serialize)]
pub struct Split {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah", "Li Wei", "Omar",
];
const PLACES: &[&str] = &[
    "Lisbon", "Beijing", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi", "Oslo", "Quito",
];
const TEMPLATES: &[&str] = &[
    "{p} went hiking near {c} and saw a waterfall",
    "{p} is allergic to peanuts and avoids satay in {c}",
    "{p} prefers window seats on flights to {c}",
    "{p} adopted a rescue dog while living in {c}",
    "{p} plans to run a marathon in {c} next spring",
    "{p} works as a nurse at a hospital in {c}",
    "{p} started learning the violin after a concert in {c}",
    "{p} painted a sunset over the harbour of {c}",
    "{p} bought a second-hand bicycle in {c}",
    "{p} hosts a book club about science fiction in {c}",
];

fn base_texts() -> Vec<String> {
    let mut out = Vec::new();
    for t in TEMPLATES {
        for p in PEOPLE {
            for c in PLACES {
                out.push(t.replace("{p}", p).replace("{c}", c));
            }
        }
    }
    out
}

pub async fn run(memories: usize, queries: usize) -> anyhow::Result<Report> {
    sandboxed(async |ctx| measure(ctx, memories, queries).await).await
}

async fn measure(ctx: &Context, memories: usize, queries: usize) -> anyhow::Result<Report> {
    let index = hindsight_index::open(&ctx.config.index, &ctx.config.data_dir)?;
    let embedder = hindsight_embedder::from_config(&ctx.config.embed)?;
    let collection = Collection::for_model(&ctx.config.namespace, embedder.model());
    index.ensure(&collection).await?;

    let load_started = Instant::now();
    let texts = base_texts();
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(16) {
        vectors.extend(embedder.embed(chunk).await?);
    }
    // The heavy user, and 20 others with 1,000 memories each so that filtering matters.
    let others = 20 * 1_000;
    let mut rng = seeded(0x9e37_79b9_7f4a_7c15);
    let total = memories + others;
    let mut i = 0;
    while i < total {
        let end = (i + 5_000).min(total);
        let mut rows = Vec::with_capacity(end - i);
        for n in i..end {
            let user = if n < memories {
                USER.to_string()
            } else {
                format!("other-{}", (n - memories) / 1_000)
            };
            let b = n % texts.len();
            let content = format!("{} (entry {n})", texts[b]);
            let mut v: Vec<f32> = vectors[b]
                .iter()
                .map(|x| x + 0.02 * unit(&mut rng))
                .collect();
            hindsight_embedder::normalise(&mut v);
            rows.push((Uuid::new_v4(), user, content, v, (n % 10) as f32 / 10.0));
        }
        insert(ctx, embedder.model(), &rows).await?;
        let points = rows
            .iter()
            .map(|(id, user, _, v, _)| Point {
                id: *id,
                vector: v.clone(),
                payload: Payload {
                    tenant: TENANT.into(),
                    user_id: user.clone(),
                    session_id: None,
                    kind: Kind::Semantic,
                    fact_type: FactType::Fact,
                    status: Status::Active,
                    created_at: chrono::Utc::now().timestamp(),
                    occurred_at: None,
                },
            })
            .collect::<Vec<_>>();
        for chunk in points.chunks(1_000) {
            index.upsert(&collection, chunk.to_vec()).await?;
        }
        i = end;
    }
    index.optimize(&collection).await?;
    sqlx::query("ANALYZE memories")
        .execute(&ctx.store.pool)
        .await?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    tracing::info!(load_seconds, "loaded; measuring recall");

    // Every query is embedded: the queries below repeat after a few hundred,
    // and a recall's time is measured with its query's embedding.
    let mut config = ctx.config.recall.clone();
    config.query_cache = 0;
    let recaller = hindsight_recall::Recaller::new(
        ctx.store.clone(),
        Some(index.clone() as Arc<dyn VectorIndex>),
        Some(embedder.clone()),
        ctx.config.namespace.clone(),
        &config,
    )
    .recording_access(false);
    // Warm-up: the first calls load caches and plans.
    for q in QUERIES {
        recaller
            .recall(TENANT, &RecallRequest::new(USER, *q))
            .await?;
    }
    let mut latencies = Vec::with_capacity(queries);
    let mut timings = Vec::with_capacity(queries);
    let (mut degraded, mut returned) = (0, 0);
    let measuring = Instant::now();
    for n in 0..queries {
        // 100 distinct texts: the recaller keeps no query vectors, so each is embedded.
        let query = format!(
            "{} {}",
            QUERIES[n % QUERIES.len()],
            PLACES[(n / QUERIES.len()) % PLACES.len()]
        );
        let started = Instant::now();
        let (answer, parts) = recaller
            .recall_timed(TENANT, &RecallRequest::new(USER, query))
            .await?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        timings.push(parts);
        degraded += usize::from(answer.degraded);
        returned += answer.memories.len();
    }
    let qps = queries as f64 / measuring.elapsed().as_secs_f64().max(1e-9);
    latencies.sort_by(f64::total_cmp);
    let split = |part: fn(&Timings) -> Duration| {
        let mut ms: Vec<f64> = timings
            .iter()
            .map(|t| part(t).as_secs_f64() * 1000.0)
            .collect();
        ms.sort_by(f64::total_cmp);
        Split {
            p50_ms: percentile(&ms, 0.5),
            p99_ms: percentile(&ms, 0.99),
        }
    };
    let parts: BTreeMap<&'static str, Split> = [
        ("embed", split(|t| t.embed)),
        ("search", split(Timings::search)),
        ("keyword", split(|t| t.keyword)),
        ("entity", split(|t| t.entity)),
        ("rows", split(|t| t.rows)),
        ("second_hop", split(|t| t.second_hop)),
        ("rank", split(|t| t.rank)),
    ]
    .into_iter()
    .collect();
    Ok(Report {
        memories,
        other_users_memories: others,
        queries,
        load_seconds,
        p50_ms: percentile(&latencies, 0.5),
        p90_ms: percentile(&latencies, 0.9),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: latencies.last().copied().unwrap_or(0.0),
        qps,
        embed_p50_ms: parts["embed"].p50_ms,
        parts,
        embedder: embedder.model().name.clone(),
        index: if ctx.config.index.qdrant_url.is_some() {
            "qdrant server".into()
        } else {
            "embedded (qdrant-edge)".into()
        },
        degraded,
        mean_returned: returned as f64 / queries.max(1) as f64,
    })
}

type Row = (Uuid, String, String, Vec<f32>, f32);

/// Writes memories and their provenance in one statement each.
async fn insert(
    ctx: &Context,
    model: &hindsight_core::embedding::ModelId,
    rows: &[Row],
) -> anyhow::Result<()> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.0).collect();
    let users: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
    let contents: Vec<String> = rows.iter().map(|r| r.2.clone()).collect();
    let keys: Vec<String> = contents.iter().map(|c| statement::content_key(c)).collect();
    let importance: Vec<f32> = rows.iter().map(|r| r.4).collect();
    // Postgres cannot unnest a ragged array of terms: pass them joined.
    let terms: Vec<String> = contents
        .iter()
        .map(|c| memories::search_terms(c, &[] as &[&str], None).join("\u{1f}"))
        .collect();
    // The vectors go in as one flat array, sliced per row (as persist stores
    // them: recall reads them back to score every candidate).
    let dimension = rows.first().map_or(0, |r| r.3.len());
    let vectors: Vec<f32> = rows.iter().flat_map(|r| r.3.iter().copied()).collect();
    sqlx::query(
        "INSERT INTO memories (id, tenant, user_id, kind, fact_type, content, content_key, importance,
                               confidence, source_trust, status, embedding_model, embedding_version,
                               terms, index_state)
         SELECT r.id, $1, r.u, 'semantic', 'fact', r.c, r.k, r.i, 0.8, 'high', 'active', $6, $7,
                string_to_array(r.t, chr(31)), 'indexed'
         FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $8::real[], $9::text[])
              AS r(id, u, c, k, i, t)",
    )
    .bind(TENANT)
    .bind(&ids)
    .bind(&users)
    .bind(&contents)
    .bind(&keys)
    .bind(&model.name)
    .bind(&model.version)
    .bind(&importance)
    .bind(&terms)
    .execute(&ctx.store.pool)
    .await?;
    sqlx::query(
        "INSERT INTO memory_vectors (id, embedding)
         SELECT r.id, ($2::real[])[(r.n - 1) * $3 + 1 : r.n * $3]
         FROM unnest($1::uuid[]) WITH ORDINALITY AS r(id, n)",
    )
    .bind(&ids)
    .bind(&vectors)
    .bind(i32::try_from(dimension).unwrap_or(i32::MAX))
    .execute(&ctx.store.pool)
    .await?;
    sqlx::query(
        "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id)
         SELECT id, 'bench-' || id, $1, 'bench-' || id FROM unnest($2::uuid[]) AS id",
    )
    .bind(TENANT)
    .bind(&ids)
    .execute(&ctx.store.pool)
    .await?;
    Ok(())
}
