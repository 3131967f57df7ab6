//! The signals recall fuses, defined once: the configuration weighs the
//! first four (`HINDSIGHT_RECALL_SIGNAL_WEIGHTS`), `explain` reports each
//! candidate's rank in every one.

use crate::closed_set::closed_set;

closed_set! {
    /// One source of candidates for recall.
    pub enum Signal: "signal", names "snake_case" {
        /// Nearness of the query's embedding (the vector index).
        Dense,
        /// The query's words and stems (BM25 over stored terms).
        Keyword,
        /// The request's structured filters alone (session, types, dates).
        Filter,
        /// The entities the query names.
        Entity,
        /// Memories near the best first-round answers.
        SecondHop,
    }
}

impl Signal {
    /// The signals whose weights the configuration sets, in its order.
    pub const WEIGHTED: [Signal; 4] = [
        Signal::Dense,
        Signal::Keyword,
        Signal::Filter,
        Signal::Entity,
    ];
}

closed_set! {
    /// How recall fuses the signals into one relevance (`HINDSIGHT_RECALL_FUSION`).
    #[derive(Default)]
    pub enum Fusion: "fusion", names "lowercase" {
        /// Each signal over its best value among the candidates, weighted.
        #[default]
        Score,
        /// Reciprocal rank fusion: ranks only, weighted.
        Rrf,
    }
}
