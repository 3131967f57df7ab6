//! `hindsight maintenance` as an operator uses it: in-process when no janitor
//! runs, through the running janitor over NATS when one does.

use std::process::Output;

use chrono::{DateTime, TimeZone, Utc};
use hindsight_tests::{
    Deployment,
    seed::{self, Seed, basis, near},
    succeeded,
};
use serde_json::Value;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 6, 2, 0, 0)
        .single()
        .expect("date")
}

async fn hindsight(d: &Deployment, args: &[&str]) -> Output {
    d.cli(env!("CARGO_BIN_EXE_hindsight"))
        .args(args)
        .env("HOSTNAME", "cli-process")
        .output()
        .await
        .expect("hindsight runs")
}

fn json(out: &Output) -> Value {
    let stdout = succeeded(out);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}): {stdout}"))
}

#[tokio::test]
async fn maintenance_run_dry_run_json_prints_the_per_step_counts() {
    let d = Deployment::new("maintenance-cli", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    let t = now();
    let mut stale = Seed::aged("acme", "li", "Li once mentioned a parking ticket", t, 100);
    stale.importance = 0.3;
    stale.write(&pool).await;
    let mut a = Seed::aged(
        "acme",
        "li",
        "Li prefers window seats on long flights",
        t,
        2,
    );
    a.embedding = basis(5);
    a.write(&pool).await;
    let mut b = Seed::aged("acme", "li", "Li prefers window seats", t, 2);
    b.embedding = near(5, 6, 0.97);
    b.write(&pool).await;
    let before = seed::memories(&pool).await;
    let as_of = t.to_rfc3339();

    // No janitor is running: the command runs in-process.
    let out = hindsight(
        &d,
        &[
            "maintenance",
            "run",
            "--dry-run",
            "--json",
            "--as-of",
            &as_of,
        ],
    )
    .await;
    let report = json(&out);
    assert_eq!(report["dry_run"], true);
    let counts = &report["counts"];
    for (step, n) in [
        ("decayed", 1),
        ("merged", 1),
        ("merge_survivors", 1),
        ("archived", 1),
        ("consolidated", 0),
        ("summaries", 0),
        ("purged", 0),
    ] {
        assert_eq!(counts[step], n, "{step} in {counts}");
    }
    assert_eq!(
        seed::memories(&pool).await,
        before,
        "the dry run changed nothing"
    );

    // A janitor is running: the command asks it over NATS.
    let janitor = hindsight_janitor::janitor(d.config(), d.ctx.store.clone(), Some(&d.ctx.bus))
        .with_host("the-janitor");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(hindsight_janitor::control::serve(
        janitor,
        d.ctx.bus.client.clone(),
        d.config().namespace.clone(),
        shutdown.clone(),
    ));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let report = json(&hindsight(&d, &["maintenance", "run", "--json", "--as-of", &as_of]).await);
    assert_eq!(report["dry_run"], false);
    assert_eq!(report["counts"]["merged"], 1);
    let id = report["id"].as_str().expect("run id").to_string();
    let host: Option<String> =
        sqlx::query_scalar("SELECT host FROM maintenance_runs WHERE id = $1::text::uuid")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .expect("run row");
    assert_eq!(
        host.as_deref(),
        Some("the-janitor"),
        "the running janitor ran it"
    );
    assert_ne!(seed::memories(&pool).await, before);

    let runs = json(&hindsight(&d, &["maintenance", "runs", "--json"]).await);
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs}");
    assert_eq!(runs[0]["id"], Value::String(id.clone()));

    let restored = json(&hindsight(&d, &["maintenance", "restore", &id, "--json"]).await);
    assert_eq!(restored["restored"]["undecayed"], 1, "{restored}");
    assert_eq!(restored["restored"]["unfolded"], 1);
    assert_eq!(seed::memories(&pool).await, before, "restored row for row");

    // A second restore is refused with a reason, and the exit status says so.
    let again = hindsight(&d, &["maintenance", "restore", &id]).await;
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already restored"), "{stderr}");

    shutdown.cancel();
    serving.await.expect("joined").expect("served");
    d.remove().await;
}
