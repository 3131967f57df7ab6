//! `hindsight eval locomo`: the protocol of ../shared/eval/README.md through
//! the real pipeline, started in-process in a sandbox of its own (namespace,
//! database, data directory), removed afterwards.

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    time::Instant,
};

use hindsight_core::memory::Include;
use hindsight_core::signal::{Fusion, Signal};
use hindsight_recall::{RecallRequest, Recaller};
use hindsight_shared::{
    Config,
    config::RecallConfig,
    sandbox::Sandbox,
    service::{self, Context},
};
use hindsight_text::terms::Matching;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::bench::support::{percentile, publish_all, until};
use crate::{locomo, stages};

/// Recall@5, recall@10 and words@10 over a set of questions.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Scores {
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    #[serde(rename = "words@10")]
    pub words_10: f64,
    pub questions: usize,
}

#[derive(Debug, Serialize)]
pub struct Report {
    /// Over every question: recall@5, recall@10, words@10, questions.
    #[serde(flatten)]
    pub overall: Scores,
    pub per_category: BTreeMap<u8, Scores>,
    pub turns: usize,
    pub memories: i64,
    pub ingest_seconds: f64,
    pub k: usize,
    pub recall_p50_ms: f64,
    pub recall_p99_ms: f64,
    /// Answers that came without the dense channel (should be 0).
    pub degraded: usize,
    /// The conversations asked about (all of the file's unless `--conversations`).
    pub conversations: Vec<String>,
    /// The settings the scores above were measured with.
    pub settings: Settings,
    /// With `--sweep`: the same questions under other settings, one technique
    /// switched at a time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<Variant>,
    /// With `--try`: the same questions under the recall settings given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<Variant>,
}

/// The settings that decide recall quality, as the report names them.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub fact_context: bool,
    pub fusion: &'static str,
    /// dense, keyword, filter, entity.
    pub signal_weights: BTreeMap<&'static str, f64>,
    /// relevance, recency, importance, access.
    pub score_weights: [f64; 4],
    pub time_boost: f64,
    pub second_hop: f64,
    pub matching: &'static str,
    /// How many memories the keyword channel scores at most.
    pub keyword_candidates: usize,
    pub spread_sources: bool,
}

impl Settings {
    fn of(recall: &RecallConfig, fact_context: bool, spread_sources: bool) -> Self {
        Self {
            fact_context,
            fusion: recall.fusion.as_str(),
            signal_weights: Signal::WEIGHTED
                .iter()
                .map(|s| s.as_str())
                .zip(recall.signal_weights)
                .collect(),
            score_weights: recall.weights,
            time_boost: recall.time_boost,
            second_hop: recall.second_hop,
            matching: match recall.matching {
                Matching::Stems => "stems",
                Matching::Words => "words",
            },
            keyword_candidates: recall.keyword_candidates,
            spread_sources,
        }
    }
}

/// One setting of a sweep and its scores.
#[derive(Debug, Serialize)]
pub struct Variant {
    pub name: String,
    #[serde(flatten)]
    pub scores: Scores,
    pub per_category: BTreeMap<u8, Scores>,
    pub settings: Settings,
}

#[derive(Default)]
struct Sums {
    r5: f64,
    r10: f64,
    words: f64,
    n: usize,
}

impl Sums {
    fn add(&mut self, r5: f64, r10: f64, words: f64) {
        self.r5 += r5;
        self.r10 += r10;
        self.words += words;
        self.n += 1;
    }

    fn scores(&self) -> Scores {
        let n = self.n.max(1) as f64;
        Scores {
            recall_5: self.r5 / n,
            recall_10: self.r10 / n,
            words_10: self.words / n,
            questions: self.n,
        }
    }
}

/// Share of `evidence` found in the provenance of the first `k` memories.
fn recall_at(evidence: &[String], provenance: &[Vec<String>], k: usize) -> f64 {
    let found: HashSet<&String> = provenance.iter().take(k).flatten().collect();
    let hit = evidence.iter().filter(|e| found.contains(e)).count();
    hit as f64 / evidence.len().max(1) as f64
}

/// A recall setting the sweep compares with the defaults: one technique switched.
struct Switch {
    name: &'static str,
    change: fn(&mut RecallConfig, &mut bool),
}

