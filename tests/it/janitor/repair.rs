//! The repair step on a database an earlier rule got wrong, written as that
//! persist wrote it (memories, provenance, audit events, the turn's facts):
//! three unrelated Chinese facts fused into one memory, a sister's city
//! superseded by a brother's. A dry run counts what a run changes and
//! changes nothing; the run splits and reinstates from provenance; a second
//! run finds nothing; restore puts the database back as it was.

use std::sync::Arc;

use hindsight_core::embedding::cosine;
use hindsight_embedder::{Embedder, local::LocalEmbedder};
use hindsight_janitor::Janitor;
use hindsight_tests::{Deployment, fact, model_dir};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::{ran, request};

const TENANT: &str = "acme";

/// The facts of one turn, recorded on it as extract records them.
async fn turn(pool: &PgPool, turn_id: &str, facts: &[(&str, &str)]) {
    let facts: Vec<Value> = facts
        .iter()
        .map(|(id, content)| {
            serde_json::to_value(fact::plain(TENANT, "li", id, content)).expect("fact")
        })
        .collect();
    sqlx::query(
        "INSERT INTO turns (tenant, turn_id, user_id, session_id, speaker, role, source, trust, content, ts,
                            stream_seq, fate, extract_outcome, extractor, facts)
         VALUES ($1, $2, 'li', 's', 'li', 'user', 'user', 'high', 'said', now(), 1, 'kept', 'facts', 'rules', $3)",
    )
    .bind(TENANT)
    .bind(turn_id)
    .bind(Value::Array(facts))
    .execute(pool)
    .await
    .expect("turn written");
}

/// A memory as persist wrote it: its row, its facts' provenance and the
/// audit events of its creation and of each fact merged into it.
async fn memory(
    pool: &PgPool,
    embedder: &LocalEmbedder,
    content: &str,
    vector_of: &str,
    turn_id: &str,
    facts: &[&str],
) -> Uuid {
    let id = Uuid::new_v4();
    let model = embedder.model();
    let vector = embedder
        .embed_blocking(&[vector_of.to_string()])
        .expect("embedding")
        .remove(0);
    sqlx::query(
        "WITH m AS (
           INSERT INTO memories (id, tenant, user_id, kind, fact_type, content, content_key, importance, confidence,
                                 source_trust, status, embedding_model, embedding_version, terms, index_state)
           VALUES ($1, $2, 'li', 'semantic', 'fact', $3, $3, 0.5, 0.9, 'high', 'active', $4, $5, '{}', 'indexed')
           RETURNING id)
         INSERT INTO memory_vectors (id, embedding) SELECT id, $6 FROM m",
    )
    .bind(id)
    .bind(TENANT)
    .bind(content)
    .bind(&model.name)
    .bind(&model.version)
    .bind(&vector)
    .execute(pool)
    .await
    .expect("memory written");
    for (i, fact_id) in facts.iter().enumerate() {
        sqlx::query(
            "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id, added_at)
             VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))",
        )
        .bind(id)
        .bind(fact_id)
        .bind(TENANT)
        .bind(turn_id)
        .bind(i as f64)
        .execute(pool)
        .await
        .expect("provenance written");
        event(
            pool,
            id,
            if i == 0 { "create" } else { "merge" },
            json!({"fact_id": fact_id, "turn_id": turn_id}),
        )
        .await;
    }
    id
}

/// A memory of one fact, with that fact's vector.
async fn own(pool: &PgPool, embedder: &LocalEmbedder, content: &str, fact_id: &str) -> Uuid {
    memory(pool, embedder, content, content, "t1", &[fact_id]).await
}

async fn event(pool: &PgPool, id: Uuid, event: &str, detail: Value) {
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, event, actor, detail) VALUES ($1, $2, $3, 'persist', $4)",
    )
    .bind(id)
    .bind(TENANT)
    .bind(event)
    .bind(detail)
    .execute(pool)
    .await
    .expect("event written");
}

/// `old` superseded by `by`, as persist marked it.
async fn supersede(pool: &PgPool, old: Uuid, by: Uuid) {
    sqlx::query("UPDATE memories SET status = 'superseded', superseded_by = $2 WHERE id = $1")
        .bind(old)
        .bind(by)
        .execute(pool)
        .await
        .expect("superseded");
    event(pool, old, "supersede", json!({"superseded_by": by})).await;
}

