//! `hindsight eval extraction`: how much of LoCoMo's evidence survives the
//! filter and the rules extractor, offline (the same functions the stages run).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::PathBuf,
};

use anyhow::Context as _;
use hindsight_core::turn::{KeptTurn, parse_envelope};
use hindsight_extract::rules;
use hindsight_screen::{Fate, judge};
use serde::Serialize;

use crate::locomo;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Share of LoCoMo evidence turns (question categories 1–4) from which the
    /// filter and the rules extractor produce at least one fact.
    Extraction {
        /// The LoCoMo JSON file (e.g. ../shared/eval/locomo-dev.json).
        path: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Also print the facts of the first N kept turns (to stderr), to read what extraction makes of them.
        #[arg(long, default_value_t = 0)]
        sample: usize,
    },
    /// Recall quality on LoCoMo through the real pipeline, started in-process
    /// in a throw-away namespace, database and data directory: publish every
    /// turn, wait until the pipeline drains, ask every question of categories
    /// 1–4, report recall@5, recall@10 and words@10 (overall and per category).
    /// Each question is recalled as of its conversation's last session (a plan
    /// that had ended by then is past and left out), and scored once more with
    /// `include: expired` (under `tried`).
    ///
    /// Turn ids are published as `<sample_id>/<dia_id>` (a turn is identified
    /// by tenant and turn id, and every conversation numbers from D1:1);
    /// evidence is matched in the same form.
    Locomo {
        /// The LoCoMo JSON file (e.g. ../shared/eval/locomo-dev.json).
        path: PathBuf,
        /// Memories asked for per question.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Also score the same questions with each recall technique switched
        /// (fusion, weights, stemming, time boost, second hop, spreading
        /// sources, each signal alone, every technique off together), and with
        /// fact context switched on a second ingest; printed to stderr and under `sweep`.
        #[arg(long)]
        sweep: bool,
        /// Only these conversations (`sample_id`s, comma-separated), e.g. to
        /// tune on some and confirm on the others.
        #[arg(long, value_delimiter = ',')]
        conversations: Vec<String>,
        /// Also score the same questions with these recall settings
        /// (`HINDSIGHT_RECALL_*=value` pairs separated by spaces, over the
        /// environment), on the same ingest; repeatable. For tuning.
        #[arg(long = "try", value_name = "SETTINGS")]
        tries: Vec<String>,
    },
    /// The filter's poisoning screen on a corpus of attacks and harmless
    /// look-alikes (`attacks.jsonl`, `lookalikes.jsonl`): attacks quarantined
    /// and look-alikes flagged, per technique or kind and per language.
    Screen {
        /// The corpus directory.
        #[arg(default_value = "tests/corpus/screen")]
        dir: PathBuf,
        /// The part to score: `score` (never tuned on), `tune`, or `all`.
        #[arg(long, value_enum, default_value = "score")]
        split: super::screen_eval::Split,
        /// The score at which a turn counts as quarantined.
        #[arg(long, default_value_t = hindsight_screen::screen::DEFAULT_THRESHOLD)]
        threshold: f64,
        /// Print every line's score and reasons to stderr.
        #[arg(long)]
        verbose: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Leave out nearness to the corpus's examples (no embedding model;
        /// `HINDSIGHT_SCREEN_NEARNESS=off`).
        #[arg(long)]
        no_nearness: bool,
        /// Let nearness count without a cue beside it, so that it can
        /// quarantine alone (an ablation: the pipeline never does).
        #[arg(long, conflicts_with_all = ["no_nearness", "cues_only"])]
        nearness_alone: bool,
        /// Leave out the learnt model (`HINDSIGHT_SCREEN_LEARNT=off`).
        #[arg(long)]
        no_learnt: bool,
        /// The cues alone: `--no-nearness --no-learnt`.
        #[arg(long)]
        cues_only: bool,
        /// Also screen every turn of this LoCoMo file (e.g.
        /// ../shared/eval/locomo-dev.json) as ordinary conversation: none
        /// should be flagged.
        #[arg(long, value_name = "FILE")]
        locomo: Option<PathBuf>,
        /// Leave out the encoder model, which is otherwise asked about the
        /// turns the rest of the screen finds borderline, as the extract
        /// stage asks it (from `HINDSIGHT_SCREEN_MODEL_DIR`;
        /// `HINDSIGHT_SCREEN_ENCODER=off` leaves it out too, and so do
        /// `--no-learnt` and `--cues-only`: it combines with the learnt model).
        #[arg(long)]
        no_encoder: bool,
    },
    /// Persist's decision (create, merge or supersede) on labelled fact pairs
    /// in seven languages (`<lang>.jsonl`): merge and supersede precision and
    /// recall per language, for the rule persist runs (the cosine gates only
    /// texts in the scripts of the model's declared languages) and its
    /// ablations (the cosine gating every script, the cosine alone, the words
    /// alone, the English-centred statement rule).
    Dedupe {
        /// The corpus directory.
        #[arg(default_value = "tests/corpus/dedupe")]
        dir: PathBuf,
        /// The part to score: `score` (never tuned on), `tune`, or `all`.
        #[arg(long, value_enum, default_value = "score")]
        split: super::screen_eval::Split,
        /// The merge threshold (default HINDSIGHT_DEDUPE_THRESHOLD).
        #[arg(long)]
        threshold: Option<f32>,
        /// Print each wrong decision of the shipped rule to stderr.
        #[arg(long)]
        verbose: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct ExtractionReport {
    turns: usize,
    kept: usize,
    facts: usize,
    evidence_turns: usize,
    covered: usize,
    coverage: f64,
    per_category: BTreeMap<u8, f64>,
    dropped_evidence: Vec<String>,
    /// Evidence ids that name no turn of the data set (left out of the share).
    missing_evidence: Vec<String>,
    seconds: f64,
    turns_per_s: f64,
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Locomo {
            path,
            k,
            json,
            sweep,
            conversations,
            tries,
        } => {
            if !(1..=50).contains(&k) {
                anyhow::bail!("--k must be between 1 and 50");
            }
            let report = super::locomo_eval::run(&path, k, sweep, &conversations, &tries).await?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "LoCoMo: {} questions over {} turns ({} memories, ingest {:.0} s): recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0}; recall p50 {:.1} ms, p99 {:.1} ms; {} degraded",
                    report.overall.questions,
                    report.turns,
                    report.memories,
                    report.ingest_seconds,
                    report.overall.recall_5,
                    report.overall.recall_10,
                    report.overall.words_10,
                    report.recall_p50_ms,
                    report.recall_p99_ms,
                    report.degraded
                );
                for (c, s) in &report.per_category {
                    println!(
                        "  category {c}: recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0} ({} questions)",
                        s.recall_5, s.recall_10, s.words_10, s.questions
                    );
                }
            }
            Ok(())
        }
        Command::Screen {
            dir,
            split,
            threshold,
            verbose,
            json,
            no_nearness,
            nearness_alone,
            no_learnt,
            cues_only,
            locomo,
            no_encoder,
        } => {
            let config = hindsight_shared::config::Config::from_env()?;
            let embedder = if cues_only || no_nearness {
                None
            } else {
                Some(hindsight_embedder::from_config(&config.embed)?)
            };
            let near = embedder
                .as_deref()
                .map(|embedder| super::screen_eval::NearnessRun {
                    embedder,
                    cache_dir: &config.embed.cache_dir,
                    alone: nearness_alone,
                });
            let inputs = super::screen_eval::Inputs {
                dir: &dir,
                split,
                locomo: locomo.as_deref(),
            };
            let with_encoder = config.screen_encoder && !(no_encoder || no_learnt || cues_only);
            let encoder_model = with_encoder
                .then(|| {
                    let dir = &config.screen_model_dir;
                    hindsight_embedder::local::LocalEmbedder::load(dir).with_context(|| {
                        format!(
                            "loading the screen's encoder model from {} (HINDSIGHT_SCREEN_MODEL_DIR): \
                             ./ops/setup.sh fetches it; --no-encoder leaves it out",
                            dir.display()
                        )
                    })
                })
                .transpose()?;
            let encoder_run =
                encoder_model
                    .as_ref()
                    .map(|embedder| super::screen_encoder::EncoderRun {
                        embedder,
                        cache_dir: &config.embed.cache_dir,
                    });
            let report = super::screen_eval::run(
                inputs,
                threshold,
                verbose,
                near,
                !(no_learnt || cues_only),
                encoder_run,
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                super::screen_eval::print(&report);
            }
            Ok(())
        }
        Command::Dedupe {
            dir,
            split,
            threshold,
            verbose,
            json,
        } => {
            let config = hindsight_shared::config::Config::from_env()?;
            let embedder = hindsight_embedder::from_config(&config.embed)?;
            let threshold = threshold.unwrap_or(config.dedupe_threshold);
            let report =
                super::dedupe_eval::run(&dir, split, threshold, embedder.as_ref(), verbose).await?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                super::dedupe_eval::print(&report);
            }
            Ok(())
        }
        Command::Extraction { path, json, sample } => {
            let report = extraction(&path, sample)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "{} turns → {} kept → {} facts ({:.0} turns/s); evidence coverage {:.3} ({} of {} evidence turns)",
                    report.turns,
                    report.kept,
                    report.facts,
                    report.turns_per_s,
                    report.coverage,
                    report.covered,
                    report.evidence_turns
                );
                for (category, share) in &report.per_category {
                    println!("  category {category}: {share:.3}");
                }
                if !report.missing_evidence.is_empty() {
                    println!(
                        "  evidence ids naming no turn (left out): {}",
                        report.missing_evidence.join(", ")
                    );
                }
                if !report.dropped_evidence.is_empty() {
                    println!(
                        "  evidence without a fact: {}",
                        report.dropped_evidence.join(", ")
                    );
                }
            }
            Ok(())
        }
    }
}