/// Each technique switched off (or, for one that is off by default, on),
/// then every technique off together, all on the same ingest.
const SWITCHES: &[Switch] = &[
    Switch {
        name: "fusion by RRF instead of by score",
        change: |c, _| c.fusion = Fusion::Rrf,
    },
    Switch {
        name: "signal weights all equal",
        change: |c, _| c.signal_weights = [1.0; 4],
    },
    Switch {
        name: "score weights 0.5,0.2,0.2,0.1 (relevance no longer dominant)",
        change: |c, _| c.weights = [0.5, 0.2, 0.2, 0.1],
    },
    Switch {
        name: "relevance only (no recency, importance, use)",
        change: |c, _| c.weights = [1.0, 0.0, 0.0, 0.0],
    },
    Switch {
        name: "words as written (no stemming)",
        change: |c, _| c.matching = Matching::Words,
    },
    Switch {
        name: "without the time boost",
        change: |c, _| c.time_boost = 0.0,
    },
    Switch {
        name: "second hop switched (on at 0.15 if off, else off)",
        change: |c, _| c.second_hop = if c.second_hop > 0.0 { 0.0 } else { 0.15 },
    },
    Switch {
        name: "without spreading sources",
        change: |_, spread| *spread = false,
    },
    Switch {
        name: "without the entity signal",
        change: |c, _| c.signal_weights[3] = 0.0,
    },
    Switch {
        name: "dense signal only",
        change: |c, _| c.signal_weights = [1.0, 0.0, 0.0, 0.0],
    },
    Switch {
        name: "keyword signal only",
        change: |c, _| c.signal_weights = [0.0, 1.0, 0.0, 0.0],
    },
    Switch {
        name: "every technique off (RRF, 0.5/0.2/0.2/0.1, words, no time boost, no second hop)",
        change: |c, _| {
            c.fusion = Fusion::Rrf;
            c.signal_weights = [1.0; 4];
            c.weights = [0.5, 0.2, 0.2, 0.1];
            c.matching = Matching::Words;
            c.time_boost = 0.0;
            c.second_hop = 0.0;
        },
    },
];

/// Recall settings read from `NAME=value` pairs (separated by spaces) over
/// the process environment, as `--try` takes them.
pub fn tried_config(assignments: &str) -> anyhow::Result<RecallConfig> {
    let mut overrides = std::collections::HashMap::new();
    for pair in assignments.split_whitespace() {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--try {pair:?}: expected NAME=value"))?;
        if !name.starts_with("HINDSIGHT_RECALL_") {
            anyhow::bail!(
                "--try {name}: only recall settings (HINDSIGHT_RECALL_*) can be tried on one ingest"
            );
        }
        overrides.insert(name.to_string(), value.to_string());
    }
    let config =
        Config::from_lookup(|k| overrides.get(k).cloned().or_else(|| std::env::var(k).ok()))?;
    Ok(config.recall)
}

pub async fn run(
    path: &Path,
    k: usize,
    sweep: bool,
    conversations: &[String],
    tries: &[String],
) -> anyhow::Result<Report> {
    let mut data = locomo::load(path)?;
    if !conversations.is_empty() {
        data = data.only(conversations)?;
    }
    let tried: Vec<(String, RecallConfig)> = tries
        .iter()
        .map(|t| Ok((t.clone(), tried_config(t)?)))
        .collect::<anyhow::Result<_>>()?;
    let base = super::setup()?;
    let ingest = Ingest::start(&base, &data, base.fact_context).await?;
    let result = evaluate(&ingest, &data, k, sweep, &tried).await;
    ingest.stop().await?;
    let mut report = result?;
    if sweep {
        // Facts keep their context at ingest: the switch needs an ingest of its own.
        let fact_context = !base.fact_context;
        let other = Ingest::start(&base, &data, fact_context).await?;
        let result = ask(&other.recaller, &data, k, other.seconds, false).await;
        other.stop().await?;
        let r = result?;
        let name = if fact_context {
            "with fact context (a second ingest)"
        } else {
            "without fact context (a second ingest)"
        };
        eprintln!(
            "sweep: {name}: recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0}",
            r.overall.recall_5, r.overall.recall_10, r.overall.words_10
        );
        report.sweep.push(Variant {
            name: name.into(),
            scores: r.overall,
            per_category: r.per_category,
            settings: Settings::of(&base.recall, fact_context, true),
        });
    }
    report.settings = Settings::of(&base.recall, base.fact_context, true);
    Ok(report)
}

