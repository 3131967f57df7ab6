//! Persist's decision as plain logic: given a new fact and the existing
//! memories near it (read by the stage), create, merge or supersede. The
//! cosine finds the candidates and, where the embedder reads the fact's
//! script, gates them; what the words say of them decides
//! ([`hindsight_text::frame`]), in every language alike.

use std::collections::HashSet;

use hindsight_core::embedding::cosine;
use hindsight_store::memories::Candidate;
use hindsight_text::{
    frame::{Reading, Relation},
    terms::{self, Matching},
};
use uuid::Uuid;

/// What a fact in a script the model does not read is compared with: the
/// memories sharing the most terms with it and its nearest vectors (`ids`),
/// found by the stage, and its terms, to pick among memories made since.
#[derive(Debug, Clone, Default)]
pub struct Unread {
    pub terms: HashSet<String>,
    pub ids: HashSet<Uuid>,
}

/// How many of the memories made in the same group an unread fact is
/// compared with (those sharing the most terms with it).
const RECENT: usize = 5;

impl Unread {
    pub fn new(content: &str) -> Self {
        Self {
            terms: terms::query_terms(content, Matching::Words)
                .into_iter()
                .collect(),
            ids: HashSet::new(),
        }
    }

    /// The candidates to decide among: its own, those of the same content,
    /// and the [`RECENT`] memories `made` in this group sharing the most
    /// terms with it. Without a cosine to gate, the words would otherwise
    /// read every memory of the user against every fact.
    pub fn pool(
        &self,
        candidates: &[Candidate],
        made: &[(Uuid, HashSet<String>)],
        key: &str,
    ) -> Vec<Candidate> {
        let mut recent: Vec<(usize, Uuid)> = made
            .iter()
            .map(|(id, t)| (t.intersection(&self.terms).count(), *id))
            .filter(|(shared, _)| *shared > 0)
            .collect();
        recent.sort_by_key(|(shared, _)| std::cmp::Reverse(*shared));
        recent.truncate(RECENT);
        candidates
            .iter()
            .filter(|c| {
                c.content_key == key
                    || self.ids.contains(&c.id)
                    || recent.iter().any(|(_, id)| *id == c.id)
            })
            .cloned()
            .collect()
    }
}

/// What to do with a new fact.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Create,
    Merge {
        into: Uuid,
        similarity: f32,
        content: String,
        take_vector: bool,
    },
    Supersede {
        old: Uuid,
        similarity: f32,
    },
}

/// How far below the merge threshold a contradiction is still looked for: a
/// changed value makes two statements less alike than a repeat does.
pub const CONTRADICTION_MARGIN: f32 = 0.10;

/// Decides against the candidates (active memories of the same tenant, user
/// and model). The same content (by its key) merges whatever the cosine.
/// Otherwise the words decide what the vectors only suggest: a candidate is
/// superseded when the new fact negates it or gives one of its one-valued
/// attributes a new value (same subject, same attribute), and merged into
/// when the new fact restates it ([`Reading::restated_by`]: the same, or
/// with a detail added). Anything else is a new memory.
///
/// When the embedder `reads` the fact's script, the cosine gates too: a
/// supersede needs `threshold - CONTRADICTION_MARGIN`, a merge `threshold`.
/// When it does not, its cosine is noise (all-MiniLM-L6-v2 puts any two
/// Chinese sentences near each other) and the words alone decide.
pub fn decide(
    content: &str,
    key: &str,
    vector: &[f32],
    candidates: &[Candidate],
    threshold: f32,
    reads: bool,
) -> Decision {
    if let Some(same) = candidates.iter().find(|c| c.content_key == key) {
        return Decision::Merge {
            into: same.id,
            similarity: 1.0,
            content: same.content.clone(),
            take_vector: false,
        };
    }
    // A gate no cosine falls below, for a script the embedder does not read.
    let threshold = if reads { threshold } else { f32::NEG_INFINITY };
    let mut near: Vec<(&Candidate, f32)> = candidates
        .iter()
        .map(|c| (c, cosine(vector, &c.embedding)))
        .filter(|(_, s)| *s >= threshold - CONTRADICTION_MARGIN)
        .collect();
    near.sort_by(|(_, x), (_, y)| y.total_cmp(x));
    let new = Reading::new(content);
    // Each candidate read, and its relation to the new fact, once.
    let related: Vec<(&Candidate, f32, Reading, Relation)> = near
        .into_iter()
        .map(|(c, s)| {
            let old = Reading::new(&c.content);
            let relation = old.relation(&new);
            (c, s, old, relation)
        })
        .collect();
    if let Some((c, similarity, ..)) = related
        .iter()
        .find(|(.., r)| matches!(r, Relation::Changes(_) | Relation::Negates))
    {
        return Decision::Supersede {
            old: c.id,
            similarity: *similarity,
        };
    }
    let merge = related
        .iter()
        .find(|(_, s, old, r)| *s >= threshold && old.restates(&new, *r))
        .map(|(c, s, _, r)| (c, s, *r));
    match merge {
        Some((c, similarity, relation)) => {
            let take_new = matches!(
                relation,
                Relation::Refines {
                    new_is_fuller: true
                }
            );
            Decision::Merge {
                into: c.id,
                similarity: *similarity,
                content: if take_new {
                    content.to_string()
                } else {
                    c.content.clone()
                },
                take_vector: take_new,
            }
        }
        None => Decision::Create,
    }
}

