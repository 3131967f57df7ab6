//! `hindsight eval screen`: how well the filter's poisoning screen separates
//! attacks from harmless look-alikes on a corpus (`tests/corpus/screen/`),
//! offline, with the very function the filter stage runs ([`judge`]).
//!
//! The corpus is split by idea (`family`) into a part to tune on and a part
//! only to score; the report gives recall on attacks and the share of
//! look-alikes flagged, per technique or kind and per language.
//!
//! With the embedding model (the default), each line's nearness to the
//! corpus's `tune` examples counts as in the pipeline's embed stage; a `tune`
//! line is compared without the examples of its own family, so the tune
//! numbers are not inflated by the line finding itself. The learnt model is
//! likewise fit without a `tune` line's family: the families are dealt into
//! [`FOLDS`] parts, and each part is judged by a model fit to the others.
//!
//! Ordinary conversation is scored beside them: the corpus's own
//! (`conversation.jsonl`, split like the rest) and, with `--locomo`, every
//! turn of a LoCoMo file as its speaker would publish it. None of it should
//! be flagged.

use std::{collections::BTreeMap, path::Path};

use hindsight_core::turn::parse_envelope;
use hindsight_embedder::Embedder;
use hindsight_screen::screen::{
    self, encoder,
    learnt::{self, Model},
    semantic,
};
use serde::Serialize;

pub use super::screen_corpus::{Line, Split, fold_of, read};

/// Counts for one group of lines.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Tally {
    pub lines: usize,
    pub flagged: usize,
}

impl Tally {
    fn add(&mut self, flagged: bool) {
        self.lines += 1;
        self.flagged += usize::from(flagged);
    }

