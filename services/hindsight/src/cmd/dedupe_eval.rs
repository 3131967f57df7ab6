//! `hindsight eval dedupe`: persist's decision (create, merge or supersede)
//! on a labelled corpus of fact pairs, one file per language
//! (`tests/corpus/dedupe/<lang>.jsonl`): the old fact is the user's memory, the
//! new one arrives; merge and supersede precision and recall per language,
//! with the embedding model the configuration names. Beside the rule persist
//! runs (the cosine gates only for texts in the model's declared languages),
//! the same pairs under ablations: the cosine gating every script, the
//! cosine alone, the words alone (no cosine gate), and the English-centred
//! statement rule.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::Context;
use hindsight_embedder::Embedder;
use hindsight_persist::dedupe::{self, CONTRADICTION_MARGIN, Decision};
use hindsight_store::memories::Candidate;
use hindsight_text::{
    script::Coverage,
    statement::{content_key, contradicts, value_differs},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::screen_eval::Split;

/// One labelled pair.
#[derive(Debug, Clone, Deserialize)]
struct Pair {
    id: String,
    lang: String,
    split: String,
    kind: String,
    old: String,
    new: String,
    expect: Action,
}

/// What persist does with the new fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Merge,
    Supersede,
    Create,
}

impl From<&Decision> for Action {
    fn from(d: &Decision) -> Self {
        match d {
            Decision::Create => Action::Create,
            Decision::Merge { .. } => Action::Merge,
            Decision::Supersede { .. } => Action::Supersede,
        }
    }
}

/// A way to decide, for the ablations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Rule {
    /// What persist runs: the words decide; the cosine gates where the
    /// model's declared languages cover the new fact's script.
    Shipped,
    /// The words decide among candidates the cosine gates, in every script.
    GatedEverywhere,
    /// The cosine alone: merge at the threshold, never supersede.
    CosineAlone,
    /// The words alone: persist's rule with no cosine gate.
    WordsAlone,
    /// English-centred statements (hindsight_text::statement): a new value
    /// of a one-valued attribute or a negation near enough supersedes, a
    /// near fact whose last word is the same merges.
    Statement,
}

const RULES: [Rule; 5] = [
    Rule::Shipped,
    Rule::GatedEverywhere,
    Rule::CosineAlone,
    Rule::WordsAlone,
    Rule::Statement,
];

/// Precision and recall of one action.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Score {
    /// Decided and expected.
    pub right: usize,
    /// Decided, not expected.
    pub wrong: usize,
    /// Expected, not decided.
    pub missed: usize,
}

impl Score {
    pub fn precision(&self) -> Option<f64> {
        let decided = self.right + self.wrong;
        (decided > 0).then(|| self.right as f64 / decided as f64)
    }

    pub fn recall(&self) -> Option<f64> {
        let expected = self.right + self.missed;
        (expected > 0).then(|| self.right as f64 / expected as f64)
    }

    fn add(&mut self, decided: bool, expected: bool) {
        match (decided, expected) {
            (true, true) => self.right += 1,
            (true, false) => self.wrong += 1,
            (false, true) => self.missed += 1,
            (false, false) => {}
        }
    }
}

/// One language's scores under one rule.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scores {
    pub pairs: usize,
    pub merge: Score,
    pub supersede: Score,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub split: String,
    pub threshold: f32,
    pub model: String,
    /// The languages the model is declared to read.
    pub languages: String,
    /// Per rule, per language (and `all`).
    pub rules: BTreeMap<String, BTreeMap<String, Scores>>,
    /// The shipped rule's wrong decisions: id, expected, decided.
    pub mistakes: Vec<(String, Action, Action)>,
}

fn read_corpus(dir: &Path, split: Split) -> anyhow::Result<Vec<Pair>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("no .jsonl file in {}", dir.display());
    }
    let mut pairs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let pair: Pair = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a pair", file.display(), n + 1))?;
            if split.includes(&pair.split) {
                pairs.push(pair);
            }
        }
    }
    Ok(pairs)
}

fn candidate(content: &str, vector: &[f32]) -> Candidate {
    Candidate {
        id: Uuid::from_u128(1),
        content: content.to_string(),
        content_key: content_key(content),
        embedding: vector.to_vec(),
        importance: 0.5,
        confidence: 0.9,
        entities: Vec::new(),
        context: None,
    }
}