#[cfg(test)]
mod tests {
    use hindsight_text::statement::content_key;

    use super::*;

    #[test]
    fn decisions() {
        let c = |id: u128, content: &str, v: Vec<f32>| Candidate {
            id: Uuid::from_u128(id),
            content: content.into(),
            content_key: content_key(content),
            embedding: v,
            importance: 0.5,
            confidence: 0.9,
            entities: vec![],
            context: None,
        };
        let existing = vec![
            c(1, "Tom prefers red", vec![1.0, 0.0]),
            c(2, "Tom has a dog", vec![0.0, 1.0]),
        ];
        assert_eq!(
            decide(
                "Tom has a cat",
                "tom has a cat",
                &[0.6, 0.8],
                &existing,
                0.85,
                true
            ),
            Decision::Create
        );
        assert!(
            matches!(decide("TOM HAS A DOG!", "tom has a dog", &[1.0, 0.0], &existing, 0.85, true), Decision::Merge { into, .. } if into == Uuid::from_u128(2))
        );
        assert!(
            matches!(decide("Tom now prefers blue", "tom now prefers blue", &[0.99, 0.14], &existing, 0.85, true), Decision::Supersede { old, .. } if old == Uuid::from_u128(1))
        );
    }

    /// The embedder reads no Chinese: every sentence lands near every other.
    /// The words alone keep unrelated facts and other people apart.
    #[test]
    fn near_vectors_of_unrelated_statements_neither_merge_nor_supersede() {
        let c = |id: u128, content: &str| Candidate {
            id: Uuid::from_u128(id),
            content: content.into(),
            content_key: content_key(content),
            embedding: vec![1.0, 0.0],
            importance: 0.5,
            confidence: 0.9,
            entities: vec![],
            context: None,
        };
        let existing = vec![c(1, "Li每周六去游泳。"), c(2, "Li的妹妹住在北京。")];
        let near = [0.99, 0.14];
        for unrelated in ["Li喜欢喝绿茶。", "Li喜欢喝咖啡。", "Li的哥哥住在广州。"]
        {
            assert_eq!(
                decide(
                    unrelated,
                    &content_key(unrelated),
                    &near,
                    &existing,
                    0.85,
                    false
                ),
                Decision::Create,
                "{unrelated}"
            );
        }
        assert!(matches!(
            decide("Li的妹妹现在住在上海。", "", &near, &existing, 0.85, false),
            Decision::Supersede { old, .. } if old == Uuid::from_u128(2)
        ));
        assert!(matches!(
            decide("Li的妹妹住在北京朝阳区。", "", &near, &existing, 0.85, false),
            Decision::Merge { into, take_vector: true, .. } if into == Uuid::from_u128(2)
        ));
        // Nor does a far vector keep the words from deciding; were the
        // script read, it would.
        let far = [0.0, 1.0];
        assert!(matches!(
            decide("Li的妹妹现在住在上海。", "", &far, &existing, 0.85, false),
            Decision::Supersede { old, .. } if old == Uuid::from_u128(2)
        ));
        assert_eq!(
            decide("Li的妹妹现在住在上海。", "", &far, &existing, 0.85, true),
            Decision::Create
        );
    }
}
