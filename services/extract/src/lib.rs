//! The extract stage: typed, atomic facts from kept turns.
//!
//! Two extractors: an LLM over any OpenAI-compatible endpoint when one is
//! configured ([`llm`]), and offline rules ([`rules`]) by default and as the
//! fallback when the LLM stays unavailable.

pub mod draft;
pub mod llm;
pub mod rules;
pub mod screen;
mod stage;

use std::sync::Arc;

use hindsight_shared::{
    config::Config,
    service::{self, Context, StageTask},
};
use hindsight_store::Store;

pub use stage::ExtractStage;

/// Why the stage cannot be built as configured.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Llm(#[from] llm::BuildError),
    #[error("{0}")]
    Encoder(String),
}

/// The extractor's tasks, in its own process and in `hindsight up` alike.
pub fn tasks(ctx: &Context) -> Result<Vec<StageTask>, BuildError> {
    let stage = from_config(&ctx.config, ctx.store.clone())?;
    Ok(vec![service::stage(Arc::new(stage))])
}

/// The stage as configured: the LLM when `HINDSIGHT_LLM_BASE_URL` is set,
/// else the rules; and the screen's encoder model unless
/// `HINDSIGHT_SCREEN_ENCODER=off` (it needs the learnt model to combine with).
pub fn from_config(config: &Config, store: Store) -> Result<ExtractStage, BuildError> {
    let llm = llm::LlmExtractor::from_config(&config.llm)?;
    match &llm {
        Some(l) => tracing::info!(
            model = l.model(),
            "extracting with the LLM; the rules take over after {} deliveries of an outage",
            config.llm.fallback_after
        ),
        None => tracing::info!("extracting with the offline rules (no HINDSIGHT_LLM_BASE_URL)"),
    }
    let encoder = screen::Encoder::from_config(config).map_err(BuildError::Encoder)?;
    Ok(ExtractStage::new(store, llm, config.llm.fallback_after)
        .keeping_context(config.fact_context)
        .asking_encoder(encoder))
}
