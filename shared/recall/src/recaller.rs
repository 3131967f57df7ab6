//! The recaller: what recall reads (the store, the index, the embedder,
//! working memory) and how it is set. [`engine`](crate::engine) answers with
//! it, [`channels`](crate::channels) are its reads.

use std::sync::Arc;

use hindsight_core::Namespace;
use hindsight_embedder::{Embedder, recent::Recent};
use hindsight_index::VectorIndex;
use hindsight_shared::config::RecallConfig;
use hindsight_store::{Store, StoreError};

use crate::{rank::fusion::Weights, request::RequestError, working::WorkingMemory};

/// How many candidates each channel proposes.
pub const CHANNEL_DEPTH: usize = 50;
/// How many of the first round's best memories seed the second hop.
pub const SECOND_HOP_SEEDS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("recall could not read memories: {0}")]
    Store(#[from] StoreError),
}

/// Answers recall requests. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Recaller {
    pub(crate) store: Store,
    pub(crate) index: Option<Arc<dyn VectorIndex>>,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) namespace: Namespace,
    pub(crate) config: RecallConfig,
    pub(crate) working: Option<WorkingMemory>,
    pub(crate) record_access: bool,
    pub(crate) spread_sources: bool,
}

impl Recaller {
    /// A recaller with every channel. Without an index or an embedder, the
    /// dense channel is off and every answer says it is degraded.
    pub fn new(
        store: Store,
        index: Option<Arc<dyn VectorIndex>>,
        embedder: Option<Arc<dyn Embedder>>,
        namespace: Namespace,
        config: &RecallConfig,
    ) -> Self {
        Self {
            store,
            index,
            // Agents ask the same things again; a query's embedding is most
            // of a recall's time.
            embedder: embedder.map(|e| Recent::wrap(e, config.query_cache)),
            namespace,
            config: config.clone(),
            working: None,
            record_access: true,
            spread_sources: true,
        }
    }

    pub fn with_working_memory(mut self, working: WorkingMemory) -> Self {
        self.working = Some(working);
        self
    }

    /// Whether answers count as accesses (an evaluation turns this off so
    /// that its own questions do not change the scores).
    pub fn recording_access(mut self, on: bool) -> Self {
        self.record_access = on;
        self
    }

    /// Whether memories that add no new source turn move after those that do
    /// ([`diversity::spread_sources`]); on by default.
    pub fn spreading_sources(mut self, on: bool) -> Self {
        self.spread_sources = on;
        self
    }

    /// Other fusion settings and weights (for evaluations that compare settings).
    pub fn with_config(mut self, config: RecallConfig) -> Self {
        self.config = config;
        self
    }

    pub fn config(&self) -> &RecallConfig {
        &self.config
    }

    pub fn weights(&self) -> Weights {
        let [relevance, recency, importance, access] = self.config.weights;
        Weights {
            relevance,
            recency,
            importance,
            access,
            half_life_hours: self.config.half_life.as_secs_f64() / 3600.0,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    pub fn working(&self) -> Option<&WorkingMemory> {
        self.working.as_ref()
    }
}
