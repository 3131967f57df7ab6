//! The screen corpus's lines (`tests/corpus/screen/`), its splits and the
//! parts its `tune` families are dealt into, for `hindsight eval screen`.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

/// One corpus line (`attacks.jsonl`, `lookalikes.jsonl`, `conversation.jsonl`).
#[derive(Debug, Deserialize)]
pub struct Line {
    pub id: String,
    pub lang: String,
    /// For attacks the technique, for look-alikes their kind.
    pub technique: String,
    /// `user`, `agent`, `tool` or `document`.
    pub source: String,
    pub content: String,
    pub family: String,
    pub split: String,
}

/// Which part of the corpus to score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    Tune,
    Score,
    All,
}

impl Split {
    pub fn holds(self, line: &Line) -> bool {
        self.includes(&line.split)
    }

    /// Whether a line marked `split` (`tune` or `score`) is in this part.
    pub fn includes(self, split: &str) -> bool {
        match self {
            Split::Tune => split == "tune",
            Split::Score => split == "score",
            Split::All => true,
        }
    }
}

/// Reads one JSON Lines file of the corpus.
pub fn read(path: &Path) -> anyhow::Result<Vec<Line>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{} line {}", path.display(), i + 1))
        })
        .collect()
}

/// How many parts the `tune` families are dealt into for judging `tune` lines.
pub const FOLDS: u64 = 5;

/// A family's part: a stable hash, so that the parts do not follow file order.
pub fn fold_of(family: &str) -> u64 {
    family.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) % FOLDS
}

/// A model fit to all of `examples` (each with its family's part), and one
/// fit without each part, for judging that part's own `tune` lines.
pub fn fit_folds<E: Clone, M>(examples: &[(u64, E)], train: impl Fn(&[E]) -> M) -> (M, Vec<M>) {
    let fit = |keep: &dyn Fn(u64) -> bool| {
        let part: Vec<E> = examples
            .iter()
            .filter(|(f, _)| keep(*f))
            .map(|(_, e)| e.clone())
            .collect();
        train(&part)
    };
    (
        fit(&|_| true),
        (0..FOLDS).map(|k| fit(&|f| f != k)).collect(),
    )
}
