//! Fusing the recall signals into one relevance, then the final score:
//! relevance first, recency, importance and use to order near-ties.
//!
//! The channels (dense, keyword, structured filter, entity) propose
//! candidates; every candidate is then scored by every signal, so a memory one
//! channel found is not penalised for falling just outside another channel's
//! depth. Two ways to fuse, [`Fusion`]:
//!
//! - **Score** (the default): each signal divided by its best value among the
//!   candidates, weighted, summed, divided by the weights of the signals that
//!   found anything. A strong match on one signal counts as strong: a memory
//!   the keyword channel finds far better than any other outranks one that is
//!   merely second in both, which RRF gets the other way round.
//! - **RRF** (reciprocal rank fusion, k = 60): ranks only, weighted, scaled by
//!   the best possible value. Kept for comparison (`eval locomo --sweep`).
//!
//! Either way relevance lies in [0, 1] (1: best on every signal that answered).

use std::collections::HashMap;

use hindsight_core::signal::Fusion;
use uuid::Uuid;

/// RRF's k: how much a first rank counts over lower ones (60, as in the literature).
pub const RRF_K: f64 = 60.0;

/// The weights of the final score and the recency half-life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub relevance: f64,
    pub recency: f64,
    pub importance: f64,
    pub access: f64,
    pub half_life_hours: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            relevance: 0.85,
            recency: 0.05,
            importance: 0.05,
            access: 0.05,
            half_life_hours: 168.0,
        }
    }
}

/// One signal's values for the candidates it can score (higher is better;
/// absent or ≤ 0 means "no evidence"), and its weight.
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    pub weight: f64,
    pub values: HashMap<Uuid, f64>,
}

/// A candidate after fusion: its 1-based rank on each signal (None when the
/// signal gave it nothing) and its relevance in [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub id: Uuid,
    pub ranks: Vec<Option<usize>>,
    pub relevance: f64,
}

/// Each signal's ranking of its candidates, best first (ties by id).
fn ranks(signal: &Ranked) -> HashMap<Uuid, usize> {
    let mut scored: Vec<(Uuid, f64)> = signal
        .values
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(id, v)| (*id, *v))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scored
        .into_iter()
        .enumerate()
        .map(|(i, (id, _))| (id, i + 1))
        .collect()
}

/// Fuses the signals over `candidates`, best first; ties go to the better
/// single rank, then to the id, so the order is stable.
pub fn fuse(candidates: &[Uuid], signals: &[Ranked], fusion: Fusion) -> Vec<Fused> {
    let ranked: Vec<HashMap<Uuid, usize>> = signals.iter().map(ranks).collect();
    let answering: Vec<bool> = ranked.iter().map(|r| !r.is_empty()).collect();
    let best: Vec<f64> = signals
        .iter()
        .map(|s| s.values.values().copied().fold(0.0, f64::max))
        .collect();
    let total: f64 = signals
        .iter()
        .zip(&answering)
        .filter(|(_, a)| **a)
        .map(|(s, _)| s.weight.max(0.0))
        .sum();
    let mut seen = std::collections::HashSet::new();
    let mut fused: Vec<Fused> = candidates
        .iter()
        .filter(|id| seen.insert(**id))
        .map(|id| {
            let ranks: Vec<Option<usize>> = ranked.iter().map(|r| r.get(id).copied()).collect();
            let mut sum = 0.0;
            for (s, signal) in signals.iter().enumerate() {
                let w = signal.weight.max(0.0);
                sum += match (fusion, ranks[s]) {
                    (_, None) => 0.0,
                    (Fusion::Score, Some(_)) => {
                        w * signal.values.get(id).copied().unwrap_or(0.0) / best[s]
                    }
                    (Fusion::Rrf, Some(r)) => w * (RRF_K + 1.0) / (RRF_K + r as f64),
                };
            }
            Fused {
                id: *id,
                ranks,
                relevance: if total > 0.0 { sum / total } else { 0.0 },
            }
        })
        .collect();
    let best_rank = |f: &Fused| {
        f.ranks
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or(usize::MAX)
    };
    fused.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| best_rank(a).cmp(&best_rank(b)))
            .then_with(|| a.id.cmp(&b.id))
    });
    fused
}

/// Each part of a candidate's score, kept so `explain` can show it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Parts {
    pub relevance: f64,
    pub recency: f64,
    pub importance: f64,
    pub access: f64,
    pub score: f64,
}

/// 1 now, ½ after one half-life; a time in the future counts as now.
pub fn recency(age_hours: f64, half_life_hours: f64) -> f64 {
    if half_life_hours <= 0.0 {
        return 0.0;
    }
    0.5f64.powf(age_hours.max(0.0) / half_life_hours)
}

/// min(1, access_count / 10).
pub fn access(count: i64) -> f64 {
    (count.max(0) as f64 / 10.0).min(1.0)
}

