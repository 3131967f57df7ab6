//! `hindsight user erase` as an operator uses it: JSON counts on stdout, a
//! dry run that changes nothing, a clear refusal of a malformed user id.

use hindsight_tests::{Deployment, succeeded};
use serde_json::Value;

async fn erase(d: &Deployment, args: &[&str]) -> std::process::Output {
    let mut all = vec!["user", "erase", "--tenant", "acme"];
    all.extend_from_slice(args);
    d.cli(env!("CARGO_BIN_EXE_hindsight"))
        .args(&all)
        .output()
        .await
        .expect("hindsight runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_reports_counts_as_json_and_refuses_a_malformed_user() {
    let d = Deployment::new("user-cli", |_| {}).await;
    hindsight_tests::seed::Seed::new("acme", "ann", "Ann keeps bees", chrono::Utc::now())
        .write(&d.ctx.store.pool)
        .await;

    let dry: Value = serde_json::from_str(&succeeded(
        &erase(&d, &["--user", "ann", "--dry-run"]).await,
    ))
    .expect("a JSON report");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["counts"]["memories"], 1, "{dry}");
    assert!(dry["erasure"].is_null());

    // Nothing owns the index here: the erase leaves its job running and says why.
    let waiting = erase(&d, &["--user", "ann", "--wait", "1s"]).await;
    assert!(!waiting.status.success());
    let stderr = String::from_utf8_lossy(&waiting.stderr);
    assert!(
        stderr.contains("still running") && stderr.contains("persist"),
        "{stderr}"
    );
    // The index's owner removes the point; the erase run again resumes the job.
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let removed = hindsight_persist::reconcile::remove_erased(
        &d.ctx.store,
        index.as_ref(),
        &d.config().namespace,
        100,
    )
    .await
    .expect("points removed");
    assert_eq!(removed, 1);
    drop(index);
    let done: Value = serde_json::from_str(&succeeded(
        &erase(&d, &["--user", "ann", "--wait", "1s"]).await,
    ))
    .expect("a JSON report");
    assert_eq!(done["resumed"], true, "{done}");
    assert_eq!(done["counts"]["memories"], 1, "{done}");
    assert_eq!(done["counts"]["index_points"], 1, "{done}");
    assert_eq!(done["user_hash"].as_str().map(str::len), Some(64), "{done}");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM memories")
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("count");
    assert_eq!(left, 0);

    let unknown: Value = serde_json::from_str(&succeeded(&erase(&d, &["--user", "nobody"]).await))
        .expect("a JSON report");
    assert_eq!(unknown["counts"]["memories"], 0, "{unknown}");

    let bad = erase(&d, &["--user", "ann smith"]).await;
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("invalid user id"), "{stderr}");
    d.remove().await;
}
