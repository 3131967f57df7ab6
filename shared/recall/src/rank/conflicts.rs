//! Conflicting memories are flagged, never silently resolved: when an answer
//! holds two memories that state different values of the same thing, each
//! names the other in `conflicts_with`, and the reader sees both with their
//! dates and sources.

use uuid::Uuid;

use super::memory::RecalledMemory;
use hindsight_text::statement::Statement;

/// Marks every pair of the answer that conflicts: one superseded the other
/// (`superseded_by` gives, per memory, the memory that replaced it), or both
/// state another value of an attribute that holds one value at a time.
pub fn flag(memories: &mut [RecalledMemory], superseded_by: &[(Uuid, Option<Uuid>)]) {
    let replaced_by = |id: Uuid| {
        superseded_by
            .iter()
            .find(|(m, _)| *m == id)
            .and_then(|(_, by)| *by)
    };
    let n = memories.len();
    // Words once per memory: the pairs are many, the memories few.
    let statements: Vec<Statement> = memories
        .iter()
        .map(|m| Statement::new(&m.content))
        .collect();
    for i in 0..n {
        for j in (i + 1)..n {
            let (a, b) = (&memories[i], &memories[j]);
            let linked = replaced_by(a.id) == Some(b.id) || replaced_by(b.id) == Some(a.id);
            let disagree = a.fact_type == b.fact_type
                && statements[i].same_frame(&statements[j])
                && (statements[i].contradicted_by(&statements[j])
                    || statements[j].contradicted_by(&statements[i]));
            if linked || disagree {
                let (ida, idb) = (a.id, b.id);
                if !memories[i].conflicts_with.contains(&idb) {
                    memories[i].conflicts_with.push(idb);
                }
                if !memories[j].conflicts_with.contains(&ida) {
                    memories[j].conflicts_with.push(ida);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {

    use hindsight_core::{fact::FactType, memory::Status};

    use super::*;

    fn memory(content: &str, status: Status) -> RecalledMemory {
        RecalledMemory {
            fact_type: FactType::Preference,
            status,
            ..crate::rank::memory::sample(content)
        }
    }

    #[test]
    fn a_superseded_memory_and_its_successor_name_each_other() {
        let mut answer = vec![
            memory("Tom prefers the window seat", Status::Active),
            memory("Tom likes jazz", Status::Superseded),
            memory("Tom likes rock now", Status::Active),
        ];
        let links = [(answer[1].id, Some(answer[2].id))];
        flag(&mut answer, &links);
        assert_eq!(answer[1].conflicts_with, vec![answer[2].id]);
        assert_eq!(answer[2].conflicts_with, vec![answer[1].id]);
        assert!(answer[0].conflicts_with.is_empty());
    }

    #[test]
    fn two_active_values_of_one_attribute_are_flagged() {
        let mut answer = vec![
            memory("Tom's favourite colour is red", Status::Active),
            memory("Tom's favourite colour is blue", Status::Active),
            memory("Tom likes cats", Status::Active),
            memory("Tom likes dogs", Status::Active),
        ];
        flag(&mut answer, &[]);
        assert_eq!(answer[0].conflicts_with, vec![answer[1].id]);
        assert!(
            answer[2].conflicts_with.is_empty() && answer[3].conflicts_with.is_empty(),
            "liking dogs does not contradict liking cats"
        );
    }
}
