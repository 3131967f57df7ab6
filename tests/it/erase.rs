//! Erasing a user, proven by a canary: turns carrying a unique string go
//! through the whole system (real NATS, Postgres, the local model and the
//! index); after the erase the string is found in no row of any table and
//! the user has no point in the index, while another user's rows are byte
//! for byte what they were.

use std::time::Duration;

use hindsight_core::embedding::ModelId;
use hindsight_erase::{EraseError, Eraser};
use hindsight_filter::FilterStage;
use hindsight_index::{Collection, Scope, VectorIndex};
use hindsight_janitor::{Outcome, RunRequest};
use hindsight_recall::WorkingMemory;
use hindsight_tests::{
    Deployment,
    canary::{files_holding, lines_of, messages_holding, messages_of, rows_hash, rows_holding},
    stack::Stack,
};
use serde_json::json;

const TENANT: &str = "acme";
/// The erased user, and the string only their turns hold.
const USER: &str = "ann";
const CANARY: &str = "Zorblax7731";
/// Another user of the same tenant, who must not be touched, and their string.
const OTHER: &str = "bob";
const OTHER_MARK: &str = "Quillon2290";

async fn say(d: &Deployment, user: &str, session: &str, turn_id: &str, content: &str) {
    let turn = json!({
        "tenant": TENANT, "user_id": user, "session_id": session, "turn_id": turn_id,
        "speaker": user, "ts": "2024-03-01T10:00:00Z", "content": content,
    });
    d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
}

/// A user's conversation: kept turns, a fact superseded by a later one, and
/// a repeat that the filter drops. `mark` goes into most turns. `before` is
/// how many turns the deployment holds already.
async fn converse(d: &Deployment, user: &str, mark: &str, before: i64) {
    let session = format!("{user}-s1");
    let lines = [
        "My favourite colour is red.".to_string(),
        format!("My sister Ruth teaches chemistry at {mark} Academy."),
        "My favourite colour is blue now.".to_string(),
        format!("I walk to {mark} Park every morning."),
        format!("I walk to {mark} Park every morning."),
    ];
    // The change goes after what it changes has become a memory.
    for (i, line) in lines.iter().enumerate() {
        say(d, user, &session, &format!("{user}-t{i}"), line).await;
        if i == 1 {
            hindsight_tests::stack::drained(d, before + 2).await;
        }
    }
    hindsight_tests::stack::drained(d, before + lines.len() as i64).await;
}

/// The deployment's eraser, waiting up to `wait` seconds for the index's owner.
async fn eraser(d: &Deployment, wait: u64) -> Eraser {
    Eraser::open(
        d.ctx.store.clone(),
        d.ctx.bus.js.clone(),
        d.config().namespace.clone(),
        &d.config().data_dir,
    )
    .await
    .expect("an eraser")
    .with_wait(Duration::from_secs(wait))
}

