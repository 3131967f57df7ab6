//! A superseded memory is still in the index when its retention ends: the
//! purge leaves its point to the reconciler, which removes it.

use hindsight_core::embedding::ModelId;
use hindsight_index::{Collection, VectorIndex};

use super::*;

async fn points(d: &Deployment, index: &dyn VectorIndex) -> u64 {
    let model = ModelId {
        name: "test-model".into(),
        version: "1".into(),
        dimension: 8,
    };
    let collection = Collection::for_model(&d.config().namespace, &model);
    index.ensure(&collection).await.expect("collection");
    index.count(&collection, None).await.expect("count")
}

#[tokio::test]
async fn a_purged_superseded_memory_leaves_the_index_through_the_reconciler() {
    let d = Deployment::new("janitor-points", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let ns = d.config().namespace.clone();
    let mut old = Seed::aged("acme", "li", "Li lived in Bergen", now(), 400);
    old.status = "superseded";
    old.status_at = Some(now() - Duration::days(200));
    let id = old.write(&pool).await;
    sqlx::query("UPDATE memories SET index_state = 'pending' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .expect("pending");
    let indexed =
        hindsight_persist::reconcile::catch_up(&d.ctx.store, index.as_ref(), &ns, 100).await;
    assert_eq!(indexed.expect("indexed"), 1);
    assert_eq!(
        points(&d, index.as_ref()).await,
        1,
        "superseded memories are indexed"
    );

    let run = ran(&janitor(&d), request(false)).await;
    assert_eq!(run.counts.total.purged_superseded, 1, "{:?}", run.counts);
    assert_eq!(seed::memory(&pool, id).await, None);
    let removed =
        hindsight_persist::reconcile::remove_purged(&d.ctx.store, index.as_ref(), &ns, 100).await;
    assert_eq!(removed.expect("removed"), 1);
    assert_eq!(points(&d, index.as_ref()).await, 0, "its point is gone");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM purged_points")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
    // The index writes its segments out when dropped: before its directory goes.
    drop(index);
    d.remove().await;
}
