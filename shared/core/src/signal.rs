//! The signals recall fuses, defined once: the configuration weighs the
//! first four (`HINDSIGHT_RECALL_SIGNAL_WEIGHTS`), `explain` reports each
//! candidate's rank in every one.

use serde::{Deserialize, Serialize};

/// One source of candidates for recall.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Signal {
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

impl Signal {
    /// The signals whose weights the configuration sets, in its order.
    pub const WEIGHTED: [Signal; 4] = [
        Signal::Dense,
        Signal::Keyword,
        Signal::Filter,
        Signal::Entity,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How recall fuses the signals into one relevance (`HINDSIGHT_RECALL_FUSION`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Fusion {
    /// Each signal over its best value among the candidates, weighted.
    #[default]
    Score,
    /// Reciprocal rank fusion: ranks only, weighted.
    Rrf,
}

impl Fusion {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
