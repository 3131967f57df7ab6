//! Erasing a user over HTTP and NATS, as agents and operators ask: a tenant's
//! key erases its own users only (403 for another tenant's), the operator's
//! key erases for the tenant it names and does nothing else, a malformed user
//! id is refused with the reason, an unknown user reports zeros, and the
//! metric counts the erases.

use chrono::Utc;
use hindsight_tests::{Deployment, http, prometheus::scrape, seed::Seed, stack::Stack};
use serde_json::{Value, json};

const OPERATOR_KEY: &str = "operator-secret-for-tests";

async fn memories_of(d: &Deployment, tenant: &str, user: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM memories WHERE tenant = $1 AND user_id = $2")
        .bind(tenant)
        .bind(user)
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_over_http_and_nats_with_tenant_and_operator_keys() {
    let d = Deployment::new("erase-http", |c| {
        c.operator_key = Some(OPERATOR_KEY.into());
    })
    .await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index.clone()).await;
    let pool = &d.ctx.store.pool;
    for (tenant, user) in [("acme", "ann"), ("globex", "ann"), ("acme", "cy")] {
        Seed::new(tenant, user, "keeps bees", Utc::now())
            .write(pool)
            .await;
    }
    let acme = d.ctx.store.create_tenant_key("acme").await.expect("a key");
    let globex = d
        .ctx
        .store
        .create_tenant_key("globex")
        .await
        .expect("a key");
    let client = http();
    let url = |path: &str| format!("{}{path}", stack.base_url);
    let erase = |key: &str, path: &str, tenant: Option<&str>| {
        let mut req = client.delete(url(path)).bearer_auth(key);
        if let Some(t) = tenant {
            req = req.header("X-Hindsight-Tenant", t);
        }
        req.send()
    };
    let before = scrape(&stack.base_url)
        .await
        .sum("hindsight_erasures_total", &[("outcome", "finished")]);

    // Another tenant's key: 403, nothing erased.
    let r = erase(&globex, "/v1/users/ann", Some("acme"))
        .await
        .expect("a reply");
    assert_eq!(r.status(), 403);
    assert_eq!(memories_of(&d, "acme", "ann").await, 1);

    // A dry run counts, the erase removes; the other tenant's namesake stays.
    let r = erase(&acme, "/v1/users/ann?dry_run=true", None)
        .await
        .expect("a reply");
    assert_eq!(r.status(), 200);
    let dry: Value = r.json().await.expect("json");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["counts"]["memories"], 1, "{dry}");
    let r = erase(&acme, "/v1/users/ann", None).await.expect("a reply");
    assert_eq!(r.status(), 200);
    let report: Value = r.json().await.expect("json");
    assert_eq!(report["counts"]["memories"], 1, "{report}");
    assert_eq!(report["counts"]["index_points"], 1, "{report}");
    assert_eq!(memories_of(&d, "acme", "ann").await, 0);
    assert_eq!(memories_of(&d, "globex", "ann").await, 1);
    let actor: String = sqlx::query_scalar("SELECT actor FROM erasures WHERE tenant = 'acme'")
        .fetch_one(pool)
        .await
        .expect("the record");
    assert_eq!(actor, "http:tenant");

    // Bad input: a clear 400; an unknown user: zeros.
    let r = erase(&acme, "/v1/users/bad%20user", None)
        .await
        .expect("a reply");
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.expect("json");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("invalid user id"), "{body}");
    let r = erase(&acme, "/v1/users/nobody", None)
        .await
        .expect("a reply");
    assert_eq!(r.status(), 200);
    let nobody: Value = r.json().await.expect("json");
    assert_eq!(nobody["counts"]["memories"], 0, "{nobody}");

    // The operator's key: for the tenant it names, and nothing else.
    let r = erase(OPERATOR_KEY, "/v1/users/ann", None)
        .await
        .expect("a reply");
    assert_eq!(r.status(), 400, "the operator names the tenant");
    let r = erase(OPERATOR_KEY, "/v1/users/ann", Some("globex"))
        .await
        .expect("a reply");
    assert_eq!(r.status(), 200);
    assert_eq!(memories_of(&d, "globex", "ann").await, 0);
    let r = client
        .get(url("/v1/users/cy/overview"))
        .bearer_auth(OPERATOR_KEY)
        .header("X-Hindsight-Tenant", "acme")
        .send()
        .await
        .expect("a reply");
    assert_eq!(r.status(), 401, "the operator's key opens nothing else");

    // NATS request-reply.
    let nats = &d.ctx.bus.client;
    let subject = d.config().namespace.erase_subject("acme");
    let reply = nats
        .request(subject.clone(), json!({"user_id": "cy"}).to_string().into())
        .await
        .expect("a reply");
    let report: Value = serde_json::from_slice(&reply.payload).expect("json");
    assert_eq!(report["counts"]["memories"], 1, "{report}");
    assert_eq!(memories_of(&d, "acme", "cy").await, 0);
    let reply = nats
        .request(subject, json!({"user": "cy"}).to_string().into())
        .await
        .expect("a reply");
    let error: Value = serde_json::from_slice(&reply.payload).expect("json");
    assert_eq!(error["error"]["kind"], "bad_request", "{error}");

    let after = scrape(&stack.base_url)
        .await
        .sum("hindsight_erasures_total", &[("outcome", "finished")]);
    assert!(after >= before + 4.0, "{before} → {after}");

    stack.stop().await;
    drop(index);
    d.remove().await;
}
