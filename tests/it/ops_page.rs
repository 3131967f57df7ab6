//! The `/ops` status page in a real headless Chromium, against a running
//! pipeline after an ingest: every number the page shows is checked against
//! the system (Postgres, JetStream, the maintenance run), and a screenshot is
//! saved under the target directory.

use std::{collections::HashMap, path::PathBuf, process::Command, time::Duration};

use chrono::Utc;
use hindsight_janitor::{Outcome, RunRequest, Trigger};
use hindsight_tests::{
    Deployment, eventually,
    stack::{self, Stack},
};
use serde_json::{Value, json};

const TENANT: &str = "ops-acme";

fn chromium() -> String {
    std::env::var("HINDSIGHT_CHROMIUM").unwrap_or_else(|_| "chromium".into())
}

/// Runs headless Chromium with `args` and the page URL; returns its stdout.
async fn browse(args: Vec<String>) -> String {
    tokio::task::spawn_blocking(move || {
        let profile = tempdir("chromium-profile");
        let out = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--no-first-run",
                "--window-size=1366,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(&args)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} ({e}): ./ops/test.sh installs Debian's chromium",
                    chromium()
                )
            });
        let _ = std::fs::remove_dir_all(&profile);
        assert!(
            out.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .expect("chromium ran")
}

fn tempdir(label: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{label}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Every `data-k="key">value<` of the rendered DOM (a key may repeat).
fn numbers(dom: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for piece in dom.split("data-k=\"").skip(1) {
        let Some((key, rest)) = piece.split_once('"') else {
            continue;
        };
        let Some((_, rest)) = rest.split_once('>') else {
            continue;
        };
        let value = rest.split('<').next().unwrap_or("").trim().to_string();
        out.entry(key.to_string()).or_default().push(value);
    }
    out
}

fn one<'a>(page: &'a HashMap<String, Vec<String>>, key: &str) -> &'a str {
    match page.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("the page shows {key} once, not {other:?}"),
    }
}

