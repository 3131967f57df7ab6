//! Keeping the index in step with Postgres: index what was just written,
//! catch up on what stayed `pending` while the index was down, and rebuild it
//! from scratch (`hindsight reindex`) without re-embedding anything.

use std::{collections::HashMap, time::Duration};

use hindsight_core::{Namespace, embedding::ModelId, memory::Status};
use hindsight_index::{Collection, IndexError, Payload, Point, VectorIndex};
use hindsight_store::{Store, StoreError, memories::Indexable, row::IndexPoint};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn collection_of(ns: &Namespace, m: &Indexable) -> Collection {
    Collection::for_model(
        ns,
        &ModelId {
            name: m.embedding_model.clone(),
            version: m.embedding_version.clone(),
            dimension: m.embedding.len(),
        },
    )
}

/// The collection of a model as Postgres stores it (name, version, dimension).
fn collection_named(ns: &Namespace, name: String, version: String, dimension: i32) -> Collection {
    Collection::for_model(
        ns,
        &ModelId {
            name,
            version,
            dimension: dimension.max(0) as usize,
        },
    )
}

fn point(m: &Indexable) -> Point {
    Point {
        id: m.id,
        vector: m.embedding.clone(),
        payload: Payload {
            tenant: m.tenant.clone(),
            user_id: m.user_id.clone(),
            session_id: m.session_id.clone(),
            kind: m.kind,
            fact_type: m.fact_type,
            status: m.status,
            created_at: m.created_at.timestamp(),
            occurred_at: m.occurred_at.map(|t| t.timestamp()),
        },
    }
}

/// Writes these memories' current state to the index, then marks them indexed
/// (archived and deleted memories are removed from it instead).
async fn apply(
    store: &Store,
    index: &dyn VectorIndex,
    collection: &Collection,
    rows: Vec<Indexable>,
) -> Result<usize, ReconcileError> {
    if rows.is_empty() {
        return Ok(0);
    }
    index.ensure(collection).await?;
    let (keep, remove): (Vec<Indexable>, Vec<Indexable>) = rows
        .into_iter()
        .partition(|m| Status::INDEXED.contains(&m.status));
    index
        .upsert(collection, keep.iter().map(point).collect())
        .await?;
    index
        .delete(collection, remove.iter().map(|m| m.id).collect())
        .await?;
    store
        .mark_index_state(
            &keep
                .iter()
                .map(|m| (m.id, m.updated_at))
                .collect::<Vec<_>>(),
            "indexed",
        )
        .await?;
    store
        .mark_index_state(
            &remove
                .iter()
                .map(|m| (m.id, m.updated_at))
                .collect::<Vec<_>>(),
            "removed",
        )
        .await?;
    Ok(keep.len() + remove.len())
}

/// Indexes the given memories (of one collection) right after they were written.
pub async fn index_ids(
    store: &Store,
    index: &dyn VectorIndex,
    collection: &Collection,
    ids: &[Uuid],
) -> Result<usize, ReconcileError> {
    if ids.is_empty() {
        return Ok(0);
    }
    let rows = store.indexable(ids).await?;
    apply(store, index, collection, rows).await
}

/// Indexes up to `limit` memories left pending; returns how many.
pub async fn catch_up(
    store: &Store,
    index: &dyn VectorIndex,
    ns: &Namespace,
    limit: i64,
) -> Result<usize, ReconcileError> {
    // Rows changed in the last second are left to the writer that is indexing them.
    let rows = store.pending_index(limit, 1000).await?;
    let mut by_collection: HashMap<Collection, Vec<Indexable>> = HashMap::new();
    for row in rows {
        by_collection
            .entry(collection_of(ns, &row))
            .or_default()
            .push(row);
    }
    let mut done = 0;
    for (collection, rows) in by_collection {
        done += apply(store, index, &collection, rows).await?;
    }
    Ok(done)
}

/// Removes up to `limit` points that erases of users are waiting for, and
/// counts them to their erase; returns how many. An erase's database pass
/// writes them down (`erasure_points`); the reconciler owns the index.
pub async fn remove_erased(
    store: &Store,
    index: &dyn VectorIndex,
    ns: &Namespace,
    limit: i64,
) -> Result<usize, ReconcileError> {
    let points = store.pending_points(limit).await?;
    delete_points(index, ns, points.iter().map(|p| &p.at)).await?;
    store.points_removed(&points).await?;
    Ok(points.len())
}

/// Removes the points of memories the janitor purged while they were still
/// in the index (superseded ones); returns how many.
pub async fn remove_purged(
    store: &Store,
    index: &dyn VectorIndex,
    ns: &Namespace,
    limit: i64,
) -> Result<usize, ReconcileError> {
    let points = store.purged_points(limit).await?;
    delete_points(index, ns, points.iter().map(|p| &p.at)).await?;
    store.purged_points_removed(&points).await?;
    Ok(points.len())
}

