//! Vectors kept on disk between starts. The poisoning screen's examples cost
//! a pass of a model over thousands of texts, most of them longer than any
//! fact (seconds to minutes on two cores), and come out the same at every
//! start of the same model on the same corpus. One file holds one set, named
//! by the model and a hash of its texts; a file that is missing, short or of
//! another format is embedded again and written anew ([`crate::embed_kept`]).

use std::{
    io,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

use hindsight_core::embedding::ModelId;
use sha2::{Digest, Sha256};

/// The file format: this header, then every vector's floats, little-endian.
const MAGIC: &[u8; 8] = b"hsvec1\n\0";

/// The file for `texts` embedded by `model`, under `dir`.
pub fn path(dir: &Path, kind: &str, model: &ModelId, texts: &[String]) -> PathBuf {
    let mut hash = Sha256::new();
    hash.update(model.slug().as_bytes());
    for text in texts {
        // Lengths first, so that no two lists of texts hash alike.
        hash.update((text.len() as u64).to_le_bytes());
        hash.update(text.as_bytes());
    }
    let digest = hash.finalize();
    dir.join(format!(
        "{kind}-{}-{}.vec",
        model.slug(),
        hex::encode(&digest[..8])
    ))
}

/// The `count` vectors of `dimension` floats in the file, if it holds exactly those.
pub fn read(path: &Path, count: usize, dimension: usize) -> Option<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(MAGIC.as_slice())?;
    if dimension == 0 || body.len() != count * dimension * 4 {
        return None;
    }
    Some(
        body.chunks_exact(dimension * 4)
            .map(|row| {
                row.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
            .collect(),
    )
}

/// Writes `vectors` to `path` whole: into a file of its own first, then
/// renamed, so that processes starting together never read half a file.
pub fn write(path: &Path, vectors: &[Vec<f32>]) -> io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let floats: usize = vectors.iter().map(Vec::len).sum();
    let mut bytes = Vec::with_capacity(MAGIC.len() + floats * 4);
    bytes.extend_from_slice(MAGIC);
    for x in vectors.iter().flatten() {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let own = path.with_extension(format!(
        "{}.{}.part",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&own, &bytes)?;
    std::fs::rename(&own, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&own);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelId {
        ModelId {
            name: "m".into(),
            version: "1".into(),
            dimension: 2,
        }
    }

    #[test]
    fn vectors_come_back_as_written_and_only_for_the_same_texts() {
        let dir = std::env::temp_dir().join(format!("hindsight-cache-{}", std::process::id()));
        let texts = vec!["a".to_string(), "bc".to_string()];
        let file = path(&dir, "t", &model(), &texts);
        let vectors = vec![vec![0.5, -1.0], vec![0.25, 2.0]];
        write(&file, &vectors).expect("written");
        assert_eq!(read(&file, 2, 2), Some(vectors));
        assert_eq!(read(&file, 3, 2), None, "another count is another set");
        let other = path(&dir, "t", &model(), &["ab".to_string(), "c".to_string()]);
        assert_ne!(file, other);
        assert_eq!(read(&other, 2, 2), None);
        std::fs::write(&file, b"garbage").expect("overwritten");
        assert_eq!(read(&file, 2, 2), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
