//! Redundancy: facts extracted from the same sentence often rank together
//! (one turn yields two or three). A memory whose every source turn is
//! already behind a better-ranked memory adds little the reader does not
//! have; it moves after the memories that bring a new source, so a short
//! answer covers more of what was said. Nothing is dropped: with room in the
//! budget, the redundant ones still come.

use std::collections::HashSet;

use super::memory::RecalledMemory;

/// Reorders `ranked` (best first): memories bringing a new source turn keep
/// their order, the others follow in theirs.
pub fn spread_sources(ranked: Vec<RecalledMemory>) -> Vec<RecalledMemory> {
    let mut covered: HashSet<String> = HashSet::new();
    let (mut fresh, mut redundant) = (Vec::with_capacity(ranked.len()), Vec::new());
    for m in ranked {
        let new_source =
            m.provenance.is_empty() || m.provenance.iter().any(|t| !covered.contains(t));
        if new_source {
            covered.extend(m.provenance.iter().cloned());
            fresh.push(m);
        } else {
            redundant.push(m);
        }
    }
    fresh.extend(redundant);
    fresh
}

#[cfg(test)]
mod tests {

    use super::*;

    fn memory(content: &str, turns: &[&str]) -> RecalledMemory {
        RecalledMemory {
            provenance: turns.iter().map(|t| t.to_string()).collect(),
            ..crate::rank::memory::sample(content)
        }
    }

    #[test]
    fn a_second_fact_of_the_same_turn_follows_the_facts_of_other_turns() {
        let ranked = vec![
            memory("a1", &["t1"]),
            memory("a2", &["t1"]),
            memory("b", &["t2"]),
            memory("ab", &["t1", "t2"]),
            memory("c", &["t3", "t1"]),
        ];
        let order: Vec<String> = spread_sources(ranked)
            .into_iter()
            .map(|m| m.content)
            .collect();
        assert_eq!(order, ["a1", "b", "c", "a2", "ab"]);
    }
}
