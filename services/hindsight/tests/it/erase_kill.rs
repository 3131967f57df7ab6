//! `hindsight user erase` killed with SIGKILL halfway and run again: it
//! resumes its job, ends in the state an uninterrupted erase ends in (the
//! user's string nowhere, the other user's data as it was), and its counts
//! add up to what the dry run counted.

use std::time::Duration;

use chrono::Utc;
use hindsight_filter::FilterStage;
use hindsight_recall::WorkingMemory;
use hindsight_tests::{
    Deployment,
    canary::{files_holding, lines_of, messages_holding, messages_of, rows_hash, rows_holding},
    eventually,
    seed::Seed,
    succeeded,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TENANT: &str = "acme";
const USER: &str = "ann";
const CANARY: &str = "Vexmor4417";
const OTHER: &str = "bob";
const TURNS: usize = 120;
const MEMORIES: usize = 300;

async fn say(d: &Deployment, user: &str, turn_id: &str, content: &str) {
    let turn = json!({
        "tenant": TENANT, "user_id": user, "session_id": format!("{user}-s1"), "turn_id": turn_id,
        "speaker": user, "ts": "2024-03-01T10:00:00Z", "content": content,
    });
    d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
}

/// Both users' data in every place: archived turns waiting in KEPT (the
/// filter ran, nothing after it), memories with index points, a
/// working-memory key, rows in a purge export.
async fn world(d: &Deployment) {
    let store = d.ctx.store.clone();
    let filter = d.start(FilterStage::new(store.clone())).await;
    for i in 0..TURNS {
        say(
            d,
            USER,
            &format!("ann-t{i}"),
            &format!("Note {i}: the code is {CANARY}."),
        )
        .await;
    }
    for i in 0..5 {
        say(
            d,
            OTHER,
            &format!("bob-t{i}"),
            &format!("Bob's note number {i}."),
        )
        .await;
    }
    eventually(
        "every turn waits in KEPT",
        Duration::from_secs(60),
        || async { d.stream_messages("KEPT").await == (TURNS + 5) as u64 },
    )
    .await;
    filter.stop().await;
    for i in 0..MEMORIES {
        Seed::new(TENANT, USER, &format!("{CANARY} fact {i}"), Utc::now())
            .write(&store.pool)
            .await;
    }
    for i in 0..5 {
        Seed::new(TENANT, OTHER, &format!("Bob fact {i}"), Utc::now())
            .write(&store.pool)
            .await;
    }
    let working = WorkingMemory::open(&d.ctx.bus.js, &d.config().namespace)
        .await
        .expect("working memory");
    for (user, value) in [(USER, CANARY), (OTHER, "bob-value")] {
        let mut keys = serde_json::Map::new();
        keys.insert("code".into(), json!(value));
        working
            .merge(TENANT, user, &format!("{user}-s1"), &keys)
            .await
            .expect("a key");
    }
    let export = hindsight_shared::exports::dir(&d.config().data_dir).join("run-1.jsonl");
    let rows: Vec<Value> = (0..3)
        .map(|i| json!({"id": uuid::Uuid::new_v4(), "tenant": TENANT, "user_id": USER, "content": format!("{CANARY} purged {i}")}))
        .chain((0..2).map(|i| json!({"id": uuid::Uuid::new_v4(), "tenant": TENANT, "user_id": OTHER, "content": format!("Bob purged {i}")})))
        .collect();
    hindsight_shared::exports::append(&export, &rows).expect("an export");
}

fn erase(d: &Deployment, args: &[&str]) -> tokio::process::Command {
    let mut command = d.cli(env!("CARGO_BIN_EXE_hindsight"));
    command
        .args(["user", "erase", "--tenant", TENANT, "--user", USER])
        .args(args);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_killed_halfway_and_run_again_ends_as_one_run_with_counts_that_add_up() {
    let d = Deployment::new("erase-kill", |_| {}).await;
    world(&d).await;
    let exports = hindsight_shared::exports::dir(&d.config().data_dir);
    let (other_rows, other_messages, other_lines) = (
        rows_hash(&d, OTHER).await,
        messages_of(&d, OTHER).await,
        lines_of(&exports, OTHER),
    );
    let dry: Value = serde_json::from_str(&succeeded(
        &erase(&d, &["--dry-run"]).output().await.expect("runs"),
    ))
    .expect("a report");

    // No reconciler runs yet, so the erase cannot finish: it is killed once
    // its first place is done, wherever it is then.
    let mut child = erase(&d, &["--wait", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the erase starts");
    eventually(
        "the erase is under way",
        Duration::from_secs(60),
        || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT 1 FROM erasures WHERE 'database' = ANY (places))",
            )
            .fetch_one(&d.ctx.store.pool)
            .await
            .unwrap_or(false)
        },
    )
    .await;
    child.start_kill().expect("SIGKILL");
    let status = child.wait().await.expect("it ends");
    assert!(!status.success(), "killed, not finished");
    let running: i64 = sqlx::query_scalar("SELECT count(*) FROM erasures WHERE status = 'running'")
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("count");
    assert_eq!(running, 1, "the job is left running");

    // The index's owner comes up; the erase run again resumes the job.
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let shutdown = CancellationToken::new();
    let reconciler = tokio::spawn(hindsight_persist::reconcile::run(
        d.ctx.store.clone(),
        index.clone(),
        d.config().namespace.clone(),
        Duration::from_millis(100),
        shutdown.clone(),
    ));
    let done: Value = serde_json::from_str(&succeeded(
        &erase(&d, &["--wait", "60s"]).output().await.expect("runs"),
    ))
    .expect("a report");
    assert_eq!(done["resumed"], true, "{done}");
    let (c, expected) = (&done["counts"], &dry["counts"]);
    for what in [
        "memories",
        "sources",
        "turns",
        "index_points",
        "working_keys",
        "export_rows",
    ] {
        assert_eq!(c[what], expected[what], "{what}: {done} against {dry}");
    }
    assert_eq!(c["memories"], MEMORIES, "{done}");
    assert_eq!(c["turns"], TURNS, "{done}");
    assert_eq!(c["export_rows"], 3, "{done}");
    assert_eq!(c["stream_messages"]["TURNS"], TURNS, "{done}");
    assert_eq!(c["stream_messages"]["KEPT"], TURNS, "{done}");

    assert_eq!(rows_holding(&d, CANARY).await, Vec::new());
    assert_eq!(messages_holding(&d, CANARY).await, Vec::new());
    assert_eq!(files_holding(&exports, CANARY), Vec::<String>::new());
    assert_eq!(rows_hash(&d, OTHER).await, other_rows);
    assert_eq!(messages_of(&d, OTHER).await, other_messages);
    assert_eq!(lines_of(&exports, OTHER), other_lines);

    shutdown.cancel();
    let _ = reconciler.await;
    drop(index);
    d.remove().await;
}
