//! Embed and persist through real NATS, real Postgres and the vector index
//! (embedded Qdrant Edge, or the Qdrant server named by `QDRANT_URL`).

use std::{collections::HashSet, sync::Arc, time::Duration};

use async_nats::jetstream;
use hindsight_core::{
    Topic,
    embedding::{EmbeddedFact, Languages, ModelId, cosine},
    memory::Status,
};
use hindsight_embed::EmbedStage;
use hindsight_embedder::{Embedder, local::LocalEmbedder};
use hindsight_filter::FilterStage;
use hindsight_index::{Collection, Scope, VectorIndex, outage::Outage};
use hindsight_persist::{PersistStage, reconcile};
use hindsight_recall::sql::keyword::{self, KeywordQuery};
use hindsight_tests::{Deployment, RunningStage, eventually, fact, model_dir};
use serde_json::json;
use uuid::Uuid;

const TENANT: &str = "acme";

async fn count(d: &Deployment, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("query")
}

/// The whole pipeline in this process, with the real local model.
async fn pipeline(
    d: &Deployment,
    index: Arc<dyn VectorIndex>,
) -> (Vec<RunningStage>, Arc<LocalEmbedder>) {
    let store = d.ctx.store.clone();
    let embedder = Arc::new(
        LocalEmbedder::load(&model_dir()).expect("the local model (./ops/setup.sh fetches it)"),
    );
    let stages = vec![
        d.start(FilterStage::new(store.clone())).await,
        d.start(hindsight_extract::from_config(d.config(), store.clone()).expect("extract"))
            .await,
        d.start(EmbedStage::new(embedder.clone(), d.config())).await,
        d.start(PersistStage::new(
            store,
            index,
            d.config().namespace.clone(),
            d.config().dedupe_threshold,
        ))
        .await,
    ];
    (stages, embedder)
}

async fn say(d: &Deployment, turn_id: &str, content: &str) {
    let turn = json!({
        "tenant": TENANT, "user_id": "li", "session_id": format!("s-{turn_id}"), "turn_id": turn_id,
        "speaker": "Li", "ts": "2024-03-01T10:00:00Z", "content": content,
    });
    d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
}

