//! The persist stage: the last stop of a fact.
//!
//! Within its (tenant, user) and embedding model, a fact merges into a memory
//! it says again (cosine ≥ `HINDSIGHT_DEDUPE_THRESHOLD`, or the same words),
//! supersedes a memory it contradicts, or becomes a new memory. Dedupe-then-
//! write runs under a per-user advisory lock, so replicas never both insert a
//! near-duplicate. Postgres is written first, in one transaction (memory,
//! provenance, audit); then the index. If the index is down the rows stay
//! `pending` and the [reconciler](reconcile) indexes them when it returns.

pub mod dedupe;
pub mod reconcile;
mod stage;

use std::{sync::Arc, time::Duration};

use hindsight_index::VectorIndex;
use hindsight_shared::service::{self, Context, StageTask};

pub use stage::PersistStage;

/// How often the reconciler looks for memories the index has not taken yet.
const RECONCILE_EVERY: Duration = Duration::from_secs(2);

/// Persist's tasks, in its own process and in `hindsight up` alike: the stage
/// and the reconciler, both writing `index`.
pub fn tasks(ctx: &Context, index: Arc<dyn VectorIndex>) -> Vec<StageTask> {
    let (store, ns) = (ctx.store.clone(), ctx.config.namespace.clone());
    let stage = PersistStage::new(
        store.clone(),
        index.clone(),
        ns.clone(),
        ctx.config.dedupe_threshold,
    );
    vec![
        service::stage(Arc::new(stage)),
        service::background("reconciler", move |shutdown| {
            reconcile::run(store, index, ns, RECONCILE_EVERY, shutdown)
        }),
    ]
}
