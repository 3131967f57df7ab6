//! Where one recall spent its time, part by part, so that a benchmark can
//! split its latency the way the `hindsight_recall_part_seconds` metric does.

use std::time::Duration;

use hindsight_shared::events;

/// One recall's parts. The channels run concurrently, each followed by the
/// read of its candidates' rows, so the parts before `rank` overlap: the
/// answer waits for the slowest channel and its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    /// Embedding the query (part of `dense`).
    pub embed: Duration,
    /// The dense channel: query embedding and vector search together.
    pub dense: Duration,
    pub keyword: Duration,
    pub entity: Duration,
    /// The structured-filter channel (zero when the request has no filter).
    pub filter: Duration,
    /// Reading the candidates' rows back from Postgres: the longest of the
    /// channels' reads, each of which follows its own channel.
    pub rows: Duration,
    /// The second hop: its search and its new rows (zero when off).
    pub second_hop: Duration,
    /// Fusion, the score, source spreading, the budget and conflicts.
    pub rank: Duration,
    pub total: Duration,
}

impl Timings {
    /// The vector search alone (the dense channel without the query embedding).
    pub fn search(&self) -> Duration {
        self.dense.saturating_sub(self.embed)
    }

    /// Records every part in the metric (parts that did not run are left out).
    pub(crate) fn emit(&self) {
        for (part, elapsed) in [
            ("embed", self.embed),
            ("dense", self.dense),
            ("keyword", self.keyword),
            ("entity", self.entity),
            ("filter", self.filter),
            ("rows", self.rows),
            ("second_hop", self.second_hop),
            ("rank", self.rank),
        ] {
            if !elapsed.is_zero() {
                events::RecallPart { part, elapsed }.emit();
            }
        }
    }
}