/// Waits until every fact of the turn is in a memory and the index has caught up.
async fn persisted(d: &Deployment, turn_id: &str) {
    let sql = format!(
        "SELECT (SELECT coalesce(jsonb_array_length(facts), -1) FROM turns WHERE turn_id = '{turn_id}')
              = (SELECT count(*) FROM memory_sources WHERE turn_id = '{turn_id}')
          AND NOT EXISTS (SELECT 1 FROM memories WHERE index_state = 'pending')"
    );
    eventually(
        &format!("turn {turn_id} is persisted and indexed"),
        Duration::from_secs(60),
        || async {
            sqlx::query_scalar::<_, Option<bool>>(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_one(&d.ctx.store.pool)
                .await
                .ok()
                .flatten()
                .unwrap_or(false)
        },
    )
    .await;
}

async fn stop(stages: Vec<RunningStage>) {
    for s in stages {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_turn_becomes_a_memory_a_vector_search_finds_with_provenance() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let (stages, embedder) = pipeline(&d, index.clone()).await;
    say(&d, "t1", "I live in Lisbon and I'm allergic to peanuts.").await;
    persisted(&d, "t1").await;

    let query = embedder
        .embed(&["Where does Li live?".to_string()])
        .await
        .expect("embedded");
    let collection = Collection::for_model(&d.config().namespace, embedder.model());
    let scope = Scope {
        tenant: TENANT.into(),
        user_id: "li".into(),
        statuses: vec![Status::Active],
        ..Default::default()
    };
    let hits = index
        .search(&collection, &query[0], &scope, 3)
        .await
        .expect("search");
    let (content, turn_id): (String, String) = sqlx::query_as(
        "SELECT m.content, s.turn_id FROM memories m JOIN memory_sources s ON s.memory_id = m.id WHERE m.id = $1",
    )
    .bind(hits[0].id)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("the hit is a memory with provenance");
    assert!(content.contains("Lisbon"), "{content}");
    assert_eq!(turn_id, "t1");
    let (terms, entities): (Vec<String>, Vec<String>) =
        sqlx::query_as("SELECT terms, entities FROM memories WHERE id = $1")
            .bind(hits[0].id)
            .fetch_one(&d.ctx.store.pool)
            .await
            .expect("terms");
    assert_eq!(
        terms,
        hindsight_store::memories::search_terms(&content, &entities, None),
        "the keyword channel's terms follow the content and entities (the session's first turn has no context)"
    );
    let other_user = Scope {
        user_id: "someone-else".into(),
        ..scope
    };
    assert!(
        index
            .search(&collection, &query[0], &other_user, 3)
            .await
            .expect("search")
            .is_empty()
    );
    stop(stages).await;
    drop(index);
    d.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_model_merges_paraphrases_keeps_different_values_and_supersedes_changes() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let (stages, _) = pipeline(&d, index.clone()).await;
    let turns = [
        ("b1", "I live in Beijing"),
        ("b2", "I'm based in Beijing"),
        ("c1", "I like cats"),
        ("c2", "I like dogs"),
        ("r1", "My favourite colour is red"),
        ("r2", "My favourite colour is blue now"),
        ("z1", "我住在北京朝阳区"),
        ("z2", "我家在北京朝阳区"),
    ];
    for (id, content) in turns {
        say(&d, id, content).await;
        persisted(&d, id).await;
    }
    let memory_of = |turn: &'static str| {
        let pool = d.ctx.store.pool.clone();
        async move {
            sqlx::query_as::<_, (Uuid, String, String, Option<Uuid>)>(
                "SELECT m.id, m.content, m.status, m.superseded_by FROM memories m
                 JOIN memory_sources s ON s.memory_id = m.id WHERE s.turn_id = $1",
            )
            .bind(turn)
            .fetch_one(&pool)
            .await
            .expect("a memory")
        }
    };
    let (b1, b2) = (memory_of("b1").await, memory_of("b2").await);
    assert_eq!(
        b1.0, b2.0,
        "\"I live in Beijing\" and \"I'm based in Beijing\" merge"
    );
    let (c1, c2) = (memory_of("c1").await, memory_of("c2").await);
    assert_ne!(c1.0, c2.0, "liking cats and liking dogs are two memories");
    assert_eq!((c1.2.as_str(), c2.2.as_str()), ("active", "active"));
    let (r1, r2) = (memory_of("r1").await, memory_of("r2").await);
    assert_eq!(r1.2, "superseded", "red is superseded");
    assert_eq!(r1.3, Some(r2.0), "by blue");
    assert_eq!(r2.2, "active");
    // The audit log, in the order persist decided, each entry naming its user.
    let log = |id: Uuid| {
        let pool = d.ctx.store.pool.clone();
        async move {
            sqlx::query_as::<_, (String, String, Option<String>)>(
                "SELECT event, actor, user_id FROM memory_events WHERE memory_id = $1 ORDER BY id",
            )
            .bind(id)
            .fetch_all(&pool)
            .await
            .expect("events")
        }
    };
    let li = Some("li".to_string());
    assert_eq!(
        log(b1.0).await,
        [
            ("create".into(), "persist".into(), li.clone()),
            ("merge".into(), "persist".into(), li.clone())
        ]
    );
    assert_eq!(
        log(r1.0).await,
        [
            ("create".into(), "persist".into(), li.clone()),
            ("supersede".into(), "persist".into(), li.clone())
        ]
    );
    assert_eq!(
        log(r2.0).await,
        [("create".into(), "persist".into(), li.clone())]
    );
    let (z1, z2) = (memory_of("z1").await, memory_of("z2").await);
    assert_eq!(z1.0, z2.0, "the Chinese paraphrases merge");
    let z_terms: Vec<String> = sqlx::query_scalar("SELECT terms FROM memories WHERE id = $1")
        .bind(z1.0)
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("terms");
    assert!(
        z_terms.iter().any(|t| t == "北京"),
        "a Chinese memory is findable by its words: {z_terms:?}"
    );
    let active = [Status::Active];
    let keyword = |user_id: &'static str, text: &'static str| {
        let store = d.ctx.store.clone();
        let statuses = active;
        async move {
            keyword::search(
                &store,
                &KeywordQuery {
                    tenant: TENANT,
                    user_id,
                    text,
                    statuses: &statuses,
                    limit: 5,
                    matching: Default::default(),
                    candidates: 2_000,
                },
            )
            .await
            .expect("keyword search")
            .hits
        }
    };
    let found = keyword("li", "谁住在朝阳区？").await;
    assert_eq!(
        found.first().map(|h| h.id),
        Some(z1.0),
        "a Chinese query finds the Chinese memory through the keyword channel alone: {found:?}"
    );
    assert_eq!(
        keyword("li", "Which pets does Li like? cats")
            .await
            .first()
            .map(|h| h.id),
        Some(memory_of("c1").await.0)
    );
    assert!(
        keyword("someone-else", "谁住在朝阳区？").await.is_empty(),
        "another user's memories are never searched"
    );
    let confidence: f32 = sqlx::query_scalar("SELECT confidence FROM memories WHERE id = $1")
        .bind(b1.0)
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("row");
    assert!(confidence > 0.9, "a merge raises confidence ({confidence})");
    stop(stages).await;
    drop(index);
    d.remove().await;
}

fn synthetic_model() -> ModelId {
    ModelId {
        name: "synthetic".into(),
        version: "1".into(),
        dimension: 384,
    }
}

/// A deterministic pseudo-random unit vector.
fn unit(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter_mut().for_each(|a| *a /= norm);
    v
}

fn near(base: &[f32], seed: u64) -> Vec<f32> {
    let noise = unit(seed);
    let mut v: Vec<f32> = base.iter().zip(&noise).map(|(b, n)| b + 0.15 * n).collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter_mut().for_each(|a| *a /= norm);
    v
}

fn embedded(user: &str, fact_id: &str, content: String, vector: Vec<f32>) -> EmbeddedFact {
    EmbeddedFact {
        fact: fact::plain(TENANT, user, fact_id, &content),
        model: synthetic_model(),
        languages: Languages::parse("en"),
        vector,
    }
}

async fn publish_embedded(d: &Deployment, facts: &[EmbeddedFact]) {
    let subject = d.config().namespace.subject(Topic::Embedded, TENANT);
    let mut acks = Vec::new();
    for f in facts {
        let msg = jetstream::message::PublishMessage::build()
            .payload(serde_json::to_vec(f).expect("json").into())
            .message_id(format!("{TENANT}:{}", f.fact.fact_id));
        acks.push(
            d.ctx
                .bus
                .js
                .send_publish(subject.clone(), msg)
                .await
                .expect("publish"),
        );
    }
    for ack in acks {
        ack.await.expect("stored");
    }
}

/// 2,000 facts for 10 users: 120 distinct statements each, plus 80 that say
/// one of them again (same words, or the same with a prefix, with a vector
/// at cosine ≈ 0.99), in a shuffled order.
fn planted(users: usize) -> Vec<EmbeddedFact> {
    let mut facts = Vec::new();
    for u in 0..users {
        let user = format!("user-{u}");
        for b in 0..120u64 {
            let seed = (u as u64) * 1000 + b;
            facts.push(embedded(
                &user,
                &format!("u{u}-b{b}#0"),
                format!("{user} keeps note number {seed} about topic{seed}"),
                unit(seed),
            ));
        }
        for k in 0..80u64 {
            let b = (k * 7) % 120;
            let seed = (u as u64) * 1000 + b;
            let content = if k % 2 == 0 {
                format!("{user} keeps note number {seed} about topic{seed}")
            } else {
                format!("Remember: {user} keeps note number {seed} about topic{seed}")
            };
            facts.push(embedded(
                &user,
                &format!("u{u}-d{k}#0"),
                content,
                near(&unit(seed), 50_000 + seed + k),
            ));
        }
    }
    // A fixed shuffle: out of order, and every replica sees a mix of users.
    let n = facts.len();
    for i in (1..n).rev() {
        let j = (i * 7919 + 13) % (i + 1);
        facts.swap(i, j);
    }
    facts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_persist_replicas_never_write_near_duplicates_and_lose_no_fact() {
    let d = Deployment::new("test", |c| c.batch_size = 64).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let facts = planted(10);
    assert_eq!(facts.len(), 2000);
    publish_embedded(&d, &facts).await;
    let mut replicas = Vec::new();
    for _ in 0..4 {
        let stage = PersistStage::new(
            d.ctx.store.clone(),
            index.clone(),
            d.config().namespace.clone(),
            0.85,
        );
        replicas.push(d.start(stage).await);
    }
    eventually(
        "the 2,000 facts are persisted",
        Duration::from_secs(120),
        || async {
            count(&d, "SELECT count(*) FROM memory_sources").await == 2000
                && d.backlog("EMBEDDED", "persist").await == 0
        },
    )
    .await;
    stop(replicas).await;
    drop(index);

    let sourced: HashSet<String> = sqlx::query_scalar("SELECT fact_id FROM memory_sources")
        .fetch_all(&d.ctx.store.pool)
        .await
        .expect("query")
        .into_iter()
        .collect();
    assert!(
        facts.iter().all(|f| sourced.contains(&f.fact.fact_id)),
        "every fact is a memory or merged into one"
    );
    assert_eq!(count(&d, "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.memory_id = m.id)").await, 0);
    assert_eq!(
        count(&d, "SELECT count(*) FROM memories WHERE status = 'active'").await,
        1200,
        "one memory per distinct statement"
    );
    let rows: Vec<(String, Vec<f32>)> = sqlx::query_as(
        "SELECT m.user_id, v.embedding FROM memories m JOIN memory_vectors v ON v.id = m.id
             WHERE m.status = 'active'",
    )
    .fetch_all(&d.ctx.store.pool)
    .await
    .expect("query");
    for (i, (user_a, a)) in rows.iter().enumerate() {
        for (user_b, b) in &rows[i + 1..] {
            if user_a == user_b {
                assert!(
                    cosine(a, b) < 0.85,
                    "two active memories of {user_a} are near-duplicates"
                );
            }
        }
    }
    d.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_outage_leaves_rows_pending_until_it_returns_and_reindex_restores_the_same_results()
 {
    let d = Deployment::new("test", |_| {}).await;
    let switch = Arc::new(Outage::switchable(
        hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index"),
    ));
    let index: Arc<dyn VectorIndex> = switch.clone();
    let persist = d
        .start(PersistStage::new(
            d.ctx.store.clone(),
            index.clone(),
            d.config().namespace.clone(),
            0.85,
        ))
        .await;

    switch.set_up(false);
    let facts: Vec<EmbeddedFact> = (0..50u64)
        .map(|i| {
            embedded(
                "li",
                &format!("t{i}#0"),
                format!("li keeps note number {i} about topic{i}"),
                unit(i),
            )
        })
        .collect();
    publish_embedded(&d, &facts).await;
    eventually(
        "writes succeed while the index is down",
        Duration::from_secs(30),
        || async { count(&d, "SELECT count(*) FROM memory_sources").await == 50 },
    )
    .await;
    assert_eq!(
        count(
            &d,
            "SELECT count(*) FROM memories WHERE index_state = 'pending'"
        )
        .await,
        50,
        "rows wait as pending"
    );

    switch.set_up(true);
    let ns = d.config().namespace.clone();
    let reconciler = tokio::spawn(reconcile::run(
        d.ctx.store.clone(),
        index.clone(),
        ns.clone(),
        Duration::from_millis(200),
        persist.shutdown.clone(),
    ));
    eventually(
        "the reconciler indexes every pending row",
        Duration::from_secs(30),
        || async {
            count(
                &d,
                "SELECT count(*) FROM memories WHERE index_state = 'pending'",
            )
            .await
                == 0
        },
    )
    .await;
    let collection = Collection::for_model(&ns, &synthetic_model());
    assert_eq!(index.count(&collection, None).await.expect("count"), 50);

    let scope = Scope {
        tenant: TENANT.into(),
        user_id: "li".into(),
        statuses: vec![Status::Active],
        ..Default::default()
    };
    let mut before = Vec::new();
    for q in 0..5u64 {
        before.push(
            index
                .search(&collection, &near(&unit(q * 9), 7), &scope, 5)
                .await
                .expect("search"),
        );
    }
    index.clear(&collection).await.expect("cleared");
    assert_eq!(index.count(&collection, None).await.expect("count"), 0);
    let rebuilt = reconcile::reindex(&d.ctx.store, index.as_ref(), &ns)
        .await
        .expect("reindex");
    assert_eq!(rebuilt, 50);
    for (q, expected) in before.iter().enumerate() {
        let after = index
            .search(&collection, &near(&unit(q as u64 * 9), 7), &scope, 5)
            .await
            .expect("search");
        let ids = |hits: &[hindsight_index::Hit]| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(
            ids(&after),
            ids(expected),
            "reindex restores identical results"
        );
    }
    persist.stop().await;
    let _ = reconciler.await;
    drop((index, switch));
    d.remove().await;
}
