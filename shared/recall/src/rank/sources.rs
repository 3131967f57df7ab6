//! What the user said outranks what a tool or a document said about the same
//! thing. A poisoning turn the screen missed most often comes from content
//! the agent fetched; where such a memory and one the user stated give the
//! same attribute (the same frame, in the words of [`hindsight_text::statement`]), the
//! user's comes first whatever the scores (the same frame: most content
//! words shared, or a few words differing with the value among them). Both stay in the answer, flagged
//! as conflicting when they disagree.

use super::memory::RecalledMemory;
use hindsight_text::statement::Statement;

/// Whether a memory came from content rather than from a person.
pub fn from_content(m: &RecalledMemory) -> bool {
    matches!(m.source.as_deref(), Some("tool" | "external"))
}

/// Reorders `ranked` (best first): each memory from a tool or a document that
/// ranks above a user-stated memory of the same frame moves to just after
/// the last such memory. The rest keep their order.
pub fn users_word_first(ranked: Vec<RecalledMemory>) -> Vec<RecalledMemory> {
    if !ranked.iter().any(from_content) {
        return ranked;
    }
    let statements: Vec<Statement> = ranked.iter().map(|m| Statement::new(&m.content)).collect();
    let n = ranked.len();
    // Where each memory goes: its own place, or after the last user-stated
    // memory of its frame (ties keep the original order).
    let mut keys: Vec<(usize, usize)> = (0..n).map(|i| (i, 0)).collect();
    for i in (0..n).filter(|&i| from_content(&ranked[i])) {
        if let Some(last) = (i + 1..n)
            .filter(|&j| {
                ranked[j].source.as_deref() == Some("user")
                    && (statements[i].same_frame(&statements[j])
                        || statements[i].value_differs(&statements[j]))
            })
            .max()
        {
            keys[i] = (last, 1);
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (keys[i], i));
    let mut slots: Vec<Option<RecalledMemory>> = ranked.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(content: &str, source: &str, score: f64) -> RecalledMemory {
        RecalledMemory {
            source: Some(source.into()),
            score,
            ..crate::rank::memory::sample(content)
        }
    }

    #[test]
    fn a_tool_memory_never_outranks_the_users_word_on_the_same_thing() {
        let ranked = vec![
            memory("Ana's blood type is AB negative", "tool", 0.9),
            memory("Ana likes jazz", "user", 0.8),
            memory("Ana's blood type is O positive", "user", 0.7),
            memory("Ana lives in Porto", "external", 0.6),
        ];
        let out: Vec<String> = users_word_first(ranked)
            .into_iter()
            .map(|m| m.content)
            .collect();
        assert_eq!(
            out,
            [
                "Ana likes jazz",
                "Ana's blood type is O positive",
                "Ana's blood type is AB negative",
                "Ana lives in Porto",
            ]
        );
    }

    #[test]
    fn without_a_user_memory_of_the_same_frame_nothing_moves() {
        let ranked = vec![
            memory("The report says the meeting is on Monday", "tool", 0.9),
            memory("Ana likes jazz", "user", 0.8),
        ];
        let out = users_word_first(ranked.clone());
        assert_eq!(out, ranked);
    }
}
