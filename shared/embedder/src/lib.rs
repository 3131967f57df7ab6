//! Embedders behind one small trait, with exactly the implementations hindsight
//! ships: a local BERT-family sentence model run in-process ([`local`]), and
//! any OpenAI-compatible embeddings endpoint ([`remote`]).
//!
//! Every vector carries the identity of the model that made it
//! ([`ModelId`]); vectors are only ever compared within one model.

pub mod bert;
pub mod cache;
pub mod card;
pub mod dense;
pub mod e5;
pub mod local;
pub mod recent;
pub mod remote;
pub mod threads;

use std::{path::Path, sync::Arc};

use async_trait::async_trait;
pub use hindsight_core::embedding::{Languages, ModelId, cosine};
use hindsight_core::settings::EmbedConfig;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot load the embedding model from {dir}: {reason}")]
    Load { dir: String, reason: String },
    #[error("embedding failed: {0}")]
    Compute(String),
    /// The endpoint failed in a way worth retrying (timeout, 429, 5xx).
    #[error("embeddings endpoint unavailable: {0}")]
    Unavailable(String),
    #[error("embeddings endpoint refused the request: {0}")]
    Refused(String),
    #[error("cannot build the HTTP client for the embeddings endpoint: {0}")]
    Client(String),
}

impl EmbedError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, EmbedError::Unavailable(_) | EmbedError::Compute(_))
    }
}

#[async_trait]
pub trait Embedder: Send + Sync {
    fn model(&self) -> &ModelId;

    /// The languages the model reads, as its card or the configuration
    /// declares them: its cosine is evidence only for texts in these.
    fn languages(&self) -> &Languages;

    /// One L2-normalised vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The embedder the configuration names: the endpoint if set, else the local
/// model. Declared languages (`HINDSIGHT_EMBED_LANGUAGES`) replace the
/// model card's; an endpoint without them is trusted for no text.
pub fn from_config(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    let declared = config.languages.clone();
    Ok(match &config.base_url {
        Some(url) => Arc::new(
            remote::RemoteEmbedder::new(
                url,
                config.api_key.as_deref(),
                &config.model,
                config.dimension,
            )?
            .declaring(declared.unwrap_or_default()),
        ),
        None => {
            let local = local::LocalEmbedder::load(&config.model_dir)?;
            Arc::new(match declared {
                Some(languages) => local.declaring(languages),
                None => local,
            })
        }
    })
}

/// Vectors of `texts`, in their order, embedded 16 at a time in order of
/// length: the model pads a batch to its longest text, and the examples run
/// from a few words to whole records.
pub async fn embed_all(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut vectors = vec![Vec::new(); texts.len()];
    for chunk in order.chunks(16) {
        let batch: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
        let embedded = embedder.embed(&batch).await?;
        if embedded.len() != chunk.len() {
            return Err(EmbedError::Compute(format!(
                "the embedder returned {} vectors for {} texts",
                embedded.len(),
                chunk.len()
            )));
        }
        for (&i, v) in chunk.iter().zip(embedded) {
            vectors[i] = v;
        }
    }
    Ok(vectors)
}

/// [`embed_all`], read from `cache_dir` when an earlier start kept the same
/// texts' vectors from the same model there ([`cache`]), else embedded and
/// kept (`kind` names the set in the file's name).
pub async fn embed_kept(
    embedder: &dyn Embedder,
    cache_dir: &Path,
    kind: &str,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let model = embedder.model();
    let file = cache::path(cache_dir, kind, model, texts);
    if let Some(vectors) = cache::read(&file, texts.len(), model.dimension) {
        tracing::debug!(file = %file.display(), "vectors as kept");
        return Ok(vectors);
    }
    let started = std::time::Instant::now();
    let vectors = embed_all(embedder, texts).await?;
    tracing::info!(
        kind,
        texts = texts.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "embedded and kept"
    );
    if let Err(e) = cache::write(&file, &vectors) {
        tracing::warn!(file = %file.display(), error = %e, "cannot keep the vectors: they will be embedded again at the next start");
    }
    Ok(vectors)
}
