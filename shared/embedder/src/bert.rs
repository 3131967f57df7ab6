//! The BERT encoder that sentence models such as all-MiniLM-L6-v2 are made of, written on
//! candle-nn's layers: embeddings, then self-attention and feed-forward blocks, each closed by
//! a residual connection and layer normalisation. Only what an encoder-only sentence model
//! needs (absolute positions, the exact GELU); `config.json` names anything else, and loading
//! refuses it rather than computing something else.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

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

struct Embeddings {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        Ok(Self {
            words: embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
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
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    out: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let attention = vb.pp("attention");
        Ok(Self {
            query: linear(h, h, attention.pp("self").pp("query"))?,
            key: linear(h, h, attention.pp("self").pp("key"))?,
            value: linear(h, h, attention.pp("self").pp("value"))?,
            attention_out: linear(h, h, attention.pp("output").pp("dense"))?,
            attention_norm: layer_norm(h, eps, attention.pp("output").pp("LayerNorm"))?,
            intermediate: linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            out: linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
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
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i.to_string()), c))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embeddings: Embeddings::load(vb.pp("embeddings"), c)?,
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