/// What a restore must give back: each memory's state and content, and
/// where each fact's provenance points.
async fn state(pool: &PgPool) -> (Vec<Value>, Vec<Value>) {
    let memories = sqlx::query_scalar(
        "SELECT jsonb_build_object('id', id, 'status', status, 'superseded_by', superseded_by,
                                   'content', content, 'content_key', content_key,
                                   'embedding', (SELECT v.embedding FROM memory_vectors v WHERE v.id = m.id))
         FROM memories m ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .expect("memories");
    (memories, hindsight_tests::seed::sources(pool).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_merges_and_supersedes_are_split_and_reinstated_from_provenance_and_restored() {
    let d = Deployment::new("test", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    let embedder =
        Arc::new(LocalEmbedder::load(&model_dir()).expect("the local model (./ops/setup.sh)"));
    turn(
        &pool,
        "t1",
        &[
            ("f1", "Li每周六去游泳。"),
            ("f2", "Li喜欢喝绿茶。"),
            ("f3", "Li喜欢喝咖啡。"),
            ("f4", "Li每周六去游泳"),
            ("f5", "Li的妹妹住在北京。"),
            ("f6", "Li的哥哥住在广州。"),
            ("f7", "Li住在杭州。"),
            ("f8", "Li现在住在苏州。"),
            ("f9", "Li的妹妹是老师。"),
            ("f10", "Li的妹妹是一名老师。"),
        ],
    )
    .await;
    let fused = memory(
        &pool,
        &embedder,
        "Li每周六去游泳。; Li喜欢喝绿茶。; Li喜欢喝咖啡。",
        "Li每周六去游泳。",
        "t1",
        &["f1", "f2", "f3", "f4"],
    )
    .await;
    let sister = own(&pool, &embedder, "Li的妹妹住在北京。", "f5").await;
    let brother = own(&pool, &embedder, "Li的哥哥住在广州。", "f6").await;
    supersede(&pool, sister, brother).await;
    let hangzhou = own(&pool, &embedder, "Li住在杭州。", "f7").await;
    let suzhou = own(&pool, &embedder, "Li现在住在苏州。", "f8").await;
    supersede(&pool, hangzhou, suzhou).await;
    let teacher = memory(
        &pool,
        &embedder,
        "Li的妹妹是一名老师。",
        "Li的妹妹是一名老师。",
        "t1",
        &["f9", "f10"],
    )
    .await;
    let before = state(&pool).await;

    let janitor = || {
        Janitor::new(
            d.ctx.store.clone(),
            Default::default(),
            &d.config().data_dir,
        )
        .with_embedder(embedder.clone())
    };
    let dry = ran(&janitor(), request(true)).await;
    assert_eq!(state(&pool).await, before, "a dry run changes nothing");
    let run = ran(&janitor(), request(false)).await;
    let (c, dc) = (&run.counts.total, &dry.counts.total);
    assert_eq!((c.reinstated, c.split, c.unsplit), (1, 2, 0), "{c:?}");
    assert_eq!(
        (dc.reinstated, dc.split, dc.unsplit),
        (c.reinstated, c.split, c.unsplit),
        "the dry run counts what the run does"
    );

    let status = |id: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (String, Option<Uuid>)>(
                "SELECT status, superseded_by FROM memories WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("memory")
        }
    };
    assert_eq!(
        status(sister).await,
        ("active".into(), None),
        "another person's city supersedes nothing"
    );
    assert_eq!(
        status(hangzhou).await,
        ("superseded".into(), Some(suzhou)),
        "a true change stays"
    );
    let parts: Vec<(Uuid, String, Vec<f32>, Vec<String>)> = sqlx::query_as(
        "SELECT m.id, m.content, v.embedding, array_agg(s.fact_id ORDER BY s.fact_id)
         FROM memories m JOIN memory_sources s ON s.memory_id = m.id JOIN memory_vectors v ON v.id = m.id
         WHERE m.status = 'active' AND m.id NOT IN ($1, $2, $3)
         GROUP BY m.id, v.embedding ORDER BY m.content",
    )
    .bind(sister)
    .bind(brother)
    .bind(suzhou)
    .fetch_all(&pool)
    .await
    .expect("memories");
    let summary: Vec<(&str, Vec<&str>)> = parts
        .iter()
        .map(|(_, content, _, facts)| {
            (content.as_str(), facts.iter().map(String::as_str).collect())
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Li喜欢喝咖啡。", vec!["f3"]),
            ("Li喜欢喝绿茶。", vec!["f2"]),
            ("Li每周六去游泳。", vec!["f1", "f4"]),
            ("Li的妹妹是一名老师。", vec!["f10", "f9"]),
        ],
        "one memory per fact that is its own; restatements stay together"
    );
    assert!(
        parts
            .iter()
            .any(|p| p.0 == fused && p.1 == "Li每周六去游泳。")
    );
    assert!(parts.iter().any(|p| p.0 == teacher));
    for (_, content, vector, _) in &parts {
        let own = embedder
            .embed_blocking(std::slice::from_ref(content))
            .expect("embedding")
            .remove(0);
        assert!(cosine(&own, vector) > 0.999, "{content} has its own vector");
    }

    let again = ran(&janitor(), request(false)).await.counts.total;
    assert_eq!(
        (again.reinstated, again.split),
        (0, 0),
        "nothing left to repair"
    );

    let restored = janitor()
        .restore(run.id, false)
        .await
        .expect("restored")
        .restored;
    assert_eq!(
        (restored.resuperseded, restored.rejoined, restored.skipped),
        (1, 2, 0)
    );
    assert_eq!(
        state(&pool).await,
        before,
        "restore puts back what the run changed"
    );
    d.remove().await;
}
