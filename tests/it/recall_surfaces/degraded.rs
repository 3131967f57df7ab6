//! Recall with the index down (keywords only, and it says so), and MCP over
//! HTTP acting for its key's tenant.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_index_down_recall_answers_from_keywords_and_says_so() {
    let d = Deployment::new("test", |_| {}).await;
    let switchable = Arc::new(Outage::switchable(
        hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index"),
    ));
    let stack = Stack::start(&d, switchable.clone()).await;
    for (id, content) in [
        ("z1", "我住在北京朝阳区，每天骑自行车上班。"),
        ("e1", "I live in Lisbon and cycle to work every day."),
    ] {
        publish(&d, "acme", "wang", id, content).await;
    }
    drained(&d, 2).await;

    let ask = |query: &'static str| {
        let (client, ns) = (d.ctx.bus.client.clone(), d.config().namespace.clone());
        async move {
            let mut req = RecallRequest::new("wang", query);
            req.explain = true;
            remote::request(&client, &ns, "acme", &req, Duration::from_secs(10))
                .await
                .expect("the gateway answers")
                .expect("recall answers")
        }
    };
    let healthy = ask("谁住在朝阳区？").await;
    assert!(!healthy.degraded);
    assert!(
        healthy
            .memories
            .first()
            .is_some_and(|m| m.content.contains("朝阳区")),
        "{healthy:?}"
    );

    switchable.set_up(false);
    let answer = ask("谁住在朝阳区？").await;
    assert!(answer.degraded, "says it is degraded");
    let reason = answer.degraded_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("index unavailable") && reason.contains("keyword"),
        "{reason}"
    );
    let top = answer.memories.first().expect("still answers");
    assert!(
        top.content.contains("朝阳区"),
        "the Chinese memory, by the keyword channel alone: {answer:?}"
    );
    let explained = answer.explain.expect("explain");
    let why = explained
        .iter()
        .find(|c| c.id == top.id)
        .expect("explained");
    assert!(
        why.ranks.contains_key("keyword") && !why.ranks.contains_key("dense"),
        "{why:?}"
    );
    let english = ask("Where does the user cycle to work?").await;
    assert!(english.degraded);
    assert!(
        english
            .memories
            .iter()
            .any(|m| m.content.contains("Lisbon")),
        "{english:?}"
    );

    switchable.set_up(true);
    assert!(!ask("谁住在朝阳区？").await.degraded);

    // Invalid requests say what to change.
    let bad = remote::request(
        &d.ctx.bus.client,
        &d.config().namespace,
        "acme",
        &RecallRequest {
            top_k: Some(500),
            include: vec![Include::Archived],
            ..RecallRequest::new("wang", "x")
        },
        Duration::from_secs(10),
    )
    .await
    .expect("answered");
    match bad {
        Err(ApiError::BadRequest(m)) => {
            assert!(m.contains("top_k must be between 1 and 50"), "{m}")
        }
        other => panic!("expected a bad request, got {other:?}"),
    }
    stack.stop().await;
    // The index flushes on drop: before its directory goes.
    drop(switchable);
    d.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_acts_for_the_keys_tenant() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let key = d.ctx.store.create_tenant_key("acme").await.expect("key");
    let other = d.ctx.store.create_tenant_key("globex").await.expect("key");
    publish(
        &d,
        "acme",
        "li",
        "v1",
        "I am vegetarian and I live in Oslo.",
    )
    .await;
    drained(&d, 1).await;

    let client = hindsight_tests::http();
    let search = |key: &str| {
        let (client, base_url, key) = (client.clone(), stack.base_url.clone(), key.to_string());
        async move {
            let mut mcp = McpSession::open(&client, &base_url, &key).await;
            let (status, answer) = mcp
                .call(
                    "memory_search",
                    json!({"user_id": "li", "query": "what does the user eat?"}),
                )
                .await;
            mcp.close().await;
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };
    let own = search(&key).await;
    assert!(own.to_string().contains("vegetarian"), "{own}");
    let foreign = search(&other).await;
    assert!(
        !foreign.to_string().contains("vegetarian"),
        "another tenant's key sees nothing: {foreign}"
    );

    stack.stop().await;
    d.remove().await;
}
