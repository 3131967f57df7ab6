//! Erasing a user: the places an erase removes the user from, and what it
//! removed from each. An erase is a job (`erasures` in Postgres) that visits
//! the places in [`Place::ORDER`] and records each place done, so a job killed
//! halfway and run again resumes where it stopped and ends in the same state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::closed_set::closed_set;

closed_set! {
    /// Where a user's data lives, as an erase visits it.
    pub enum Place: "erase place", names "snake_case" {
        /// Postgres, in one transaction: memories, their provenance, their
        /// audit events, keyword statistics and the `turns` archive. It also
        /// writes down what the later places must remove (stream sequences,
        /// index points), so nothing is lost when the rows naming them go.
        Database,
        /// The JetStream streams of the namespace: the user's turns in TURNS,
        /// their messages in flight between stages, their dead letters.
        Streams,
        /// Working memory: every session's keys of the user, their history
        /// and their write records.
        Working,
        /// The janitor's purge exports, rewritten without the user's rows.
        Exports,
        /// The vector index's points of the user's memories, removed by the
        /// index's owner (the persist service's reconciler).
        Index,
    }
}

impl Place {
    /// The order an erase visits the places in: the database first, since it
    /// writes down the later places' work.
    pub const ORDER: [Place; 5] = [
        Place::Database,
        Place::Streams,
        Place::Working,
        Place::Exports,
        Place::Index,
    ];
}

/// What an erase removed, per place. Numbers only: this is all the record of
/// an erase keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counts {
    pub memories: u64,
    /// Provenance rows (`memory_sources`).
    pub sources: u64,
    /// Audit events of the user's memories.
    pub events: u64,
    /// Rows of the `turns` archive.
    pub turns: u64,
    /// Keyword statistics rows of the user (`memory_terms`, `memory_users`).
    pub keyword_stats: u64,
    /// Other memories whose shown context was a turn of the user, cleared.
    pub contexts: u64,
    pub index_points: u64,
    /// Working-memory keys of the user's sessions.
    pub working_keys: u64,
    /// Rows of the janitor's purge exports (memories purged before the erase).
    pub export_rows: u64,
    /// Messages removed from each stream, by stream name (relative to the
    /// namespace: `TURNS`, `KEPT`, `FACTS`, `EMBEDDED`, `DLQ` for dead letters).
    pub stream_messages: BTreeMap<String, u64>,
}

impl Counts {
    /// Adds another pass's counts to these.
    pub fn add(&mut self, other: &Counts) {
        self.memories += other.memories;
        self.sources += other.sources;
        self.events += other.events;
        self.turns += other.turns;
        self.keyword_stats += other.keyword_stats;
        self.contexts += other.contexts;
        self.index_points += other.index_points;
        self.working_keys += other.working_keys;
        self.export_rows += other.export_rows;
        for (stream, n) in &other.stream_messages {
            *self.stream_messages.entry(stream.clone()).or_default() += n;
        }
    }

    /// Whether nothing was removed anywhere.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Everything removed, summed over the places.
    pub fn total(&self) -> u64 {
        self.memories
            + self.sources
            + self.events
            + self.turns
            + self.keyword_stats
            + self.contexts
            + self.index_points
            + self.working_keys
            + self.export_rows
            + self.stream_messages.values().sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::closed_set::VariantArray;

    #[test]
    fn counts_add_up_per_place_and_per_stream() {
        let mut a = Counts {
            memories: 2,
            stream_messages: BTreeMap::from([("TURNS".into(), 3)]),
            ..Counts::default()
        };
        a.add(&Counts {
            memories: 1,
            index_points: 4,
            stream_messages: BTreeMap::from([("TURNS".into(), 1), ("DLQ".into(), 2)]),
            ..Counts::default()
        });
        assert_eq!(a.memories, 3);
        assert_eq!(a.stream_messages["TURNS"], 4);
        assert_eq!(a.stream_messages["DLQ"], 2);
        assert_eq!(a.total(), 3 + 4 + 4 + 2);
        assert!(!a.is_empty());
        assert!(Counts::default().is_empty());
    }

    #[test]
    fn counts_read_back_from_a_partial_record() {
        let c: Counts = serde_json::from_str(r#"{"memories": 5}"#).expect("reads");
        assert_eq!(c.memories, 5);
        assert_eq!(c.turns, 0);
    }

    #[test]
    fn places_are_visited_database_first() {
        assert_eq!(Place::ORDER[0], Place::Database);
        assert_eq!(Place::ORDER.len(), Place::VARIANTS.len());
        assert_eq!(Place::Index.as_str(), "index");
    }
}
