//! Configuration: one struct, read from environment variables with documented
//! defaults. [`SETTINGS`] is the single source for the defaults, the parser and
//! the reference printed by `hindsight config` (and copied into docs/configuration.md), so
//! the three cannot drift apart.

mod parse;
mod print;
mod read;
mod settings;
#[cfg(test)]
mod tests;

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use hindsight_core::{
    namespace::Namespace,
    settings::{EmbedConfig, IndexConfig},
    signal::Fusion,
    zone::Zones,
};
use hindsight_text::terms::Matching;

pub use print::mask_url;
pub use settings::{SETTINGS, Setting, default_of, reference_markdown};

#[derive(Debug, thiserror::Error)]
#[error("{env}={value:?}: {reason}")]
pub struct ConfigError {
    pub env: &'static str,
    pub value: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The whole configuration of a hindsight process.
#[derive(Clone)]
pub struct Config {
    pub namespace: Namespace,
    pub nats_url: String,
    pub database_url: String,
    pub db_pool: u32,
    pub http_addr: SocketAddr,
    pub data_dir: PathBuf,
    pub batch_size: usize,
    pub linger: Duration,
    pub ack_wait: Option<Duration>,
    pub max_deliver: Option<i64>,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub llm: LlmConfig,
    pub embed: EmbedConfig,
    pub index: IndexConfig,
    pub dedupe_threshold: f32,
    pub screen_threshold: f64,
    pub screen_nearness: bool,
    pub screen_learnt: bool,
    /// `HINDSIGHT_SCREEN_ENCODER`: whether the extract stage asks the encoder model.
    pub screen_encoder: bool,
    /// `HINDSIGHT_SCREEN_MODEL_DIR`: multilingual-e5-small for the encoder model.
    pub screen_model_dir: PathBuf,
    pub fact_context: bool,
    /// `HINDSIGHT_TIME_ZONE` and `HINDSIGHT_TENANT_TIME_ZONES`.
    pub time_zones: Zones,
    pub recall: RecallConfig,
    pub mcp_allowed_hosts: Vec<String>,
    /// `HINDSIGHT_OPERATOR_KEY`; `None` when unset or empty.
    pub operator_key: Option<String>,
    pub ops_poll: Duration,
    pub janitor: JanitorConfig,
    pub log: String,
    pub log_format: LogFormat,
}

/// Recall's fusion, score weights and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallConfig {
    /// relevance, recency, importance, access.
    pub weights: [f64; 4],
    pub fusion: Fusion,
    /// dense, keyword, filter, entity ([`Signal::WEIGHTED`] order).
    pub signal_weights: [f64; 4],
    pub time_boost: f64,
    pub second_hop: f64,
    pub matching: Matching,
    pub half_life: Duration,
    pub max_tokens: usize,
    pub index_timeout: Duration,
    /// How many recent queries' vectors recall keeps (0: none).
    pub query_cache: usize,
    /// How many memories the keyword channel scores at most per recall.
    pub keyword_candidates: usize,
}

/// The janitor's schedule and the settings of its policy that deployments tune.
#[derive(Clone, Debug)]
pub struct JanitorConfig {
    /// Cron expression with seconds (`sec min hour day month weekday`), UTC.
    pub cron: String,
    pub decay_half_life: Duration,
    pub retention: Duration,
    pub deleted_retention: Duration,
    pub quarantine_review: Duration,
    pub turn_content_retention: Duration,
    pub turn_retention: Duration,
    pub decay_after: Duration,
    pub archive_below: f32,
    pub archive_idle: Duration,
    pub consolidate_age: Duration,
    pub consolidate_max_accesses: i32,
    pub merge_cosine: f32,
    pub safety_floor: f32,
}

/// The LLM endpoint used for extraction; `base_url = None` means the offline rules.
#[derive(Clone)]
pub struct LlmConfig {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: String,
    pub timeout: Duration,
    pub retry_budget: Duration,
    pub fallback_after: u64,
    pub concurrency: usize,
}
