//! Scoring: every candidate by every signal, whichever channel proposed it,
//! fused; and a row as the answer shows it.

use chrono::{DateTime, Utc};
use std::collections::HashMap;

use hindsight_core::embedding::cosine;
use hindsight_index::Hit;
use hindsight_shared::config::RecallConfig;
use hindsight_store::row::MemoryRow;
use uuid::Uuid;

use crate::{
    channels::Dense,
    rank::{
        fusion::{self, Fused, Ranked},
        memory::{self, RecalledMemory},
    },
    sql::{keyword::KeywordScorer, rows::RecallRow},
};

/// Scores every candidate by every signal, whichever channel proposed it.
pub(crate) struct Scoring<'a> {
    pub(crate) config: &'a RecallConfig,
    pub(crate) dense: &'a Dense,
    pub(crate) keyword: &'a KeywordScorer,
    pub(crate) filtered: &'a [Uuid],
    pub(crate) entities: &'a [String],
}

impl Scoring<'_> {
    /// The candidates fused, best first; with the second hop's vector (and
    /// what it found), its cosine is one more signal. Cosines come from the
    /// index where it scored the candidate, else from the candidate's vector.
    pub(crate) fn fuse(
        &self,
        ids: &[Uuid],
        rows: &HashMap<Uuid, RecallRow>,
        hop: Option<(&[f32], &[Hit])>,
    ) -> Vec<Fused> {
        let [dense_w, keyword_w, filter_w, entity_w] = self.config.signal_weights;
        let cosines = |vector: &[f32], weight: f64, index_hits: &[Hit]| {
            let mut values: HashMap<Uuid, f64> = index_hits
                .iter()
                .map(|h| (h.id, f64::from(h.score)))
                .collect();
            if !vector.is_empty() {
                for (id, row) in rows {
                    if let Some(e) = row.embedding.as_deref().filter(|e| e.len() == vector.len()) {
                        values.insert(*id, f64::from(cosine(vector, e)));
                    }
                }
            }
            Ranked { weight, values }
        };
        let mut signals = vec![
            cosines(&self.dense.vector, dense_w, &self.dense.hits),
            Ranked {
                weight: keyword_w,
                values: rows
                    .iter()
                    .map(|(id, r)| (*id, self.keyword.score(&r.terms)))
                    .collect(),
            },
            Ranked {
                weight: filter_w,
                values: self
                    .filtered
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (*id, 1.0 / (i + 1) as f64))
                    .collect(),
            },
            Ranked {
                weight: entity_w,
                values: rows
                    .iter()
                    .map(|(id, r)| {
                        let shared = self
                            .entities
                            .iter()
                            .filter(|e| r.memory.entities.contains(e))
                            .count();
                        (*id, shared as f64)
                    })
                    .collect(),
            },
        ];
        if let Some((vector, hits)) = hop {
            signals.push(cosines(vector, self.config.second_hop, hits));
        }
        fusion::fuse(ids, &signals, self.config.fusion)
    }
}

/// A row as the answer shows it.
/// A row as recalled as of `as_of`.
pub fn recalled(row: &MemoryRow, score: f64, as_of: DateTime<Utc>) -> RecalledMemory {
    RecalledMemory {
        id: row.id,
        content: row.content.clone(),
        context: row.context.as_ref().map(memory::shown_context),
        fact_type: row.fact_type,
        status: row.status,
        importance: row.importance,
        confidence: row.confidence,
        source: row.source.clone(),
        trust: row.source_trust.clone(),
        flags: row.flags.clone(),
        inferred: row.inferred,
        occurred_at: row.occurred_at,
        expires_at: row.expires_at,
        expired: row.expired_at(as_of),
        created_at: row.created_at,
        provenance: row.provenance.clone(),
        score,
        conflicts_with: Vec::new(),
    }
}
