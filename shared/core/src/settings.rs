//! The settings of the adapter crates, as plain data. The runtime's `Config`
//! reads them from the environment (with its defaults and its reference);
//! they are defined here so that the embedder and the index link this crate
//! and nothing of the runtime.

use std::{path::PathBuf, time::Duration};

/// The embedder: the local model unless `base_url` is set.
#[derive(Clone)]
pub struct EmbedConfig {
    pub model_dir: PathBuf,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: String,
    /// The languages the model reads, in place of what its card declares.
    pub languages: Option<crate::embedding::Languages>,
    pub dimension: usize,
    pub batch: usize,
    pub window: usize,
    /// Micro-batches the embed stage embeds at once.
    pub parallel: usize,
    pub linger: Duration,
    /// Where vectors that can be made again are kept between starts (the
    /// screen's examples, per model and corpus).
    pub cache_dir: PathBuf,
}

/// The vector index: embedded (under the data directory) unless `qdrant_url` is set.
#[derive(Clone)]
pub struct IndexConfig {
    pub qdrant_url: Option<String>,
    pub api_key: Option<String>,
}

impl IndexConfig {
    /// Whether processes can share the index: a Qdrant server can, while an
    /// embedded index belongs to the one process that opened its directory
    /// (persist's), so a gateway elsewhere recalls without it.
    pub fn is_shared(&self) -> bool {
        self.qdrant_url.is_some()
    }
}
