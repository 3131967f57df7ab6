//! A plan past its end: absent from default recall over HTTP and MCP, present
//! and flagged with `include: expired`, shown as past in the brief, current
//! again when recalled as of a time before its end; the janitor archives it
//! and a restore brings it back.

use super::*;
use chrono::{Duration as Days, Utc};
use hindsight_janitor::{Outcome, RunRequest};
use hindsight_tests::seed::Seed;

/// Writes a memory findable by its words (the seeds' vectors are no model's).
async fn memory(
    d: &Deployment,
    content: &str,
    fact_type: &'static str,
    expires: Option<chrono::DateTime<Utc>>,
) -> Uuid {
    let mut seed = Seed::new("acme", "li", content, Utc::now() - Days::days(3));
    seed.fact_type = fact_type;
    seed.expires_at = expires;
    let id = seed.write(&d.ctx.store.pool).await;
    let terms = hindsight_store::memories::search_terms(content, &[] as &[String], None);
    sqlx::query("UPDATE memories SET terms = $2 WHERE id = $1")
        .bind(id)
        .bind(terms)
        .execute(&d.ctx.store.pool)
        .await
        .expect("terms");
    id
}

fn contents(answer: &Value) -> Vec<String> {
    answer["memories"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_plan_is_past_in_recall_the_brief_and_the_janitor() {
    let d = Deployment::new("expiry", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index.clone()).await;
    let http = Http::new(&stack);
    let key = d.ctx.store.create_tenant_key("acme").await.expect("key");
    let ended = Utc::now() - Days::days(1);
    let tokyo = memory(&d, "Li is in Tokyo for the trade fair", "plan", Some(ended)).await;
    memory(
        &d,
        "Li is in Osaka for the trade fair next month",
        "plan",
        Some(Utc::now() + Days::days(40)),
    )
    .await;
    let query = json!({"user_id": "li", "query": "where is Li for the trade fair?"});

    // Default recall: the plan that ended is left out.
    let (status, answer) = http.recall(&key, query.clone()).await;
    assert_eq!(status, 200, "{answer}");
    let found = contents(&answer);
    assert!(found.iter().any(|c| c.contains("Osaka")), "{answer}");
    assert!(!found.iter().any(|c| c.contains("Tokyo")), "{answer}");

    // Asked for, it comes back flagged.
    let mut with_expired = query.clone();
    with_expired["include"] = json!(["expired"]);
    let (_, answer) = http.recall(&key, with_expired.clone()).await;
    let past = answer["memories"]
        .as_array()
        .and_then(|ms| {
            ms.iter()
                .find(|m| m["content"].as_str().is_some_and(|c| c.contains("Tokyo")))
        })
        .cloned()
        .unwrap_or_else(|| panic!("the expired plan with include expired: {answer}"));
    assert_eq!(past["expired"], true, "{past}");
    assert!(past["expires_at"].is_string(), "{past}");

    // The brief shows it as past, never as a current plan.
    let (status, brief) = http
        .call(
            reqwest::Method::POST,
            "/v1/recall?format=brief",
            Some(&key),
            &[],
            Some(with_expired),
        )
        .await;
    assert_eq!(status, 200);
    let brief = brief.as_str().expect("text").to_string();
    let past_section = brief.find("No longer current").expect("a past section");
    let tokyo_line = brief.find("Li is in Tokyo").expect("the plan");
    assert!(past_section < tokyo_line, "{brief}");
    assert!(brief.contains(", past"), "{brief}");

    // As of two days ago, it was current.
    let mut then = query.clone();
    then["as_of"] = json!((Utc::now() - Days::days(2)).to_rfc3339());
    let (_, answer) = http.recall(&key, then).await;
    let current = answer["memories"]
        .as_array()
        .and_then(|ms| {
            ms.iter()
                .find(|m| m["content"].as_str().is_some_and(|c| c.contains("Tokyo")))
        })
        .cloned()
        .unwrap_or_else(|| panic!("the plan as of before its end: {answer}"));
    assert!(current.get("expired").is_none(), "{current}");

    // MCP: left out by default, there with include expired.
    let client = hindsight_tests::http();
    let mut mcp = McpSession::open(&client, &stack.base_url, &key).await;
    let (status, default) = mcp
        .call(
            "memory_search",
            json!({"user_id": "li", "query": "where is Li for the trade fair?"}),
        )
        .await;
    assert_eq!(status, 200, "{default}");
    assert!(!default.to_string().contains("Tokyo"), "{default}");
    let (_, included) = mcp
        .call(
            "memory_search",
            json!({"user_id": "li", "query": "where is Li for the trade fair?", "include": ["expired"]}),
        )
        .await;
    assert!(included.to_string().contains("Tokyo"), "{included}");
    assert!(
        included.to_string().contains("No longer current"),
        "{included}"
    );
    mcp.close().await;

    // The janitor archives it; a restore makes it active again.
    let janitor = hindsight_janitor::janitor(d.config(), d.ctx.store.clone(), Some(&d.ctx.bus));
    let run = match janitor.run(RunRequest::manual(false)).await.expect("a run") {
        Outcome::Ran(report) => report,
        other => panic!("expected a run, got {other:?}"),
    };
    let status_of = async || -> String {
        sqlx::query_scalar("SELECT status FROM memories WHERE id = $1")
            .bind(tokyo)
            .fetch_one(&d.ctx.store.pool)
            .await
            .expect("status")
    };
    assert_eq!(status_of().await, "archived");
    janitor.restore(run.id, false).await.expect("restored");
    assert_eq!(status_of().await, "active");

    stack.stop().await;
    drop(index);
    d.remove().await;
}
