//! Reciprocal rank fusion of the recall channels, then the final score:
//! relevance, recency, importance and use, with configurable weights.
//!
//! RRF only sees ranks, so channels whose raw scores are not comparable
//! (cosine, BM25, entity overlap) fuse without calibration. Its raw values are
//! compressed (1/61 for a first rank, 1/70 for a tenth), so relevance is the
//! fused value scaled to [0, 1] over the candidates; otherwise importance and
//! recency would outweigh it whatever the weights say.

use std::collections::HashMap;

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
            relevance: 0.5,
            recency: 0.2,
            importance: 0.2,
            access: 0.1,
            half_life_hours: 168.0,
        }
    }
}

/// A candidate after fusion: its 1-based rank in each channel (None when the
/// channel did not return it) and its fused value.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub id: Uuid,
    pub ranks: Vec<Option<usize>>,
    pub rrf: f64,
}

/// Fuses the channels' rankings (best first, one list per channel), best first.
/// Ties go to the better single rank, then to the id, so the order is stable.
pub fn rrf(channels: &[Vec<Uuid>], k: f64) -> Vec<Fused> {
    let mut by_id: HashMap<Uuid, Fused> = HashMap::new();
    for (c, ranking) in channels.iter().enumerate() {
        for (i, id) in ranking.iter().enumerate() {
            let entry = by_id.entry(*id).or_insert_with(|| Fused {
                id: *id,
                ranks: vec![None; channels.len()],
                rrf: 0.0,
            });
            // A channel listing an id twice counts it once, at its best rank.
            if entry.ranks[c].is_none() {
                entry.ranks[c] = Some(i + 1);
                entry.rrf += 1.0 / (k + (i + 1) as f64);
            }
        }
    }
    let best = |f: &Fused| {
        f.ranks
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or(usize::MAX)
    };
    let mut fused: Vec<Fused> = by_id.into_values().collect();
    fused.sort_by(|a, b| {
        b.rrf
            .total_cmp(&a.rrf)
            .then_with(|| best(a).cmp(&best(b)))
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

/// The fused value scaled to [0, 1] over the candidates (1 when all are equal).
pub fn relevance(rrf: f64, min: f64, max: f64) -> f64 {
    if max - min <= f64::EPSILON {
        1.0
    } else {
        ((rrf - min) / (max - min)).clamp(0.0, 1.0)
    }
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

    #[test]
    fn agreement_between_channels_beats_one_first_rank() {
        let dense = vec![id(1), id(2), id(3)];
        let keyword = vec![id(4), id(2)];
        let fused = rrf(&[dense, keyword], RRF_K);
        assert_eq!(fused[0].id, id(2), "second in both beats first in one");
        assert_eq!(fused[0].ranks, vec![Some(2), Some(2)]);
        assert!((fused[0].rrf - 2.0 / 62.0).abs() < 1e-12);
        // 1 and 4 are both first in one channel: the id breaks the tie.
        assert_eq!(fused[1].id, id(1));
        assert_eq!(fused[2].id, id(4));
        assert_eq!(fused[3].ranks, vec![Some(3), None]);
    }

    #[test]
    fn a_repeated_id_counts_once_per_channel() {
        let fused = rrf(&[vec![id(1), id(1)]], RRF_K);
        assert_eq!(fused.len(), 1);
        assert!((fused[0].rrf - 1.0 / 61.0).abs() < 1e-12);
    }

    #[test]
    fn no_channels_or_empty_channels_fuse_to_nothing() {
        assert!(rrf(&[], RRF_K).is_empty());
        assert!(rrf(&[vec![], vec![]], RRF_K).is_empty());
    }

    #[test]
    fn the_parts_follow_the_documented_formula() {
        assert_eq!(recency(0.0, 168.0), 1.0);
        assert!((recency(168.0, 168.0) - 0.5).abs() < 1e-12);
        assert_eq!(recency(-5.0, 168.0), 1.0);
        assert_eq!(access(3), 0.3);
        assert_eq!(access(50), 1.0);
        assert_eq!(relevance(0.5, 0.5, 0.5), 1.0);
        assert_eq!(relevance(0.25, 0.0, 1.0), 0.25);
        let p = score(&Weights::default(), 1.0, 168.0, 0.8, 5);
        assert!((p.score - (0.5 + 0.2 * 0.5 + 0.2 * 0.8 + 0.1 * 0.5)).abs() < 1e-12);
    }
}