async fn points(d: &Deployment, index: &dyn VectorIndex, user: &str) -> u64 {
    let mut total = 0;
    for (name, version, dimension) in d.ctx.store.embedding_models().await.expect("models") {
        let model = ModelId {
            name,
            version,
            dimension: dimension.max(0) as usize,
        };
        let collection = Collection::for_model(&d.config().namespace, &model);
        let scope = Scope {
            tenant: TENANT.into(),
            user_id: user.into(),
            ..Scope::default()
        };
        total += index.count(&collection, Some(&scope)).await.expect("count");
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_users_canary_is_found_in_no_table_and_no_index_point() {
    let d = Deployment::new("erase", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index.clone()).await;
    converse(&d, USER, CANARY, 0).await;
    converse(&d, OTHER, OTHER_MARK, 5).await;
    // A turn that fails validation: a dead letter, and its message stays in TURNS.
    for (user, mark) in [(USER, CANARY), (OTHER, OTHER_MARK)] {
        let bad = json!({
            "tenant": TENANT, "user_id": user, "session_id": format!("{user}-s1"),
            "turn_id": format!("{user}-bad"), "speaker": user, "role": "robot",
            "ts": "2024-03-01T10:00:00Z", "content": format!("Bad role, {mark}"),
        });
        d.publish_raw(TENANT, bad.to_string().into_bytes()).await;
    }
    hindsight_tests::eventually("both are dead letters", Duration::from_secs(30), || async {
        d.dead_letters().await.len() == 2
    })
    .await;

    // A working-memory key of each user.
    let working = WorkingMemory::open(&d.ctx.bus.js, &d.config().namespace)
        .await
        .expect("working memory");
    for (user, mark) in [(USER, CANARY), (OTHER, OTHER_MARK)] {
        let mut keys = serde_json::Map::new();
        keys.insert("locker".into(), json!(mark));
        working
            .merge(TENANT, user, &format!("{user}-s1"), &keys)
            .await
            .expect("a working-memory key");
    }
    // One memory of each user deleted long ago: the janitor purges it into its export.
    sqlx::query(
        "UPDATE memories SET status = 'deleted', archived_at = now() - interval '40 days',
                updated_at = clock_timestamp(), index_state = 'pending'
          WHERE id IN (SELECT DISTINCT ON (user_id) id FROM memories
                        WHERE content LIKE '%Park%' ORDER BY user_id, id)",
    )
    .execute(&d.ctx.store.pool)
    .await
    .expect("deleted");
    hindsight_tests::stack::drained(&d, 10).await;
    let janitor = hindsight_janitor::janitor(d.config(), d.ctx.store.clone(), Some(&d.ctx.bus));
    match janitor.run(RunRequest::manual(false)).await.expect("a run") {
        Outcome::Ran(report) => assert_eq!(report.counts.total.purged, 2, "{report:?}"),
        other => panic!("expected a run, got {other:?}"),
    }
    let exports = hindsight_shared::exports::dir(&d.config().data_dir);
    assert!(
        !files_holding(&exports, CANARY).is_empty(),
        "the canary is in an export"
    );

    assert!(
        !rows_holding(&d, CANARY).await.is_empty(),
        "the canary went in"
    );
    let (ann_points, bob_points) = (
        points(&d, index.as_ref(), USER).await,
        points(&d, index.as_ref(), OTHER).await,
    );
    assert!(
        ann_points > 0 && bob_points > 0,
        "{ann_points} {bob_points}"
    );
    let statuses: Vec<String> = sqlx::query_scalar(
        "SELECT status || ': ' || content FROM memories WHERE user_id = $1 ORDER BY 1",
    )
    .bind(USER)
    .fetch_all(&d.ctx.store.pool)
    .await
    .expect("statuses");
    assert!(
        statuses.iter().any(|s| s.starts_with("superseded")),
        "{statuses:?}"
    );
    let other_before = rows_hash(&d, OTHER).await;
    let other_messages = messages_of(&d, OTHER).await;
    let other_exported = lines_of(&exports, OTHER);
    assert_eq!(other_exported.len(), 1);
    assert!(!messages_holding(&d, CANARY).await.is_empty());

    let eraser = eraser(&d, 30).await;
    let dry = eraser
        .erase(TENANT, USER, "test", true)
        .await
        .expect("a dry run");
    assert!(dry.erasure.is_none());
    assert_eq!(dry.counts.turns, 5, "{:?}", dry.counts);
    assert!(
        !rows_holding(&d, CANARY).await.is_empty(),
        "a dry run changes nothing"
    );

    let report = eraser
        .erase(TENANT, USER, "test", false)
        .await
        .expect("the erase");
    let c = &report.counts;
    assert_eq!(c.turns, 5, "{c:?}");
    assert_eq!(c.memories, dry.counts.memories, "{c:?}");
    assert_eq!(c.sources, dry.counts.sources, "{c:?}");
    // The purge's own event names the user too (written before the delete).
    assert_eq!(c.events, dry.counts.events, "{c:?}");
    assert_eq!(c.index_points, dry.counts.index_points, "{c:?}");
    // Five turns and the invalid one in TURNS, the letter in the DLQ.
    assert_eq!(c.stream_messages.get("TURNS"), Some(&6), "{c:?}");
    assert_eq!(c.stream_messages.get("DLQ"), Some(&1), "{c:?}");
    assert!(c.memories > 0 && c.events >= c.memories, "{c:?}");

    assert_eq!(rows_holding(&d, CANARY).await, Vec::new());
    assert_eq!(rows_holding(&d, &format!("{USER}-t")).await, Vec::new());
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM memories WHERE user_id = $1)
              + (SELECT count(*) FROM turns WHERE user_id = $1)
              + (SELECT count(*) FROM memory_events WHERE user_id = $1)",
    )
    .bind(USER)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("count");
    assert_eq!(left, 0);
    assert_eq!(points(&d, index.as_ref(), USER).await, 0);
    assert_eq!(points(&d, index.as_ref(), OTHER).await, bob_points);
    assert_eq!(rows_hash(&d, OTHER).await, other_before);
    assert_eq!(messages_holding(&d, CANARY).await, Vec::new());
    assert_eq!(messages_of(&d, USER).await, Vec::new());
    assert_eq!(messages_of(&d, OTHER).await, other_messages);
    assert_eq!(files_holding(&exports, CANARY), Vec::<String>::new());
    assert_eq!(lines_of(&exports, OTHER), other_exported);
    assert_eq!(
        working.get(TENANT, USER, "ann-s1").await.expect("read"),
        serde_json::Map::new()
    );
    assert_eq!(c.working_keys, 1, "{c:?}");
    assert_eq!(c.export_rows, 1, "{c:?}");

    // The record keeps who, when and how much, and the user's hash, not the id.
    let record: (Option<String>, String, serde_json::Value) = sqlx::query_as(
        "SELECT user_id, actor, counts FROM erasures WHERE id = $1 AND status = 'finished'",
    )
    .bind(report.erasure.expect("a job"))
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("the record");
    assert_eq!(record.0, None);
    assert_eq!(record.1, "test");
    assert_eq!(record.2["turns"], 5);
    assert_eq!(record.2["stream_messages"]["DLQ"], 1);
    assert_eq!(
        report.user_hash,
        hindsight_store::erase::user_hash(TENANT, USER)
    );

    // Again: nothing is left, and nothing fails.
    let again = eraser
        .erase(TENANT, USER, "test", false)
        .await
        .expect("again");
    assert_eq!(again.counts.total(), 0, "{:?}", again.counts);

    stack.stop().await;
    drop(index);
    d.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_user_erases_nothing_and_a_malformed_one_is_refused() {
    let d = Deployment::new("erase-input", |_| {}).await;
    let eraser = eraser(&d, 5).await;
    let report = eraser
        .erase(TENANT, "nobody", "test", false)
        .await
        .expect("an unknown user is no error");
    assert_eq!(report.counts.total(), 0, "{:?}", report.counts);
    assert!(report.erasure.is_some());

    match eraser.erase(TENANT, "bad user;--", "test", false).await {
        Err(e @ EraseError::InvalidUser(_)) => {
            assert!(e.to_string().contains("invalid user id"), "{e}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    match eraser.erase("a.b", "ann", "test", true).await {
        Err(EraseError::InvalidTenant(_)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    d.remove().await;
}

/// Turns not archived yet, turns between two stages, and turns the filter
/// refuses while an erase runs: all go with the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_in_flight_and_turns_arriving_during_the_erase_are_erased() {
    let d = Deployment::new("erase-flight", |_| {}).await;
    let store = d.ctx.store.clone();
    let eraser = eraser(&d, 5).await;
    // The filter runs, nothing after it: kept turns wait in KEPT.
    let filter = d.start(FilterStage::new(store.clone())).await;
    say(
        &d,
        USER,
        "s1",
        "ann-t0",
        &format!("I keep bees near {CANARY} Farm."),
    )
    .await;
    say(
        &d,
        USER,
        "s1",
        "ann-t1",
        &format!("The hives are blue, says {CANARY}."),
    )
    .await;
    say(&d, OTHER, "s2", "bob-t0", "I keep goats.").await;
    hindsight_tests::eventually(
        "three turns wait in KEPT",
        Duration::from_secs(30),
        || async { d.stream_messages("KEPT").await == 3 },
    )
    .await;
    // The filter stops: the next turn waits in TURNS, not archived.
    filter.stop().await;
    say(
        &d,
        USER,
        "s1",
        "ann-t2",
        &format!("Honey from {CANARY} sells well."),
    )
    .await;
    d.flush().await;
    let other_before = messages_of(&d, OTHER).await;
    assert_eq!(other_before.len(), 2, "bob's turn in TURNS and KEPT");

    let report = eraser
        .erase(TENANT, USER, "test", false)
        .await
        .expect("the erase");
    let c = &report.counts;
    assert_eq!(c.turns, 2, "{c:?}");
    assert_eq!(c.stream_messages.get("TURNS"), Some(&3), "{c:?}");
    assert_eq!(c.stream_messages.get("KEPT"), Some(&2), "{c:?}");
    assert_eq!(messages_holding(&d, CANARY).await, Vec::new());
    assert_eq!(messages_of(&d, OTHER).await, other_before);

    // An erase runs for another user (started, not finished): the filter
    // refuses their turn, archives nothing of it and writes it down; the
    // erase then removes it from TURNS. Bob's turn goes through as usual.
    let job = store
        .start_erasure(TENANT, "cy", "test")
        .await
        .expect("a job");
    let filter = d.start(FilterStage::new(store.clone())).await;
    say(&d, "cy", "s3", "cy-t0", &format!("Cy's code is {CANARY}.")).await;
    say(&d, OTHER, "s2", "bob-t1", "My goats are called Ada and Bo.").await;
    hindsight_tests::eventually(
        "the filter has taken both",
        Duration::from_secs(30),
        || async { d.backlog("TURNS", "filter").await == 0 },
    )
    .await;
    let bob: i64 = sqlx::query_scalar("SELECT count(*) FROM turns WHERE turn_id = 'bob-t1'")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(bob, 1, "another user's turn is archived as usual");
    let archived: i64 = sqlx::query_scalar("SELECT count(*) FROM turns WHERE user_id = 'cy'")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(archived, 0, "a refused turn is not archived");
    let waiting: i64 =
        sqlx::query_scalar("SELECT count(*) FROM erasure_messages WHERE erasure = $1")
            .bind(job.id)
            .fetch_one(&store.pool)
            .await
            .expect("count");
    assert_eq!(waiting, 1, "the refused turn is written down for the erase");
    let report = eraser
        .erase(TENANT, "cy", "test", false)
        .await
        .expect("the erase");
    assert!(report.resumed);
    assert_eq!(report.counts.stream_messages.get("TURNS"), Some(&1));
    assert_eq!(messages_holding(&d, CANARY).await, Vec::new());
    filter.stop().await;
    d.remove().await;
}

/// A job killed between deleting a message and writing that down finds the
/// message gone when it resumes: gone is done, not an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_already_deleted_when_the_job_resumes_counts_as_removed() {
    let d = Deployment::new("erase-gone", |_| {}).await;
    say(&d, USER, "s1", "ann-t0", "I keep bees.").await;
    d.flush().await;
    hindsight_tests::eventually("the turn is in TURNS", Duration::from_secs(10), || async {
        d.stream_messages("TURNS").await == 1
    })
    .await;
    let job = d
        .ctx
        .store
        .start_erasure(TENANT, USER, "test")
        .await
        .expect("a job");
    d.ctx
        .store
        .record_messages(
            job.id,
            &[hindsight_store::erase::PendingMessage {
                stream: "TURNS".into(),
                seq: 1,
            }],
        )
        .await
        .expect("written down");
    d.stream("TURNS")
        .await
        .delete_message(1)
        .await
        .expect("deleted before the kill");
    let report = eraser(&d, 5)
        .await
        .erase(TENANT, USER, "test", false)
        .await
        .expect("resumed");
    assert!(report.resumed);
    assert_eq!(report.counts.stream_messages.get("TURNS"), Some(&1));
    d.remove().await;
}
