//! Persist's decision as plain logic: given a new fact and the existing
//! memories near it (read by the stage), create, merge or supersede.

use hindsight_core::embedding::cosine;
use hindsight_store::memories::Candidate;
use hindsight_text::statement::{contradicts, merged_content, value_differs};
use uuid::Uuid;

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
/// and model). Exact and normalised duplicates merge whatever their cosine;
/// a contradiction supersedes; a near-duplicate merges unless it states
/// another value of the same thing.
pub fn decide(
    content: &str,
    key: &str,
    vector: &[f32],
    candidates: &[Candidate],
    threshold: f32,
) -> Decision {
    if let Some(same) = candidates.iter().find(|c| c.content_key == key) {
        return Decision::Merge {
            into: same.id,
            similarity: 1.0,
            content: same.content.clone(),
            take_vector: false,
        };
    }
    let mut near: Vec<(&Candidate, f32)> = candidates
        .iter()
        .map(|c| (c, cosine(vector, &c.embedding)))
        .filter(|(_, s)| *s >= threshold - CONTRADICTION_MARGIN)
        .collect();
    near.sort_by(|(_, x), (_, y)| y.total_cmp(x));
    if let Some((c, similarity)) = near.iter().find(|(c, _)| contradicts(&c.content, content)) {
        return Decision::Supersede {
            old: c.id,
            similarity: *similarity,
        };
    }
    match near.first() {
        Some((c, similarity))
            if *similarity >= threshold && !value_differs(&c.content, content) =>
        {
            let (content, take_vector) = merged_content(&c.content, content);
            Decision::Merge {
                into: c.id,
                similarity: *similarity,
                content,
                take_vector,
            }
        }
        _ => Decision::Create,
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
                0.85
            ),
            Decision::Create
        );
        assert!(
            matches!(decide("TOM HAS A DOG!", "tom has a dog", &[1.0, 0.0], &existing, 0.85), Decision::Merge { into, .. } if into == Uuid::from_u128(2))
        );
        assert!(
            matches!(decide("Tom now prefers blue", "tom now prefers blue", &[0.99, 0.14], &existing, 0.85), Decision::Supersede { old, .. } if old == Uuid::from_u128(1))
        );
    }
}
