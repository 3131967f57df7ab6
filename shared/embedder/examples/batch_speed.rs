//! How fast the local model embeds a file of texts, one per line, as the
//! embed stage does: windows of WINDOW texts sorted by length, then batches
//! of 16. Without NATS or Postgres, so that a profile or a second load on
//! the machine can be added by hand:
//!
//!   cargo run --release -p hindsight-embedder --example batch_speed -- MODEL_DIR TEXTS [WINDOW]

use std::time::Instant;

use futures::StreamExt as _;
use hindsight_embedder::{Embedder, local::LocalEmbedder};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("MODEL_DIR");
    let file = args.next().expect("TEXTS");
    let window: usize = args
        .next()
        .map(|n| n.parse().expect("WINDOW is a number"))
        .unwrap_or(64);
    let parallel: usize = args
        .next()
        .map(|n| n.parse().expect("PARALLEL is a number"))
        .unwrap_or(1);
    let texts: Vec<String> = std::fs::read_to_string(&file)
        .expect("TEXTS is readable")
        .lines()
        .map(str::to_string)
        .collect();
    let embedder = LocalEmbedder::load(std::path::Path::new(&dir)).expect("model loads");
    embedder
        .embed(&texts[..16.min(texts.len())])
        .await
        .expect("warm-up");
    let started = Instant::now();
    for w in texts.chunks(window.max(1)) {
        let mut sorted = w.to_vec();
        sorted.sort_by_key(String::len);
        let done: Vec<_> = futures::stream::iter(sorted.chunks(16))
            .map(|chunk| embedder.embed(chunk))
            .buffered(parallel.max(1))
            .collect()
            .await;
        for d in done {
            d.expect("embedded");
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{} texts in {seconds:.2} s: {:.1} texts/s (window {window})",
        texts.len(),
        texts.len() as f64 / seconds
    );
}
