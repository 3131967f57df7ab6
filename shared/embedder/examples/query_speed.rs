//! How long one recall query takes to embed, alone: the local model on
//! single short texts, as recall embeds them, without Postgres or the index
//! (`bench recall` measures it inside a recall, where it shares the machine
//! with the keyword channel). For profiles and side-by-side runs:
//!
//!   cargo run --release -p hindsight-embedder --example query_speed -- MODEL_DIR [QUERIES [VECTORS]]
//!
//! With VECTORS, also writes the vectors of every query, alone and as one
//! batch, to that file (one JSON array per line), to compare two builds.

use std::time::Instant;

use hindsight_embedder::{Embedder, local::LocalEmbedder};
use hindsight_shared::synthetic::RECALL_QUERIES as QUERIES;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("MODEL_DIR");
    let n: usize = args
        .next()
        .map(|n| n.parse().expect("QUERIES is a number"))
        .unwrap_or(500);
    let embedder = LocalEmbedder::load(std::path::Path::new(&dir)).expect("model loads");
    embedder
        .embed(&[QUERIES[0].to_string()])
        .await
        .expect("warm-up");
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let text = format!("{} {}", QUERIES[i % QUERIES.len()], i / QUERIES.len());
        let started = Instant::now();
        embedder.embed(&[text]).await.expect("embedded");
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    if let Some(path) = args.next() {
        let texts: Vec<String> = QUERIES.iter().map(|q| q.to_string()).collect();
        let mut lines = Vec::new();
        for t in &texts {
            let v = embedder
                .embed(std::slice::from_ref(t))
                .await
                .expect("embedded");
            lines.push(serde_json::to_string(&v[0]).expect("json"));
        }
        for v in embedder.embed(&texts).await.expect("embedded") {
            lines.push(serde_json::to_string(&v).expect("json"));
        }
        std::fs::write(&path, lines.join("\n") + "\n").expect("vectors written");
    }
    times.sort_by(f64::total_cmp);
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    println!(
        "{n} queries: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}