fn extraction(path: &std::path::Path, sample: usize) -> anyhow::Result<ExtractionReport> {
    let data = locomo::load(path)?;
    let started = std::time::Instant::now();
    let mut previous: HashMap<(String, String), String> = HashMap::new();
    let mut with_facts: HashSet<(String, String)> = HashSet::new();
    let (mut kept_count, mut facts) = (0, 0);
    for t in &data.turns {
        let envelope = t.envelope().to_string();
        let turn = parse_envelope(envelope.as_bytes(), locomo::TENANT, t.ts)?;
        let speaker_key = (turn.session_id.clone(), turn.speaker.clone());
        let verdict = judge(
            &turn,
            previous.get(&speaker_key).map(String::as_str),
            hindsight_screen::screen::Settings::default(),
        );
        previous.insert(speaker_key, verdict.content.clone());
        if verdict.fate != Fate::Keep {
            continue;
        }
        kept_count += 1;
        let trust = turn.source.trust();
        let kept = KeptTurn {
            turn,
            trust,
            quarantine: verdict.quarantine,
            flags: verdict.flags,
            context: None,
        };
        let drafts = rules::extract(&kept);
        if kept_count <= sample {
            eprintln!("{} {}: {}", t.turn_id, t.speaker, t.content);
            for d in &drafts {
                eprintln!(
                    "    [{} {:.1}] {}",
                    d.fact_type.as_str(),
                    d.importance,
                    d.content
                );
            }
        }
        facts += drafts.len();
        if !drafts.is_empty() {
            with_facts.insert((t.user_id.clone(), t.turn_id.clone()));
        }
    }
    let seconds = started.elapsed().as_secs_f64();

    let known: HashSet<(String, String)> = data
        .turns
        .iter()
        .map(|t| (t.user_id.clone(), t.turn_id.clone()))
        .collect();
    let mut evidence: BTreeMap<(String, String), Vec<u8>> = BTreeMap::new();
    let mut missing_evidence = Vec::new();
    for q in data
        .questions
        .iter()
        .filter(|q| (1..=4).contains(&q.category))
    {
        for e in &q.evidence {
            let key = (q.user_id.clone(), e.clone());
            if known.contains(&key) {
                evidence.entry(key).or_default().push(q.category);
            } else {
                missing_evidence.push(format!("{}/{e}", q.user_id));
            }
        }
    }
    let covered = evidence.keys().filter(|k| with_facts.contains(*k)).count();
    let mut per_category: BTreeMap<u8, (usize, usize)> = BTreeMap::new();
    for (key, categories) in &evidence {
        for c in categories {
            let entry = per_category.entry(*c).or_default();
            entry.0 += 1;
            if with_facts.contains(key) {
                entry.1 += 1;
            }
        }
    }
    let dropped_evidence = evidence
        .keys()
        .filter(|k| !with_facts.contains(*k))
        .map(|(u, t)| format!("{u}/{t}"))
        .collect();
    Ok(ExtractionReport {
        turns: data.turns.len(),
        kept: kept_count,
        facts,
        evidence_turns: evidence.len(),
        covered,
        coverage: covered as f64 / evidence.len().max(1) as f64,
        per_category: per_category
            .into_iter()
            .map(|(c, (n, k))| (c, k as f64 / n.max(1) as f64))
            .collect(),
        dropped_evidence,
        missing_evidence,
        seconds,
        turns_per_s: data.turns.len() as f64 / seconds.max(1e-9),
    })
}