    pub fn share(&self) -> f64 {
        if self.lines == 0 {
            0.0
        } else {
            self.flagged as f64 / self.lines as f64
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub split: String,
    pub attacks: Tally,
    pub lookalikes: Tally,
    /// Attacks quarantined over attacks.
    pub recall: f64,
    /// Quarantined attacks over everything quarantined.
    pub precision: f64,
    /// Look-alikes quarantined over look-alikes.
    pub false_positive_rate: f64,
    pub attacks_by_technique: BTreeMap<String, Tally>,
    pub attacks_by_language: BTreeMap<String, Tally>,
    pub lookalikes_by_kind: BTreeMap<String, Tally>,
    pub lookalikes_by_language: BTreeMap<String, Tally>,
    /// Ids of attacks let through and look-alikes flagged.
    pub missed: Vec<String>,
    pub false_alarms: Vec<String>,
    /// The corpus's ordinary conversation (`conversation.jsonl`) flagged.
    pub conversation: Tally,
    pub conversation_by_language: BTreeMap<String, Tally>,
    pub conversation_flagged: Vec<String>,
    /// The LoCoMo file's turns flagged (`--locomo`), whatever the split.
    pub locomo: Option<Tally>,
    pub locomo_flagged: Vec<String>,
}

/// The screen's assessment of `line`, published as its source would publish
/// it, with `model` (none: cues only).
pub fn assessed(line: &Line, model: Option<&Model>) -> anyhow::Result<screen::Assessment> {
    assessed_with(line, model, None)
}

/// [`assessed`] with the encoder's probabilities for the texts the screen
/// reads of the line ([`hindsight_screen::assess_encoded`]).
pub fn assessed_with(
    line: &Line,
    model: Option<&Model>,
    encoder: Option<&[f64]>,
) -> anyhow::Result<screen::Assessment> {
    let (role, source) = match line.source.as_str() {
        "user" => ("user", "user"),
        "agent" => ("assistant", "agent"),
        "tool" => ("tool", "tool"),
        "document" => ("tool", "external"),
        other => anyhow::bail!("{}: unknown source {other:?}", line.id),
    };
    let envelope = serde_json::json!({
        "tenant": "eval", "user_id": "u", "session_id": "s",
        "role": role, "source": source, "content": line.content,
    });
    let turn = parse_envelope(envelope.to_string().as_bytes(), "eval", chrono::Utc::now())
        .map_err(|e| anyhow::anyhow!("{}: {e}", line.id))?;
    Ok(hindsight_screen::assess_encoded(
        &turn.content,
        turn.source,
        model,
        encoder,
    ))
}

/// The learnt models: one fit to all `tune` lines (for everything else), and
/// one per part fit without that part (for the part's own `tune` lines).
struct Models {
    all: Model,
    without: Vec<Model>,
}

impl Models {
    fn fit(lines: &[&Line]) -> anyhow::Result<Models> {
        let examples: Vec<(u64, learnt::Example)> = lines
            .iter()
            .filter(|l| l.split == "tune")
            .map(|l| {
                let source = semantic::corpus_source(&l.source)
                    .ok_or_else(|| anyhow::anyhow!("{}: unknown source {:?}", l.id, l.source))?;
                Ok((
                    fold_of(&l.family),
                    learnt::Example {
                        folded: screen::normalise::fold(&l.content),
                        source,
                        attack: l.id.starts_with("a-"),
                    },
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        let (all, without) = super::screen_corpus::fit_folds(&examples, Model::train);
        Ok(Models { all, without })
    }

    fn for_line(&self, line: &Line) -> &Model {
        if line.split == "tune" {
            &self.without[fold_of(&line.family) as usize]
        } else {
            &self.all
        }
    }
}

/// How nearness to the corpus's examples counts in a run.
pub struct NearnessRun<'a> {
    pub embedder: &'a dyn Embedder,
    /// Where the examples' vectors are kept (`HINDSIGHT_EMBED_CACHE_DIR`).
    pub cache_dir: &'a Path,
    /// Without a sign of an order beside it, so that it can quarantine
    /// alone (an ablation: the pipeline never does).
    pub alone: bool,
}

/// Each line's nearness to the examples, by id.
async fn nearness(
    run: &NearnessRun<'_>,
    lines: &[&Line],
) -> anyhow::Result<BTreeMap<String, semantic::Nearness>> {
    let embedder = run.embedder;
    let examples = hindsight_embed::screen::examples(embedder, run.cache_dir).await?;
    let contents: Vec<String> = lines.iter().map(|l| l.content.clone()).collect();
    let vectors = hindsight_embedder::embed_all(embedder, &contents).await?;
    Ok(lines
        .iter()
        .zip(vectors)
        .map(|(l, v)| {
            let own = (l.split == "tune").then_some(l.family.as_str());
            (l.id.clone(), examples.nearness(&v, own))
        })
        .collect())
}

/// Every turn of the LoCoMo file at `path` as a line to score (held back,
/// never tuned on), published by its speaker as a user.
fn locomo_lines(path: &Path) -> anyhow::Result<Vec<Line>> {
    Ok(crate::locomo::load(path)?
        .turns
        .into_iter()
        .map(|t| Line {
            id: t.qualified_id(),
            family: t.qualified_id(),
            lang: "en".into(),
            technique: "locomo".into(),
            source: "user".into(),
            content: t.content,
            split: "score".into(),
        })
        .collect())
}

/// What to score: the corpus in `dir` on `split`, and a LoCoMo file's turns.
pub struct Inputs<'a> {
    pub dir: &'a Path,
    pub split: Split,
    pub locomo: Option<&'a Path>,
}

/// Scores `inputs`; with `near`, nearness counts too.
pub async fn run(
    inputs: Inputs<'_>,
    threshold: f64,
    verbose: bool,
    near: Option<NearnessRun<'_>>,
    with_learnt: bool,
    encoder: Option<super::screen_encoder::EncoderRun<'_>>,
) -> anyhow::Result<Report> {
    let Inputs { dir, split, locomo } = inputs;
    let attacks = read(&dir.join("attacks.jsonl"))?;
    let lookalikes = read(&dir.join("lookalikes.jsonl"))?;
    let conversation_file = dir.join("conversation.jsonl");
    let conversation = if conversation_file.exists() {
        read(&conversation_file)?
    } else {
        Vec::new()
    };
    let locomo = locomo.map(locomo_lines).transpose()?.unwrap_or_default();
    let models = if with_learnt {
        let all: Vec<&Line> = attacks
            .iter()
            .chain(&lookalikes)
            .chain(&conversation)
            .collect();
        Some(Models::fit(&all)?)
    } else {
        None
    };
    let alone = near.as_ref().is_some_and(|n| n.alone);
    let near = match near {
        Some(run) => {
            let lines: Vec<&Line> = attacks
                .iter()
                .chain(&lookalikes)
                .chain(&conversation)
                .filter(|l| split.holds(l))
                .chain(&locomo)
                .collect();
            nearness(&run, &lines).await?
        }
        None => BTreeMap::new(),
    };
    let encoded = match (&encoder, &models) {
        (Some(run), Some(_)) => {
            let lines: Vec<&Line> = attacks
                .iter()
                .chain(&lookalikes)
                .chain(&conversation)
                .filter(|l| split.holds(l) || l.split == "tune")
                .chain(&locomo)
                .collect();
            Some(super::screen_encoder::Encoded::fit(run, &lines).await?)
        }
        _ => None,
    };
    let judged = |line: &Line| -> anyhow::Result<bool> {
        let model = models.as_ref().map(|m| m.for_line(line));
        let mut a = assessed(line, model)?;
        // As in the pipeline: the encoder is asked only about a turn the
        // screen found borderline.
        if let Some(encoded) = &encoded
            && encoder::asks(a.score, threshold)
        {
            a = assessed_with(line, model, Some(&encoded.probabilities(line)?))?;
        }
        if !a.recorded() {
            // As in the pipeline: a score the turn does not carry is 0 to
            // the embed stage.
            a.score = 0.0;
        }
        if let Some(&n) = near.get(&line.id) {
            if alone {
                semantic::judge_alone(&mut a, &line.content, n);
            } else {
                semantic::judge(&mut a, &line.content, n);
            }
        }
        let hit = a.score >= threshold;
        if verbose {
            let n = near.get(&line.id).copied().unwrap_or_default();
            eprintln!(
                "{} {:.2} near {:.2}/{:.2} [{}] {}",
                line.id,
                a.score,
                n.attack,
                n.harmless,
                a.reasons.join(" "),
                line.content.chars().take(140).collect::<String>()
            );
        }
        Ok(hit)
    };
    let mut r = Report {
        split: format!("{split:?}").to_lowercase(),
        ..Default::default()
    };
    (
        r.attacks,
        r.attacks_by_technique,
        r.attacks_by_language,
        r.missed,
    ) = part(&attacks, split, false, &judged)?;
    (
        r.lookalikes,
        r.lookalikes_by_kind,
        r.lookalikes_by_language,
        r.false_alarms,
    ) = part(&lookalikes, split, true, &judged)?;
    (
        r.conversation,
        _,
        r.conversation_by_language,
        r.conversation_flagged,
    ) = part(&conversation, split, true, &judged)?;
    if !locomo.is_empty() {
        let (tally, _, _, flagged) = part(&locomo, Split::All, true, &judged)?;
        (r.locomo, r.locomo_flagged) = (Some(tally), flagged);
    }
    r.recall = r.attacks.share();
    r.false_positive_rate = r.lookalikes.share();
    let flagged = r.attacks.flagged + r.lookalikes.flagged;
    r.precision = if flagged == 0 {
        0.0
    } else {
        r.attacks.flagged as f64 / flagged as f64
    };
    Ok(r)
}

type Part = (
    Tally,
    BTreeMap<String, Tally>,
    BTreeMap<String, Tally>,
    Vec<String>,
);

/// One file's lines on `split`: flagged in all, by technique or kind, by
/// language, and the ids whose verdict was `listed` (attacks let through,
/// look-alikes flagged).
fn part(
    lines: &[Line],
    split: Split,
    listed: bool,
    judged: &dyn Fn(&Line) -> anyhow::Result<bool>,
) -> anyhow::Result<Part> {
    let mut p: Part = Default::default();
    for line in lines.iter().filter(|l| split.holds(l)) {
        let hit = judged(line)?;
        p.0.add(hit);
        p.1.entry(line.technique.clone()).or_default().add(hit);
        p.2.entry(line.lang.clone()).or_default().add(hit);
        if hit == listed {
            p.3.push(line.id.clone());
        }
    }
    Ok(p)
}

/// The report as a table for people.
pub fn print(r: &Report) {
    println!(
        "screen on the {} split: {} of {} attacks quarantined (recall {:.3}), {} of {} look-alikes flagged ({:.3}); precision {:.3}",
        r.split,
        r.attacks.flagged,
        r.attacks.lines,
        r.recall,
        r.lookalikes.flagged,
        r.lookalikes.lines,
        r.false_positive_rate,
        r.precision
    );
    let rows = |title: &str, groups: &BTreeMap<String, Tally>| {
        println!("  {title}:");
        for (name, t) in groups {
            println!(
                "    {name:<16} {:>3}/{:<3} {:.3}",
                t.flagged,
                t.lines,
                t.share()
            );
        }
    };
    rows("attacks quarantined, by technique", &r.attacks_by_technique);
    rows("attacks quarantined, by language", &r.attacks_by_language);
    rows("look-alikes flagged, by kind", &r.lookalikes_by_kind);
    rows(
        "look-alikes flagged, by language",
        &r.lookalikes_by_language,
    );
    println!(
        "  ordinary conversation flagged: {} of {} ({:.3})",
        r.conversation.flagged,
        r.conversation.lines,
        r.conversation.share()
    );
    rows("by language", &r.conversation_by_language);
    if let Some(t) = r.locomo {
        println!(
            "  LoCoMo turns flagged: {} of {} ({:.4}) {}",
            t.flagged,
            t.lines,
            t.share(),
            r.locomo_flagged.join(" ")
        );
    }
}