/// The pipeline running in a sandbox of its own, with every turn of the data
/// ingested, and a recaller over it.
struct Ingest {
    sandbox: Sandbox,
    ctx: Context,
    shutdown: CancellationToken,
    running: Option<service::Running>,
    recaller: Recaller,
    seconds: f64,
}

impl Ingest {
    async fn start(
        base: &Config,
        data: &locomo::Dataset,
        fact_context: bool,
    ) -> anyhow::Result<Self> {
        let mut config = base.clone();
        config.fact_context = fact_context;
        let sandbox = Sandbox::new(&config, "eval");
        let ctx = Context::boot(sandbox.config.clone()).await?;
        let shutdown = CancellationToken::new();
        match Self::ingest(&ctx, data, &shutdown).await {
            Ok((running, recaller, seconds)) => Ok(Self {
                sandbox,
                ctx,
                shutdown,
                running: Some(running),
                recaller,
                seconds,
            }),
            Err(e) => {
                shutdown.cancel();
                sandbox.remove(&ctx.bus).await?;
                Err(e)
            }
        }
    }

    async fn ingest(
        ctx: &Context,
        data: &locomo::Dataset,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<(service::Running, Recaller, f64)> {
        let index = hindsight_index::open(&ctx.config.index, &ctx.config.data_dir)?;
        let tasks = stages::tasks_with_index(stages::PIPELINE, ctx, Some(index.clone())).await?;
        let running = service::start(ctx, tasks, shutdown.clone()).await?;
        running.readiness.wait().await;
        let started = Instant::now();
        publish_all(
            ctx,
            locomo::TENANT,
            data.turns.iter().map(|t| {
                (
                    format!("{}:{}", locomo::TENANT, t.qualified_id()),
                    t.envelope(),
                )
            }),
        )
        .await?;
        until("every LoCoMo turn persisted and searchable", async || {
            Ok(ctx.store.drained(data.turns.len()).await?)
        })
        .await?;
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            ingest_seconds = seconds,
            "ingest done; asking the questions"
        );
        // Questions do not count as accesses: each would change the next one's scores.
        let recaller = hindsight_gateway::recaller(ctx, Some(index))
            .await?
            .recording_access(false);
        Ok((running, recaller, seconds))
    }

    async fn stop(self) -> anyhow::Result<()> {
        let Self {
            sandbox,
            ctx,
            shutdown,
            running,
            recaller,
            ..
        } = self;
        shutdown.cancel();
        if let Some(running) = running {
            running.wait().await?;
        }
        // The recaller holds the embedded index, which flushes to the data
        // directory when it is dropped: before the directory goes.
        drop(recaller);
        sandbox.remove(&ctx.bus).await?;
        Ok(())
    }
}

async fn evaluate(
    ingest: &Ingest,
    data: &locomo::Dataset,
    k: usize,
    sweep: bool,
    tried: &[(String, RecallConfig)],
) -> anyhow::Result<Report> {
    let recaller = &ingest.recaller;
    let mut report = ask(recaller, data, k, ingest.seconds, false).await?;
    // What expiry takes away: the same questions with memories past their
    // end at the question's date asked for too.
    let with_expired = ask(recaller, data, k, ingest.seconds, true).await?;
    eprintln!(
        "with include: expired: recall@5 {:.3}, recall@10 {:.3}",
        with_expired.overall.recall_5, with_expired.overall.recall_10
    );
    report.tried.push(Variant {
        name: "include: expired".into(),
        scores: with_expired.overall,
        per_category: with_expired.per_category,
        settings: Settings::of(recaller.config(), ingest.ctx.config.fact_context, true),
    });
    for (name, config) in tried {
        let r = ask(
            &recaller.clone().with_config(config.clone()),
            data,
            k,
            ingest.seconds,
            false,
        )
        .await?;
        eprintln!(
            "try: {name}: recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0}; per category recall@10 {}",
            r.overall.recall_5,
            r.overall.recall_10,
            r.overall.words_10,
            r.per_category
                .iter()
                .map(|(c, s)| format!("{c}: {:.3}", s.recall_10))
                .collect::<Vec<_>>()
                .join(", ")
        );
        report.tried.push(Variant {
            name: name.clone(),
            scores: r.overall,
            per_category: r.per_category,
            settings: Settings::of(config, ingest.ctx.config.fact_context, true),
        });
    }
    if sweep {
        for switch in SWITCHES {
            let mut config = recaller.config().clone();
            let mut spread = true;
            (switch.change)(&mut config, &mut spread);
            let variant = recaller
                .clone()
                .with_config(config.clone())
                .spreading_sources(spread);
            let r = ask(&variant, data, k, ingest.seconds, false).await?;
            eprintln!(
                "sweep: {}: recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0}",
                switch.name, r.overall.recall_5, r.overall.recall_10, r.overall.words_10
            );
            report.sweep.push(Variant {
                name: switch.name.to_string(),
                scores: r.overall,
                per_category: r.per_category,
                settings: Settings::of(&config, ingest.ctx.config.fact_context, spread),
            });
        }
    }
    report.memories = sqlx::query_scalar("SELECT count(*) FROM memories")
        .fetch_one(&ingest.ctx.store.pool)
        .await?;
    Ok(report)
}

