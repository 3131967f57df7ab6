//! The bare embedder: the configured model on a list of texts, one call of
//! 16 at a time, with nothing else running. `bench ingest` measures it on its
//! facts in a process of its own, so that the model runs there as its library
//! runs it by default (candle: one operation over every core), not as
//! hindsight's processes run it (one thread a call, several calls at once;
//! `hindsight_embedder::threads`): the pipeline is compared with the
//! embedder at its best for one call at a time.

use std::{path::Path, time::Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub(super) struct BareReport {
    pub(super) texts: usize,
    pub(super) embedder: String,
    /// Threads one call of the local model runs on (`CANDLE_NUM_THREADS`).
    pub(super) threads: String,
    /// In the file's order, 16 at a time.
    pub(super) texts_per_s: f64,
    /// Each window of `window` texts sorted by length, then 16 at a time.
    pub(super) windowed_texts_per_s: f64,
    pub(super) window: usize,
}

/// The texts of `file` (one per line) embedded 16 at a time, in order, then
/// in windows of `window` sorted by length.
pub(super) async fn measure(file: &Path, window: usize) -> anyhow::Result<BareReport> {
    let config = crate::cmd::setup()?;
    let texts: Vec<String> = std::fs::read_to_string(file)
        .with_context(|| format!("reading {}", file.display()))?
        .lines()
        .map(str::to_string)
        .collect();
    let embedder = hindsight_embed::embedder(&config.embed)?;
    if let Some(first) = texts.chunks(16).next() {
        embedder.embed(first).await?;
    }
    let started = Instant::now();
    for chunk in texts.chunks(16) {
        embedder.embed(chunk).await?;
    }
    let texts_per_s = texts.len() as f64 / started.elapsed().as_secs_f64();
    let window = window.max(16);
    let started = Instant::now();
    for w in texts.chunks(window) {
        let mut sorted = w.to_vec();
        sorted.sort_by_key(String::len);
        for chunk in sorted.chunks(16) {
            embedder.embed(chunk).await?;
        }
    }
    Ok(BareReport {
        texts: texts.len(),
        embedder: embedder.model().name.clone(),
        threads: std::env::var("CANDLE_NUM_THREADS").unwrap_or_else(|_| "candle's default".into()),
        texts_per_s,
        windowed_texts_per_s: texts.len() as f64 / started.elapsed().as_secs_f64(),
        window,
    })
}

/// [`measure`] on `texts` in a process of its own (`hindsight bench
/// embedder`), whose local model runs each call on every core this process
/// may use, as candle does unless told otherwise.
pub(super) async fn in_own_process(texts: &[String], window: usize) -> anyhow::Result<BareReport> {
    let file = std::env::temp_dir().join(format!(
        "hindsight-bench-texts-{}-{}.txt",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    // One text a line: a fact's own line breaks become spaces.
    let lines: Vec<String> = texts.iter().map(|t| t.replace(['\n', '\r'], " ")).collect();
    std::fs::write(&file, lines.join("\n")).context("writing the texts for the bare embedder")?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .args(["bench", "embedder", "--json", "--window"])
        .arg(window.to_string())
        .arg("--texts")
        .arg(&file)
        .env("CANDLE_NUM_THREADS", cores.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .context("running `hindsight bench embedder`");
    let _ = std::fs::remove_file(&file);
    let output = output?;
    anyhow::ensure!(
        output.status.success(),
        "`hindsight bench embedder` failed: {}",
        output.status
    );
    serde_json::from_slice(&output.stdout).context("reading `hindsight bench embedder`'s report")
}
