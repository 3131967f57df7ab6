//! `hindsight eval locomo`: the protocol of ../shared/eval/README.md through
//! the real pipeline, started in-process in a sandbox of its own (namespace,
//! database, data directory), removed afterwards.

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    time::Instant,
};

use hindsight_recall::{RecallRequest, Recaller};
use hindsight_shared::{
    recall::fusion::Weights,
    sandbox::Sandbox,
    service::{self, Context},
};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::bench::{percentile, publish_all, until};
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
    /// With `--sweep`: the same questions under other recall settings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<Variant>,
}

/// One setting of a sweep and its scores.
#[derive(Debug, Serialize)]
pub struct Variant {
    pub name: String,
    #[serde(flatten)]
    pub scores: Scores,
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

pub async fn run(path: &Path, k: usize, sweep: bool) -> anyhow::Result<Report> {
    let data = locomo::load(path)?;
    let base = super::setup()?;
    let sandbox = Sandbox::new(&base, "eval");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let shutdown = CancellationToken::new();
    let result = evaluate(&ctx, &data, k, sweep, &shutdown).await;
    shutdown.cancel();
    sandbox.remove(&ctx.bus).await?;
    result
}

async fn evaluate(
    ctx: &Context,
    data: &locomo::Dataset,
    k: usize,
    sweep: bool,
    shutdown: &CancellationToken,
) -> anyhow::Result<Report> {
    let index = hindsight_index::open(&ctx.config)?;
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
    let ingest_seconds = started.elapsed().as_secs_f64();
    tracing::info!(ingest_seconds, "ingest done; asking the questions");

    // Questions do not count as accesses: each would change the next one's scores.
    let recaller = hindsight_gateway::recaller(ctx, Some(index))
        .await?
        .recording_access(false);
    let report = ask(&recaller, data, k, ingest_seconds).await;
    let mut variants = Vec::new();
    if sweep && report.is_ok() {
        let w = recaller.weights();
        let relevance = Weights {
            relevance: 1.0,
            recency: 0.0,
            importance: 0.0,
            access: 0.0,
            ..w
        };
        let settings = [
            ("without spreading sources", w, false, [true; 4]),
            ("relevance only", relevance, true, [true; 4]),
            (
                "dense only, relevance only",
                relevance,
                true,
                [true, false, false, false],
            ),
            (
                "keyword only, relevance only",
                relevance,
                true,
                [false, true, false, false],
            ),
            (
                "without the entity channel",
                w,
                true,
                [true, true, true, false],
            ),
        ];
        for (name, weights, spread, channels) in settings {
            let variant = recaller
                .clone()
                .with_weights(weights)
                .spreading_sources(spread)
                .with_channels(channels);
            let r = ask(&variant, data, k, ingest_seconds).await?;
            eprintln!(
                "sweep: {name}: recall@5 {:.3}, recall@10 {:.3}, words@10 {:.0}",
                r.overall.recall_5, r.overall.recall_10, r.overall.words_10
            );
            variants.push(Variant {
                name: name.to_string(),
                scores: r.overall,
            });
        }
    }
    shutdown.cancel();
    running.wait().await?;
    let mut report = report?;
    report.sweep = variants;
    report.memories = sqlx::query_scalar("SELECT count(*) FROM memories")
        .fetch_one(&ctx.store.pool)
        .await?;
    Ok(report)
}

async fn ask(
    recaller: &Recaller,
    data: &locomo::Dataset,
    k: usize,
    ingest_seconds: f64,
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
        let asked = Instant::now();
        let answer = recaller.recall(locomo::TENANT, &req).await?;
        latencies.push(asked.elapsed().as_secs_f64() * 1000.0);
        degraded += usize::from(answer.degraded);
        let provenance: Vec<Vec<String>> = answer
            .memories
            .iter()
            .map(|m| m.provenance.clone())
            .collect();
        let words: usize = answer
            .memories
            .iter()
            .take(10)
            .map(|m| m.content.split_whitespace().count())
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
        sweep: Vec::new(),
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
