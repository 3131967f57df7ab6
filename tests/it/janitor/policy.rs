//! The policy's defaults, consolidation with the LLM, and expiry.

use super::*;

#[test]
fn the_policy_defaults_are_the_documented_ones() {
    let p = Policy::default();
    assert_eq!(p.decay_half_life, Duration::days(30));
    assert_eq!(p.archive_below, 0.2);
    assert_eq!(p.archive_idle, Duration::days(90));
    assert_eq!(p.retention, Duration::days(180));
    assert_eq!(p.deleted_retention, Duration::days(30));
    assert_eq!(p.quarantine_review, Duration::days(30));
    assert_eq!(p.turn_content_retention, Duration::days(30));
    assert_eq!(p.turn_retention, Duration::days(180));
}

#[tokio::test]
async fn consolidation_writes_with_the_llm_and_keeps_the_rules_when_it_fails() {
    use hindsight_tests::fake_llm::{FakeLlm, Reply};
    let llm = FakeLlm::start(|_, request| {
        if request.to_string().contains("Oslo") {
            // Control characters around the text: Postgres text cannot hold the NUL.
            Reply::Content(
                "\u{0}In May 2026 Li travelled to Oslo, met Erik there and left by train.\u{7}"
                    .into(),
            )
        } else {
            Reply::Status(500, None)
        }
    })
    .await;
    let base_url = llm.base_url();
    let d = Deployment::new("janitor-llm", |c| {
        c.llm.base_url = Some(base_url);
        c.llm.retry_budget = StdDuration::from_millis(300);
        c.llm.timeout = StdDuration::from_secs(2);
    })
    .await;
    let pool = d.ctx.store.pool.clone();
    let t = now();
    for (i, (text, place)) in [
        ("Li flew to Oslo", "Oslo"),
        ("Li met Erik in Oslo", "Oslo"),
        ("Li ate at a bakery in Bergen", "Bergen"),
        ("Li hiked above Bergen", "Bergen"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = Seed::aged("acme", "li", text, t, 200 + i as i64);
        e.kind = "episodic";
        e.fact_type = "event";
        e.entities = vec![place.into()];
        e.importance = 0.6;
        e.last_accessed_at = Some(t - Duration::days(3));
        e.embedding = basis(i);
        e.write(&pool).await;
    }
    let run = ran(&janitor(&d), request(false)).await;
    assert_eq!(run.counts.total.summaries, 2);
    assert_eq!(run.counts.llm_summaries, 1, "calls: {:?}", llm.requests());
    let summaries: Vec<String> = sqlx::query_scalar(
        "SELECT content FROM memories WHERE kind = 'semantic' AND status = 'active' ORDER BY content",
    )
    .fetch_all(&pool)
    .await
    .expect("summaries");
    assert_eq!(
        summaries,
        [
            "Bergen — 2 earlier episodes, 2026-05-17 to 2026-05-18: Li hiked above Bergen; Li ate at a bakery in Bergen.",
            "In May 2026 Li travelled to Oslo, met Erik there and left by train.",
        ]
    );
    d.remove().await;
}

#[tokio::test]
async fn an_expired_memory_is_archived_and_restorable() {
    let d = Deployment::new("test", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    let t = now();
    let mut over = Seed::aged("acme", "li", "Li is in Tokyo until Friday", t, 3);
    over.fact_type = "plan";
    over.importance = 0.9;
    over.expires_at = Some(t - Duration::days(1));
    let mut ahead = Seed::aged("acme", "li", "Li is in Lisbon until next month", t, 3);
    ahead.fact_type = "plan";
    ahead.importance = 0.9;
    ahead.embedding = basis(1);
    ahead.expires_at = Some(t + Duration::days(20));
    let (over, ahead) = (over.write(&pool).await, ahead.write(&pool).await);
    let status = |id: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT status FROM memories WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .expect("status")
        }
    };

    let j = janitor(&d);
    let dry = ran(&j, request(true)).await;
    assert_eq!(dry.counts.total.archived, 1, "the dry run counts it");
    assert_eq!(status(over).await, "active", "and changes nothing");
    let run = ran(&j, request(false)).await;
    assert_eq!(run.counts.total.archived, 1);
    assert_eq!(status(over).await, "archived");
    assert_eq!(status(ahead).await, "active");
    j.restore(run.id, false).await.expect("restored");
    assert_eq!(status(over).await, "active", "archiving is reversible");
    d.remove().await;
}
