//! The keyword channel when every query term is common: it scores at most
//! its candidate budget of memories, and those holding every query term are
//! among them.

use hindsight_core::memory::Status;
use hindsight_recall::sql::keyword::{self, KeywordQuery};
use hindsight_tests::Deployment;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_only_common_terms_the_memories_holding_all_of_them_still_come_first() {
    let d = Deployment::new("keyword", |_| {}).await;
    // 10,000 memories of one user. "spring" is in 3,000 and "marathon" in
    // 3,500 of them, together in 3,000 (over the budget); "plan" is in 7,050;
    // only memories 2950..3000 hold all three. Every memory has four terms
    // (an absent term's place takes a word of its own) so that length does
    // not rank. Inserted in order, so the first rows the two rarest terms
    // find hold only two of the three.
    const CANDIDATES: usize = 2_000;
    sqlx::query(
        "INSERT INTO memories (id, tenant, user_id, kind, fact_type, content, content_key, importance,
                               confidence, source_trust, status, embedding_model, embedding_version,
                               terms, index_state)
         SELECT gen_random_uuid(), 'acme', 'u1', 'semantic', 'fact', 'memory ' || i, 'memory ' || i,
                0.5, 0.9, 'high', 'active', 'test-model', '1',
                ARRAY[CASE WHEN i < 3000 THEN 'spring' ELSE 'a' || i END,
                      CASE WHEN i < 3500 THEN 'marathon' ELSE 'b' || i END,
                      CASE WHEN i >= 2950 THEN 'plan' ELSE 'c' || i END,
                      'n' || i],
                'indexed'
         FROM generate_series(0, 9999) AS i",
    )
    .execute(&d.ctx.store.pool)
    .await
    .expect("memories written");

    let statuses = [Status::Active];
    let hits = keyword::search(
        &d.ctx.store,
        &KeywordQuery {
            tenant: "acme",
            user_id: "u1",
            text: "spring marathon plans",
            statuses: &statuses,
            limit: 50,
            matching: Default::default(),
            candidates: CANDIDATES,
        },
    )
    .await
    .expect("keyword search")
    .hits;
    let ids: Vec<uuid::Uuid> = hits.iter().map(|h| h.id).collect();
    let mut contents: Vec<String> =
        sqlx::query_scalar("SELECT content FROM memories WHERE id = ANY($1)")
            .bind(&ids)
            .fetch_all(&d.ctx.store.pool)
            .await
            .expect("contents");
    contents.sort();
    let mut expected: Vec<String> = (2950..3000).map(|i| format!("memory {i}")).collect();
    expected.sort();
    assert_eq!(contents, expected, "the 50 memories holding every term");
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "best first"
    );
    d.remove().await;
}

/// BM25's statistics (`memory_terms`, `memory_users`) stay equal to a recount
/// over the memories through inserts, updates that keep, change or move the
/// terms, and deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn term_statistics_match_a_recount_after_every_kind_of_write() {
    let d = Deployment::new("keyword-stats", |_| {}).await;
    let pool = &d.ctx.store.pool;
    let writes = [
        "INSERT INTO memories (id, tenant, user_id, kind, fact_type, content, content_key, importance,
                               confidence, source_trust, status, embedding_model, embedding_version,
                               terms, index_state)
         SELECT gen_random_uuid(), 'acme', 'u' || (i % 3), 'semantic', 'fact', 'memory ' || i,
                'memory ' || i, 0.5, 0.9, 'high', 'active', 'test-model', '1',
                ARRAY['common', 'w' || (i % 7), 'n' || i], 'indexed'
         FROM generate_series(0, 299) AS i",
        // The same terms: nothing to count.
        "UPDATE memories SET terms = terms, updated_at = now() WHERE content LIKE 'memory 1%'",
        // Some terms lost, some gained, some kept.
        "UPDATE memories SET terms = ARRAY['common', 'gained', 'n' || split_part(content, ' ', 2)]
          WHERE content LIKE 'memory 2%'",
        // Fewer terms, then none.
        "UPDATE memories SET terms = ARRAY['common'] WHERE content LIKE 'memory 3%'",
        "UPDATE memories SET terms = '{}' WHERE content LIKE 'memory 4%'",
        // Moved to another user.
        "UPDATE memories SET user_id = 'u9' WHERE content LIKE 'memory 5%'",
        "DELETE FROM memories WHERE content LIKE 'memory 6%'",
    ];
    for sql in writes {
        sqlx::query(sql).execute(pool).await.expect(sql);
        let kept: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT tenant, user_id, term, df FROM memory_terms WHERE df <> 0 ORDER BY 1, 2, 3",
        )
        .fetch_all(pool)
        .await
        .expect("memory_terms");
        let counted: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT tenant, user_id, t, count(*) FROM memories, unnest(terms) AS t
              GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        )
        .fetch_all(pool)
        .await
        .expect("recount of terms");
        assert_eq!(kept, counted, "document frequencies after {sql}");
        let users: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT tenant, user_id, memories, total_terms FROM memory_users
              WHERE memories <> 0 ORDER BY 1, 2",
        )
        .fetch_all(pool)
        .await
        .expect("memory_users");
        let recount: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT tenant, user_id, count(*), sum(cardinality(terms))::bigint FROM memories
              GROUP BY 1, 2 ORDER BY 1, 2",
        )
        .fetch_all(pool)
        .await
        .expect("recount of users");
        assert_eq!(users, recount, "per-user totals after {sql}");
    }
    d.remove().await;
}
