//! The persist stage: the last stop of a fact.
//!
//! Within its (tenant, user) and embedding model, a fact merges into a memory
//! it says again (cosine ≥ `HINDSIGHT_DEDUPE_THRESHOLD`, or the same words),
//! supersedes a memory it contradicts, or becomes a new memory. Dedupe-then-
//! write runs under a per-user advisory lock, so replicas never both insert a
//! near-duplicate. Postgres is written first, in one transaction (memory,
//! provenance, audit); then the index. If the index is down the rows stay
//! `pending` and the [reconciler](reconcile) indexes them when it returns.

pub use hindsight_shared::dedupe;
pub mod reconcile;
mod stage;

pub use stage::PersistStage;