fn turn(id: &str, user: &str, content: &str) -> Vec<u8> {
    json!({"tenant": TENANT, "user_id": user, "session_id": "s1", "turn_id": id, "content": content})
        .to_string()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ops_page_in_chromium_shows_what_the_system_holds() {
    let d = Deployment::new("ops", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;

    let memorable = [
        "My favourite colour is green.",
        "I live in Oslo and work at Acme as an engineer.",
        "I'm allergic to peanuts, please remember that.",
        "My sister's name is Ingrid.",
        "I prefer tea over coffee in the morning.",
    ];
    for (i, content) in memorable.iter().enumerate() {
        d.publish_raw(TENANT, turn(&format!("m{i}"), "alice", content))
            .await;
    }
    for (i, content) in ["thanks!", "ok"].iter().enumerate() {
        d.publish_raw(TENANT, turn(&format!("p{i}"), "alice", content))
            .await;
    }
    // Three that break the contract: no user, another tenant's turn, not JSON.
    d.publish_raw(
        TENANT,
        json!({"tenant": TENANT, "session_id": "s1", "turn_id": "x1", "content": "hi there"})
            .to_string()
            .into_bytes(),
    )
    .await;
    d.publish_raw(
        TENANT,
        json!({"tenant": "someone-else", "user_id": "alice", "session_id": "s1", "turn_id": "x2", "content": "I live in Rome."})
            .to_string()
            .into_bytes(),
    )
    .await;
    d.publish_raw(TENANT, b"{not json".to_vec()).await;
    d.flush().await;
    let (published, valid, invalid) = (10u64, 7i64, 3u64);
    stack::drained(&d, valid).await;

    // Every stage has acked everything and the DLQ holds the three.
    let client = hindsight_tests::http();
    let ops_json = format!("{}/ops.json", stack.base_url);
    eventually(
        "the ops snapshot shows no lag and three dead letters",
        Duration::from_secs(60),
        || {
            let (client, url) = (client.clone(), ops_json.clone());
            async move {
                let Ok(resp) = client.get(&url).send().await else {
                    return false;
                };
                let Ok(snap) = resp.json::<Value>().await else {
                    return false;
                };
                snap["dlq_total"] == json!(invalid)
                    && snap["stages"].as_array().is_some_and(|stages| {
                        stages.len() >= 4
                            && stages
                                .iter()
                                .all(|s| s["pending"] == json!(0) && s["ack_pending"] == json!(0))
                    })
            }
        },
    )
    .await;

    // A real maintenance run, as of ten days from now, so decay has work.
    let janitor = hindsight_janitor::janitor(d.config(), d.ctx.store.clone(), Some(&d.ctx.bus));
    let report = match janitor
        .run(RunRequest {
            dry_run: false,
            tenant: None,
            as_of: Some(Utc::now() + chrono::Duration::days(10)),
            trigger: Trigger::Manual,
            scheduled_for: None,
        })
        .await
        .expect("the run executes")
    {
        Outcome::Ran(report) => *report,
        other => panic!("expected a run, got {other:?}"),
    };
    assert!(report.counts.total.decayed > 0, "decay had work");
    // The page reuses a snapshot for 2 s; this one must include the run.
    tokio::time::sleep(Duration::from_millis(2100)).await;

    let url = format!("{}/ops", stack.base_url);
    let dom = browse(vec!["--dump-dom".into(), url.clone()]).await;
    let page = numbers(&dom);

    // Memories: each status, all tenants and this tenant, as Postgres counts them.
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM memories GROUP BY status")
            .fetch_all(&d.ctx.store.pool)
            .await
            .expect("counts");
    let db = |status: &str| {
        counts
            .iter()
            .find(|(s, _)| s == status)
            .map_or(0, |(_, n)| *n)
    };
    let active = db("active");
    assert!(
        active >= 5,
        "the memorable turns became memories ({active})"
    );
    for status in ["active", "quarantined", "superseded", "archived", "deleted"] {
        assert_eq!(
            one(&page, &format!("memories:{status}")),
            db(status).to_string(),
            "{status}"
        );
        assert_eq!(
            one(&page, &format!("memories:{TENANT}:{status}")),
            db(status).to_string(),
            "{TENANT} {status}"
        );
    }
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    assert_eq!(one(&page, "memories:total"), total.to_string());

    // Pipeline: what each stage handled, nothing waiting.
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM turns WHERE fate = 'kept'")
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("kept");
    let facts: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_sources")
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("facts");
    assert_eq!(one(&page, "stage:filter:acked"), published.to_string());
    assert_eq!(one(&page, "stage:extract:acked"), kept.to_string());
    assert_eq!(
        one(&page, "stage:embed:acked"),
        one(&page, "stage:persist:acked")
    );
    assert_eq!(one(&page, "stage:persist:acked"), facts.to_string());
    for stage in ["filter", "extract", "embed", "persist"] {
        assert_eq!(
            one(&page, &format!("stage:{stage}:lag")),
            "0",
            "{stage} lag"
        );
    }

    // Dead letters: the depth and the reasons.
    assert_eq!(one(&page, "dlq:total"), invalid.to_string());
    assert_eq!(
        one(&page, &format!("dlq:filter:{TENANT}")),
        invalid.to_string()
    );
    let reasons = &page["dlq-latest:reason"];
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .all(|r| r.starts_with("invalid turn") || r.starts_with("undecodable")),
        "{reasons:?}"
    );

    // The last maintenance run and its counts.
    assert_eq!(one(&page, "run:status"), "finished");
    assert_eq!(one(&page, "run:id"), report.id.to_string());
    let c = report.counts.total;
    for (step, n) in [
        ("reinstated", c.reinstated),
        ("split", c.split),
        ("decayed", c.decayed),
        ("merged", c.merged),
        ("archived", c.archived),
        ("consolidated", c.consolidated),
        ("summaries", c.summaries),
        ("purged", c.purged),
    ] {
        assert_eq!(one(&page, &format!("run:{step}")), n.to_string(), "{step}");
    }

    // It refreshes itself and loads nothing from elsewhere.
    assert!(dom.contains("http-equiv=\"refresh\""));
    assert!(!dom.contains("src=\"http") && !dom.contains("href=\"http"));

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ops-page.png");
    let _ = std::fs::remove_file(&shot);
    browse(vec![format!("--screenshot={}", shot.display()), url]).await;
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "a screenshot of the page ({size} bytes)");
    eprintln!("screenshot: {}", shot.display());

    stack.stop().await;
    d.remove().await;
}
