//! The vector index behind one small trait, with exactly the implementations
//! hindsight ships: embedded Qdrant Edge ([`edge`]), the default, and a Qdrant
//! server through qdrant-client ([`server`]) when `QDRANT_URL` is set.
//!
//! The index is derived data: Postgres holds every memory with its embedding,
//! and `hindsight reindex` rebuilds the index from it. One collection per
//! embedding model; every search is filtered by tenant and user.

pub mod edge;
pub mod outage;
pub mod server;

use std::{path::Path, sync::Arc};

use async_trait::async_trait;
use hindsight_core::{
    Namespace,
    embedding::ModelId,
    fact::FactType,
    memory::{Kind, Status},
    settings::IndexConfig,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The payload every point carries: the filter keys of recall and dedupe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    pub tenant: String,
    pub user_id: String,
    #[serde(default)]
    pub session_id: Option<String>,
    pub kind: Kind,
    pub fact_type: FactType,
    pub status: Status,
    /// Unix seconds.
    pub created_at: i64,
    #[serde(default)]
    pub occurred_at: Option<i64>,
}

/// Keyword payload fields that get a payload index.
pub const KEYWORD_FIELDS: &[&str] = &[
    "tenant",
    "user_id",
    "session_id",
    "kind",
    "fact_type",
    "status",
];
/// Integer payload fields that get a payload index.
pub const INTEGER_FIELDS: &[&str] = &["created_at", "occurred_at"];

#[derive(Debug, Clone)]
pub struct Point {
    pub id: Uuid,
    pub vector: Vec<f32>,
    pub payload: Payload,
}

/// What a search may see. Tenant and user are mandatory: no search ever
/// crosses them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scope {
    pub tenant: String,
    pub user_id: String,
    /// Empty: any status.
    pub statuses: Vec<Status>,
    pub fact_types: Vec<FactType>,
    pub session_id: Option<String>,
    /// Unix seconds, inclusive.
    pub occurred_from: Option<i64>,
    pub occurred_to: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: Uuid,
    pub score: f32,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("vector index unavailable: {0}")]
    Unavailable(String),
    #[error("vector index: {0}")]
    Failed(String),
}

/// A collection's identity: one per embedding model (and namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Collection {
    pub name: String,
    pub dimension: usize,
}

impl Collection {
    pub fn for_model(ns: &Namespace, model: &ModelId) -> Self {
        Self {
            name: format!("{ns}-{}", model.slug()),
            dimension: model.dimension,
        }
    }
}

/// The index the settings name: a Qdrant server when `QDRANT_URL` is set,
/// else the embedded index under `data_dir/index` (`HINDSIGHT_DATA_DIR`), behind
/// the tests' outage switch when `HINDSIGHT_FAULT_INDEX_DOWN_FILE` is set (see [`outage`]).
pub fn open(settings: &IndexConfig, data_dir: &Path) -> Result<Arc<dyn VectorIndex>, IndexError> {
    let index: Arc<dyn VectorIndex> = match &settings.qdrant_url {
        Some(url) => Arc::new(server::ServerIndex::connect(
            url,
            settings.api_key.as_deref(),
        )?),
        None => Arc::new(edge::EdgeIndex::new(&data_dir.join("index"))),
    };
    Ok(match std::env::var_os(outage::ENV) {
        Some(file) if !file.is_empty() => {
            Arc::new(outage::Outage::while_file_exists(index, file.into()))
        }
        _ => index,
    })
}

#[async_trait]
pub trait VectorIndex: Send + Sync {
    /// Creates the collection (with payload indexes) if it does not exist.
    async fn ensure(&self, collection: &Collection) -> Result<(), IndexError>;
    async fn upsert(&self, collection: &Collection, points: Vec<Point>) -> Result<(), IndexError>;
    async fn delete(&self, collection: &Collection, ids: Vec<Uuid>) -> Result<(), IndexError>;
    async fn search(
        &self,
        collection: &Collection,
        vector: &[f32],
        scope: &Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError>;
    async fn count(
        &self,
        collection: &Collection,
        scope: Option<&Scope>,
    ) -> Result<u64, IndexError>;
    /// Removes every point of the collection (for a rebuild).
    async fn clear(&self, collection: &Collection) -> Result<(), IndexError>;
    /// Folds recent writes into indexed (HNSW) segments. A Qdrant server does
    /// this by itself; the embedded index needs to be asked.
    async fn optimize(&self, _collection: &Collection) -> Result<(), IndexError> {
        Ok(())
    }
}