/// Deletes points from their models' collections.
async fn delete_points<'a>(
    index: &dyn VectorIndex,
    ns: &Namespace,
    points: impl Iterator<Item = &'a IndexPoint>,
) -> Result<(), ReconcileError> {
    let mut by_collection: HashMap<Collection, Vec<Uuid>> = HashMap::new();
    for p in points {
        by_collection
            .entry(collection_named(
                ns,
                p.embedding_model.clone(),
                p.embedding_version.clone(),
                p.dimension,
            ))
            .or_default()
            .push(p.point);
    }
    for (collection, ids) in by_collection {
        index.ensure(&collection).await?;
        index.delete(&collection, ids).await?;
    }
    Ok(())
}

/// Runs [`catch_up`] every `every` until `shutdown` fires, removes the points
/// of erased users ([`remove_erased`]) and of purged memories
/// ([`remove_purged`]), rewrites the search terms of memories an older version
/// wrote ([`Store::upgrade_terms`]), and keeps the planner's statistics fresh
/// where autovacuum is off ([`Store::refresh_statistics`]).
pub async fn run(
    store: Store,
    index: std::sync::Arc<dyn VectorIndex>,
    ns: Namespace,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut last_optimize = tokio::time::Instant::now();
    loop {
        while let Some(n) = progress(
            catch_up(&store, index.as_ref(), &ns, 500).await,
            "index still unavailable",
        ) {
            tracing::info!(memories = n, "reconciler indexed pending memories");
        }
        // Points of erased users go after the catch-up, so that a point the
        // catch-up wrote from a row read just before the erase is removed too.
        while let Some(n) = progress(
            remove_erased(&store, index.as_ref(), &ns, 1_000).await,
            "cannot remove erased points yet",
        ) {
            tracing::info!(points = n, "removed erased users' points");
        }
        while let Some(n) = progress(
            remove_purged(&store, index.as_ref(), &ns, 1_000).await,
            "cannot remove purged points yet",
        ) {
            tracing::info!(points = n, "removed purged memories' points");
        }
        // Search terms written by an older version of hindsight are rewritten
        // here, once, after an upgrade (the keyword channel finds those rows
        // by their words only until then).
        loop {
            match store.upgrade_terms(1_000).await {
                Ok(n) if n > 0 => tracing::info!(memories = n, "rewrote search terms"),
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "could not rewrite search terms; trying again later");
                    break;
                }
            }
            if shutdown.is_cancelled() {
                return;
            }
        }
        // The planner's statistics, when the server's autovacuum leaves them
        // stale: dedupe's plans depend on them (see hindsight_store::planner).
        match store.refresh_statistics().await {
            Ok(tables) if !tables.is_empty() => {
                tracing::debug!(?tables, "analyzed tables autovacuum left stale")
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "could not refresh the planner's statistics"),
        }
        // Every few minutes, fold new points (the writers' and ours) into
        // indexed segments; an unchanged collection costs next to nothing.
        if last_optimize.elapsed() >= OPTIMIZE_EVERY {
            last_optimize = tokio::time::Instant::now();
            optimize_all(&store, index.as_ref(), &ns).await;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// How many a pass removed, or `None` when it removed none or failed (the
/// index may still be unavailable: the next loop tries again).
fn progress(pass: Result<usize, ReconcileError>, failed: &str) -> Option<usize> {
    match pass {
        Ok(n) if n > 0 => Some(n),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "reconciler: {failed}");
            None
        }
    }
}

/// How often the reconciler folds new points into indexed segments.
pub const OPTIMIZE_EVERY: Duration = Duration::from_secs(300);

/// Optimizes every model's collection; failures are logged (the index is derived data).
pub async fn optimize_all(store: &Store, index: &dyn VectorIndex, ns: &Namespace) {
    let models = match store.embedding_models().await {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(error = %e, "cannot list embedding models to optimize");
            return;
        }
    };
    for (name, version, dimension) in models {
        let collection = collection_named(ns, name, version, dimension);
        let started = std::time::Instant::now();
        match index.optimize(&collection).await {
            Ok(()) => {
                tracing::debug!(collection = %collection.name, ms = started.elapsed().as_millis() as u64, "index optimized")
            }
            Err(e) => {
                tracing::warn!(collection = %collection.name, error = %e, "index optimize failed")
            }
        }
    }
}

/// Rebuilds the index from Postgres: clears each model's collection and writes
/// every memory that belongs in it, with its stored embedding. Returns how many.
pub async fn reindex(
    store: &Store,
    index: &dyn VectorIndex,
    ns: &Namespace,
) -> Result<usize, ReconcileError> {
    for (name, version, dimension) in store.embedding_models().await? {
        let collection = collection_named(ns, name, version, dimension);
        index.ensure(&collection).await?;
        index.clear(&collection).await?;
    }
    let mut after = None;
    let mut total = 0;
    loop {
        let page = store.indexable_page(after, 500).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        let mut by_collection: HashMap<Collection, Vec<Indexable>> = HashMap::new();
        for row in page {
            by_collection
                .entry(collection_of(ns, &row))
                .or_default()
                .push(row);
        }
        for (collection, rows) in by_collection {
            total += apply(store, index, &collection, rows).await?;
        }
    }
    Ok(total)
}