fn decide(
    rule: Rule,
    pair: &Pair,
    (old, new): (&[f32], &[f32]),
    threshold: f32,
    coverage: &Coverage,
) -> Action {
    let key = content_key(&pair.new);
    let existing = [candidate(&pair.old, old)];
    let cosine = hindsight_core::embedding::cosine(old, new);
    let words = |reads: bool| -> Action {
        (&dedupe::decide(&pair.new, &key, new, &existing, threshold, reads)).into()
    };
    match rule {
        Rule::Shipped => words(coverage.reads(&pair.new)),
        Rule::GatedEverywhere => words(true),
        Rule::WordsAlone => words(false),
        Rule::CosineAlone => {
            if key == existing[0].content_key || cosine >= threshold {
                Action::Merge
            } else {
                Action::Create
            }
        }
        Rule::Statement => {
            if key == existing[0].content_key {
                Action::Merge
            } else if cosine >= threshold - CONTRADICTION_MARGIN
                && contradicts(&pair.old, &pair.new)
            {
                Action::Supersede
            } else if cosine >= threshold && !value_differs(&pair.old, &pair.new) {
                Action::Merge
            } else {
                Action::Create
            }
        }
    }
}

/// Scores `split` of the corpus in `dir` with `embedder` at `threshold`.
pub async fn run(
    dir: &Path,
    split: Split,
    threshold: f32,
    embedder: &dyn Embedder,
    verbose: bool,
) -> anyhow::Result<Report> {
    let pairs = read_corpus(dir, split)?;
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|p| [p.old.clone(), p.new.clone()])
        .collect();
    let vectors = hindsight_embedder::embed_all(embedder, &texts).await?;
    let coverage = Coverage::of(embedder.languages());
    let mut rules: BTreeMap<String, BTreeMap<String, Scores>> = BTreeMap::new();
    let mut mistakes = Vec::new();
    for (pair, v) in pairs.iter().zip(vectors.chunks(2)) {
        let (old, new) = (&v[0], &v[1]);
        for rule in RULES {
            let decided = decide(rule, pair, (old, new), threshold, &coverage);
            let name = serde_json::to_value(rule)?
                .as_str()
                .unwrap_or("rule")
                .to_string();
            let per_lang = rules.entry(name).or_default();
            for lang in [pair.lang.as_str(), "all"] {
                let s = per_lang.entry(lang.to_string()).or_default();
                s.pairs += 1;
                s.merge
                    .add(decided == Action::Merge, pair.expect == Action::Merge);
                s.supersede.add(
                    decided == Action::Supersede,
                    pair.expect == Action::Supersede,
                );
            }
            if rule == Rule::Shipped && decided != pair.expect {
                if verbose {
                    eprintln!(
                        "{} ({}): expected {:?}, decided {:?} (cosine {:.3})\n  old: {}\n  new: {}",
                        pair.id,
                        pair.kind,
                        pair.expect,
                        decided,
                        hindsight_core::embedding::cosine(old, new),
                        pair.old,
                        pair.new
                    );
                }
                mistakes.push((pair.id.clone(), pair.expect, decided));
            }
        }
    }
    Ok(Report {
        split: format!("{split:?}").to_lowercase(),
        threshold,
        model: embedder.model().name.clone(),
        languages: embedder.languages().to_string(),
        rules,
        mistakes,
    })
}

/// The report as a table: per rule, per language, precision and recall.
pub fn print(report: &Report) {
    let pct = |v: Option<f64>| v.map_or("   –  ".to_string(), |v| format!("{v:.3} "));
    println!(
        "dedupe on the {} part, cosine threshold {}, model {} (reads: {}):",
        report.split, report.threshold, report.model, report.languages
    );
    for (rule, langs) in &report.rules {
        println!("{rule}:");
        println!("  lang  pairs  merge P  merge R  supersede P  supersede R");
        for (lang, s) in langs {
            println!(
                "  {lang:<4}  {:>5}  {}   {}   {}       {}",
                s.pairs,
                pct(s.merge.precision()),
                pct(s.merge.recall()),
                pct(s.supersede.precision()),
                pct(s.supersede.recall()),
            );
        }
    }
}
