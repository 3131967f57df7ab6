//! The screen's encoder model in `hindsight eval screen`: every
//! text the screen reads of a line embedded by multilingual-e5-small (kept on
//! disk between runs), and the encoder's classifier fit like the learnt
//! model: once to all `tune` lines for everything else, and once without
//! each part of the `tune` families for that part's own lines.

use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
};

use hindsight_embedder::Embedder;
use hindsight_screen::screen::{
    encoder::{Classifier, Example},
    normalise, read_texts, semantic,
};

use super::screen_corpus::{Line, fit_folds, fold_of};

/// Where the encoder's vectors come from in a run.
pub struct EncoderRun<'a> {
    pub embedder: &'a dyn Embedder,
    /// Where the vectors are kept (`HINDSIGHT_EMBED_CACHE_DIR`).
    pub cache_dir: &'a Path,
}

/// The classifiers and the vector of every text a line is read as.
pub struct Encoded {
    all: Classifier,
    without: Vec<Classifier>,
    vectors: HashMap<String, Vec<f32>>,
}

fn source(line: &Line) -> anyhow::Result<hindsight_core::turn::Source> {
    semantic::corpus_source(&line.source)
        .ok_or_else(|| anyhow::anyhow!("{}: unknown source {:?}", line.id, line.source))
}

impl Encoded {
    /// Embeds what the screen reads of `lines` and the `tune` lines among
    /// them whole (the classifier's examples), and fits the classifiers.
    pub async fn fit(run: &EncoderRun<'_>, lines: &[&Line]) -> anyhow::Result<Encoded> {
        let mut texts = BTreeSet::new();
        for line in lines {
            texts.extend(read_texts(&line.content, source(line)?));
            if line.split == "tune" {
                texts.insert(normalise::fold(&line.content));
            }
        }
        let texts: Vec<String> = texts.into_iter().collect();
        let vectors =
            hindsight_embedder::embed_kept(run.embedder, run.cache_dir, "screen-encoder", &texts)
                .await?;
        let vectors: HashMap<String, Vec<f32>> = texts.into_iter().zip(vectors).collect();
        let mut examples: Vec<(u64, Example)> = Vec::new();
        for line in lines.iter().filter(|l| l.split == "tune") {
            let Some(vector) = vectors.get(&normalise::fold(&line.content)) else {
                continue;
            };
            examples.push((
                fold_of(&line.family),
                Example {
                    vector: vector.clone(),
                    source: source(line)?,
                    attack: line.id.starts_with("a-"),
                },
            ));
        }
        let (all, without) = fit_folds(&examples, Classifier::train);
        Ok(Encoded {
            all,
            without,
            vectors,
        })
    }

    /// The encoder's probability for each text the screen reads of `line`.
    pub fn probabilities(&self, line: &Line) -> anyhow::Result<Vec<f64>> {
        let classifier = if line.split == "tune" {
            &self.without[fold_of(&line.family) as usize]
        } else {
            &self.all
        };
        let source = source(line)?;
        read_texts(&line.content, source)
            .iter()
            .map(|t| {
                let v = self
                    .vectors
                    .get(t)
                    .ok_or_else(|| anyhow::anyhow!("{}: a text was not embedded", line.id))?;
                Ok(classifier.probability(v, source))
            })
            .collect()
    }
}
