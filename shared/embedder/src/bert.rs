//! The BERT encoder that sentence models such as all-MiniLM-L6-v2 are made of, written on
//! candle-nn's layers: embeddings, then self-attention and feed-forward blocks, each closed by
//! a residual connection and layer normalisation. Only what an encoder-only sentence model
//! needs (absolute positions, the exact GELU); `config.json` names anything else, and loading
//! refuses it rather than computing something else.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

use crate::dense::Dense;

/// The fields of a Hugging Face `config.json` the encoder reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".into()
}

impl Config {
    /// What this encoder cannot compute as the model was trained, if anything.
    pub fn unsupported(&self) -> Option<String> {
        if self.hidden_act != "gelu" {
            return Some(format!("hidden_act {:?} (only \"gelu\")", self.hidden_act));
        }
        if self.position_embedding_type != "absolute" {
            return Some(format!(
                "position_embedding_type {:?} (only \"absolute\")",
                self.position_embedding_type
            ));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Some(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        None
    }
}

/// The word embeddings: a table of f32 rows, or rows kept as 4-bit blocks
/// ([`Q4Rows`]) where the vocabulary is large (multilingual-e5's 250,037
/// words are 384 MB as f32, 54 MB as blocks).
enum Words {
    Table(Embedding),
    Quantised(Q4Rows),
}

impl Words {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Words::Table(table) => table.forward(ids),
            Words::Quantised(rows) => rows.forward(ids),
        }
    }
}

/// Rows of weights in 4-bit blocks (ggml's Q4_0: per 32 weights an f16 scale
/// and 16 bytes, weight j in the low nibble of byte j and weight j + 16 in
/// its high nibble, each `(nibble − 8) × scale`).
pub struct Q4Rows {
    blocks: Vec<u8>,
    width: usize,
}

/// The bytes of one Q4_0 block of 32 weights.
pub const Q4_BLOCK: usize = 18;
const Q4_WEIGHTS: usize = 32;

impl Q4Rows {
    /// `blocks` holds rows of `width` weights each; `width` is a multiple of 32.
    pub fn new(blocks: Vec<u8>, width: usize) -> Result<Self> {
        let row = width / Q4_WEIGHTS * Q4_BLOCK;
        if width == 0 || !width.is_multiple_of(Q4_WEIGHTS) || !blocks.len().is_multiple_of(row) {
            candle_core::bail!(
                "{} bytes are no rows of {width} 4-bit weights",
                blocks.len()
            );
        }
        Ok(Self { blocks, width })
    }

    pub fn rows(&self) -> usize {
        self.blocks.len() / (self.width / Q4_WEIGHTS * Q4_BLOCK)
    }

    /// Row `i` as f32, appended to `out`.
    fn row_into(&self, i: usize, out: &mut Vec<f32>) -> Result<()> {
        let size = self.width / Q4_WEIGHTS * Q4_BLOCK;
        let Some(row) = self.blocks.get(i * size..(i + 1) * size) else {
            candle_core::bail!("word {i} is outside the vocabulary of {}", self.rows());
        };
        dequantise_into(row, out);
        Ok(())
    }

    /// (batch, tokens) ids → (batch, tokens, width) rows.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let mut out = Vec::with_capacity(batch * tokens * self.width);
        for id in ids.flatten_all()?.to_vec1::<u32>()? {
            self.row_into(id as usize, &mut out)?;
        }
        Tensor::from_vec(out, (batch, tokens, self.width), ids.device())
    }
}

/// Q4_0 blocks as f32 weights, appended to `out`.
pub fn dequantise_into(blocks: &[u8], out: &mut Vec<f32>) {
    for block in blocks.chunks_exact(Q4_BLOCK) {
        let scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        let nibbles = &block[2..];
        out.extend(
            nibbles
                .iter()
                .map(|b| f32::from(b & 0x0f) - 8.0)
                .map(|q| q * scale),
        );
        out.extend(
            nibbles
                .iter()
                .map(|b| f32::from(b >> 4) - 8.0)
                .map(|q| q * scale),
        );
    }
}

struct Embeddings {
    words: Words,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, c: &Config, words: Option<Q4Rows>) -> Result<Self> {
        let words = match words {
            Some(rows) => Words::Quantised(rows),
            None => Words::Table(embedding(
                c.vocab_size,
                c.hidden_size,
                vb.pp("word_embeddings"),
            )?),
        };
        Ok(Self {
            words,
            positions: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_types: embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: layer_norm(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, ids: &Tensor, types: &Tensor) -> Result<Tensor> {
        let width = ids.dim(1)?;
        let positions = Tensor::arange(0u32, width as u32, ids.device())?.unsqueeze(0)?;
        let sum = (self.words.forward(ids)? + self.token_types.forward(types)?)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        self.norm.forward(&sum)
    }
}

/// One encoder block: multi-head self-attention, then the feed-forward layers.
struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    out: Dense,
    out_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let attention = vb.pp("attention");
        Ok(Self {
            query: Dense::new(linear(h, h, attention.pp("self").pp("query"))?),
            key: Dense::new(linear(h, h, attention.pp("self").pp("key"))?),
            value: Dense::new(linear(h, h, attention.pp("self").pp("value"))?),
            attention_out: Dense::new(linear(h, h, attention.pp("output").pp("dense"))?),
            attention_norm: layer_norm(h, eps, attention.pp("output").pp("LayerNorm"))?,
            intermediate: Dense::new(linear(
                h,
                c.intermediate_size,
                vb.pp("intermediate").pp("dense"),
            )?),
            out: Dense::new(linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?),
            out_norm: layer_norm(h, eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// (batch, tokens, hidden) → (batch, heads, tokens, head size).
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, tokens, _) = x.dims3()?;
        x.reshape((batch, tokens, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    /// `bias` is added to every attention score: 0 for a real token, very negative for padding.
    fn forward(&self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, tokens, hidden) = x.dims3()?;
        let q = self.split_heads(&self.query.forward(x)?)?;
        let k = self.split_heads(&self.key.forward(x)?)?;
        let v = self.split_heads(&self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?.broadcast_add(bias)?;
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = weights
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch, tokens, hidden))?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + x)?)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.out_norm
            .forward(&(self.out.forward(&inner)? + attended)?)
    }
}

/// The encoder: token ids in, one hidden vector per token out.
pub struct Bert {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    pub device: Device,
}

impl Bert {
    /// Loads the weights under the checkpoint's root, or under `bert.` where a checkpoint of a
    /// larger model keeps its encoder.
    pub fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        Self::load_with(vb, c, None)
    }

    /// [`Bert::load`] with the word embeddings as 4-bit rows, not from `vb`.
    pub fn load_quantised(vb: VarBuilder, c: &Config, words: Q4Rows) -> Result<Self> {
        Self::load_with(vb, c, Some(words))
    }

    fn load_with(vb: VarBuilder, c: &Config, words: Option<Q4Rows>) -> Result<Self> {
        let vb = if words.is_some() || vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i.to_string()), c))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embeddings: Embeddings::load(vb.pp("embeddings"), c, words)?,
            layers,
            device: vb.device().clone(),
        })
    }

    /// `ids`, `types` and `mask` are (batch, tokens); `mask` is 1 for a token and 0 for padding.
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: &Tensor) -> Result<Tensor> {
        // (batch, 1, 1, tokens): padding gets a score no softmax gives weight to.
        let bias = ((1.0 - mask.to_dtype(DType::F32)?)? * f32::MIN as f64)?
            .unsqueeze(1)?
            .unsqueeze(1)?;
        let mut x = self.embeddings.forward(ids, types)?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias)?;
        }
        Ok(x)
    }
}
