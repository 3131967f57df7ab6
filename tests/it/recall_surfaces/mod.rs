//! Recall through its surfaces (HTTP, NATS request-reply) on the whole
//! system: tenant and user isolation, keys, the memory API, working memory,
//! conflicts, the Chinese keyword channel and degraded mode.

mod degraded;
mod expiry;
mod memory_api;

use hindsight_core::memory::{Include, Status};
use std::{sync::Arc, time::Duration};

use hindsight_gateway::{error::ApiError, remote};
use hindsight_index::outage::Outage;
use hindsight_recall::{RecallRequest, RecallResponse};
use hindsight_tests::{
    Deployment,
    mcp::McpSession,
    stack::{Stack, drained},
};
use serde_json::{Value, json};
use uuid::Uuid;

struct Http {
    client: reqwest::Client,
    base: String,
}

impl Http {
    fn new(stack: &Stack) -> Self {
        Self {
            client: hindsight_tests::http(),
            base: stack.base_url.clone(),
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        for (h, v) in headers {
            req = req.header(*h, *v);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("the gateway answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn recall(&self, key: &str, body: Value) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            "/v1/recall",
            Some(key),
            &[],
            Some(body),
        )
        .await
    }
}

async fn publish(d: &Deployment, tenant: &str, user: &str, turn_id: &str, content: &str) {
    let turn = json!({
        "tenant": tenant, "user_id": user, "session_id": format!("{user}-s1"), "turn_id": turn_id,
        "ts": "2024-05-01T10:00:00Z", "content": content,
    });
    d.publish_raw(tenant, turn.to_string().into_bytes()).await;
}

/// (tenant, user) of a memory id.
async fn owner(d: &Deployment, id: &str) -> (String, String) {
    sqlx::query_as("SELECT tenant, user_id FROM memories WHERE id = $1::uuid")
        .bind(id)
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("the returned memory exists")
}

/// A small deterministic generator, so a failing case can be replayed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_surface_ever_returns_another_tenants_or_users_memory() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let http = Http::new(&stack);

    // Random tenants, each with random users; user names repeat across
    // tenants on purpose, so a leak by user name alone would show.
    let mut rng =
        Rng(u64::from_le_bytes(Uuid::new_v4().as_bytes()[..8].try_into().expect("8 bytes")) | 1);
    let seed = rng.0;
    let tenants: Vec<String> = (0..3)
        .map(|i| format!("t{i}-{}", &Uuid::new_v4().simple().to_string()[..6]))
        .collect();
    let users = ["ana", "bo", "chen"];
    let mut keys = Vec::new();
    let mut turns = 0;
    for t in &tenants {
        keys.push(d.ctx.store.create_tenant_key(t).await.expect("key"));
        for u in users {
            let code = format!("{t}-{u}");
            publish(
                &d,
                t,
                u,
                &format!("{u}-1"),
                &format!("My locker code is {code} and I keep it secret."),
            )
            .await;
            publish(
                &d,
                t,
                u,
                &format!("{u}-2"),
                &format!("I love hiking in the Alps with my sister ({code})."),
            )
            .await;
            turns += 2;
        }
    }
    drained(&d, turns).await;

    let queries = [
        "What is my locker code?",
        "hiking",
        "secret code",
        "sister Alps",
    ];
    for case in 0..24 {
        let ti = rng.below(tenants.len());
        let user = users[rng.below(users.len())];
        let query = queries[rng.below(queries.len())];
        let ctx = format!(
            "seed {seed}, case {case}: tenant {}, user {user}, {query:?}",
            tenants[ti]
        );
        let (status, body) = http
            .recall(
                &keys[ti],
                json!({"user_id": user, "query": query, "top_k": 10}),
            )
            .await;
        assert_eq!(status, 200, "{ctx}: {body}");
        let over_http: RecallResponse = serde_json::from_value(body).expect("a recall answer");
        assert!(
            !over_http.memories.is_empty(),
            "{ctx}: the user's own memories come back"
        );
        let over_nats = remote::request(
            &d.ctx.bus.client,
            &d.config().namespace,
            &tenants[ti],
            &RecallRequest {
                top_k: Some(10),
                ..RecallRequest::new(user, query)
            },
            Duration::from_secs(10),
        )
        .await
        .expect("the gateway answers over NATS")
        .expect("a recall answer");
        for m in over_http.memories.iter().chain(&over_nats.memories) {
            assert_eq!(
                owner(&d, &m.id.to_string()).await,
                (tenants[ti].clone(), user.to_string()),
                "{ctx}: {m:?}"
            );
            assert!(
                m.provenance
                    .iter()
                    .all(|t| t.starts_with(&format!("{user}-"))),
                "{ctx}: {m:?}"
            );
        }
    }

    // Keys: missing, unknown, revoked-looking and other-tenant ones.
    let body = json!({"user_id": "ana", "query": "code"});
    let post = reqwest::Method::POST;
    assert_eq!(
        http.call(post.clone(), "/v1/recall", None, &[], Some(body.clone()))
            .await
            .0,
        401
    );
    assert_eq!(
        http.call(
            post.clone(),
            "/v1/recall",
            Some("hsk_nope"),
            &[],
            Some(body.clone())
        )
        .await
        .0,
        401
    );
    assert_eq!(
        http.call(post.clone(), "/mcp", None, &[], Some(json!({})))
            .await
            .0,
        401
    );
    let (status, err) = http
        .call(
            post.clone(),
            "/v1/recall",
            Some(&keys[0]),
            &[("x-hindsight-tenant", &tenants[1])],
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, 403, "{err}");
    let (status, err) = http
        .call(post.clone(), "/v1/turns", Some(&keys[0]),  &[], Some(json!({"tenant": tenants[1], "user_id": "ana", "session_id": "s", "content": "hi there, I moved to Oslo"})))
        .await;
    assert_eq!(status, 403, "{err}");
    let (status, err) = http
        .call(
            post.clone(),
            "/v1/recall",
            Some(&keys[0]),
            &[],
            Some(json!({"user_id": "ana", "query": "x", "tenant": tenants[1]})),
        )
        .await;
    assert_eq!(
        status, 400,
        "a tenant in the body is refused, not obeyed: {err}"
    );
    let other_memory: Uuid =
        sqlx::query_scalar("SELECT id FROM memories WHERE tenant = $1 LIMIT 1")
            .bind(&tenants[1])
            .fetch_one(&d.ctx.store.pool)
            .await
            .expect("a memory of tenant 1");
    let (status, _) = http
        .call(
            reqwest::Method::GET,
            &format!("/v1/memories/{other_memory}"),
            Some(&keys[0]),
            &[],
            None,
        )
        .await;
    assert_eq!(
        status, 404,
        "another tenant's memory does not exist for this key"
    );
    let (status, _) = http
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/memories/{other_memory}"),
            Some(&keys[0]),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 404);
    let status: String = sqlx::query_scalar("SELECT status FROM memories WHERE id = $1")
        .bind(other_memory)
        .fetch_one(&d.ctx.store.pool)
        .await
        .expect("status");
    assert_eq!(status, "active", "a foreign key cannot delete it");

    stack.stop().await;
    d.remove().await;
}