/// The final score from its inputs.
pub fn score(w: &Weights, relevance: f64, age_hours: f64, importance: f64, accesses: i64) -> Parts {
    let recency = recency(age_hours, w.half_life_hours);
    let importance = importance.clamp(0.0, 1.0);
    let access = access(accesses);
    Parts {
        relevance,
        recency,
        importance,
        access,
        score: w.relevance * relevance
            + w.recency * recency
            + w.importance * importance
            + w.access * access,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn signal(weight: f64, values: &[(u128, f64)]) -> Ranked {
        Ranked {
            weight,
            values: values.iter().map(|(i, v)| (id(*i), *v)).collect(),
        }
    }

    fn order(fused: &[Fused]) -> Vec<Uuid> {
        fused.iter().map(|f| f.id).collect()
    }

    #[test]
    fn a_clearly_better_match_on_one_signal_beats_being_second_on_both() {
        // 1 matches the query's words far better than anything and is fifth
        // on the dense signal; 2 is second on both.
        let dense = signal(
            0.5,
            &[(1, 0.50), (2, 0.61), (3, 0.62), (4, 0.60), (5, 0.59)],
        );
        let keyword = signal(0.5, &[(1, 12.0), (2, 4.0), (3, 1.0)]);
        let candidates = [id(1), id(2), id(3), id(4), id(5)];
        let by_score = fuse(
            &candidates,
            &[dense.clone(), keyword.clone()],
            Fusion::Score,
        );
        assert_eq!(order(&by_score), [id(1), id(2), id(3), id(4), id(5)]);
        let by_rrf = fuse(&candidates, &[dense, keyword], Fusion::Rrf);
        let position = |fused: &[Fused], n| fused.iter().position(|f| f.id == id(n));
        assert!(
            position(&by_rrf, 1) > position(&by_rrf, 2),
            "RRF sees ranks only: second on both beats the far better match"
        );
    }

    #[test]
    fn weights_decide_between_signals_that_disagree() {
        let dense = |w| signal(w, &[(1, 1.0), (2, 0.5)]);
        let keyword = |w| signal(w, &[(1, 1.0), (2, 4.0)]);
        let candidates = [id(1), id(2)];
        let dense_heavy = fuse(&candidates, &[dense(0.9), keyword(0.1)], Fusion::Score);
        assert_eq!(dense_heavy[0].id, id(1));
        let keyword_heavy = fuse(&candidates, &[dense(0.1), keyword(0.9)], Fusion::Score);
        assert_eq!(keyword_heavy[0].id, id(2));
        // A signal with weight 0 changes nothing.
        let off = fuse(&candidates, &[dense(1.0), keyword(0.0)], Fusion::Score);
        assert_eq!(off[0].id, id(1));
        assert!((off[0].relevance - 1.0).abs() < 1e-12);
    }

    #[test]
    fn relevance_is_one_for_the_best_on_every_answering_signal() {
        let dense = signal(0.5, &[(1, 0.8), (2, 0.4)]);
        let silent = signal(0.5, &[]);
        let fused = fuse(&[id(1), id(2)], &[dense, silent], Fusion::Score);
        assert!((fused[0].relevance - 1.0).abs() < 1e-12, "{fused:?}");
        assert!((fused[1].relevance - 0.5).abs() < 1e-12);
        assert_eq!(fused[0].ranks, vec![Some(1), None]);
        let rrf = fuse(&[id(1)], &[signal(1.0, &[(1, 3.0)])], Fusion::Rrf);
        assert!((rrf[0].relevance - 1.0).abs() < 1e-12);
    }

    #[test]
    fn candidates_without_evidence_rank_last_and_repeats_count_once() {
        let fused = fuse(
            &[id(3), id(1), id(1)],
            &[signal(1.0, &[(1, 2.0)])],
            Fusion::Score,
        );
        assert_eq!(order(&fused), [id(1), id(3)]);
        assert_eq!(fused[1].relevance, 0.0);
        assert!(fuse(&[], &[signal(1.0, &[])], Fusion::Rrf).is_empty());
    }

    #[test]
    fn the_parts_follow_the_documented_formula() {
        assert_eq!(recency(0.0, 168.0), 1.0);
        assert!((recency(168.0, 168.0) - 0.5).abs() < 1e-12);
        assert_eq!(recency(-5.0, 168.0), 1.0);
        assert_eq!(access(3), 0.3);
        assert_eq!(access(50), 1.0);
        let w = Weights {
            relevance: 0.5,
            recency: 0.2,
            importance: 0.2,
            access: 0.1,
            half_life_hours: 168.0,
        };
        let p = score(&w, 1.0, 168.0, 0.8, 5);
        assert!((p.score - (0.5 + 0.2 * 0.5 + 0.2 * 0.8 + 0.1 * 0.5)).abs() < 1e-12);
    }

    #[test]
    fn by_default_importance_recency_and_use_only_order_near_ties() {
        let w = Weights::default();
        // A clearly more relevant memory (0.2 ahead) is not overtaken by one
        // that is new, important and much used.
        let relevant = score(&w, 0.9, 24.0 * 365.0, 0.1, 0);
        let favoured = score(&w, 0.7, 0.0, 1.0, 50);
        assert!(relevant.score > favoured.score);
        // Near-equal relevance: the important one comes first.
        let a = score(&w, 0.80, 1000.0, 0.9, 0);
        let b = score(&w, 0.81, 1000.0, 0.2, 0);
        assert!(a.score > b.score);
    }
}