/// Scores the questions; `include_expired` asks for memories past their end too.
async fn ask(
    recaller: &Recaller,
    data: &locomo::Dataset,
    k: usize,
    ingest_seconds: f64,
    include_expired: bool,
) -> anyhow::Result<Report> {
    let mut all = Sums::default();
    let mut per_category: BTreeMap<u8, Sums> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut degraded = 0;
    for q in &data.questions {
        if !(1..=4).contains(&q.category) || q.evidence.is_empty() {
            continue;
        }
        let evidence: Vec<String> = q
            .evidence
            .iter()
            .map(|e| locomo::qualify(&q.user_id, e))
            .collect();
        let mut req = RecallRequest::new(q.user_id.clone(), q.question.clone());
        req.top_k = Some(k);
        // As the conversation's people would have asked: a plan that had
        // ended by then is past, one still ahead is current.
        req.as_of = Some(q.asked_at);
        if include_expired {
            req.include = vec![Include::Expired];
        }
        let asked = Instant::now();
        let answer = recaller.recall(locomo::TENANT, &req).await?;
        latencies.push(asked.elapsed().as_secs_f64() * 1000.0);
        degraded += usize::from(answer.degraded);
        let provenance: Vec<Vec<String>> = answer
            .memories
            .iter()
            .map(|m| m.provenance.clone())
            .collect();
        // What the reader is given: each memory's content and its context.
        let words: usize = answer
            .memories
            .iter()
            .take(10)
            .map(|m| {
                m.content.split_whitespace().count()
                    + m.context
                        .as_deref()
                        .map_or(0, |c| c.split_whitespace().count())
            })
            .sum();
        let (r5, r10) = (
            recall_at(&evidence, &provenance, 5),
            recall_at(&evidence, &provenance, 10),
        );
        all.add(r5, r10, words as f64);
        per_category
            .entry(q.category)
            .or_default()
            .add(r5, r10, words as f64);
    }
    latencies.sort_by(f64::total_cmp);
    let mut conversations: Vec<String> = data.questions.iter().map(|q| q.user_id.clone()).collect();
    conversations.dedup();
    Ok(Report {
        overall: all.scores(),
        per_category: per_category.iter().map(|(c, s)| (*c, s.scores())).collect(),
        turns: data.turns.len(),
        memories: 0,
        ingest_seconds,
        k,
        recall_p50_ms: percentile(&latencies, 0.5),
        recall_p99_ms: percentile(&latencies, 0.99),
        degraded,
        conversations,
        settings: Settings::of(recaller.config(), true, true),
        sweep: Vec::new(),
        tried: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_at_k_is_the_share_of_evidence_in_the_first_k_provenances() {
        let evidence = vec!["D1:1".to_string(), "D2:2".to_string()];
        let prov = vec![
            vec!["D9:9".to_string()],
            vec!["D2:2".to_string(), "D1:1".to_string()],
        ];
        assert_eq!(recall_at(&evidence, &prov, 1), 0.0);
        assert_eq!(recall_at(&evidence, &prov, 2), 1.0);
        assert_eq!(recall_at(&[], &prov, 2), 0.0);
    }
}
