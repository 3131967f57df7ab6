//! What a run did, per step: recorded on its `maintenance_runs` row, printed
//! by `hindsight maintenance run`, published on `<ns>.events.maintenance`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Memories changed by each step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCounts {
    /// Superseded memories made active again: the fact that superseded
    /// each neither negates it nor changes one of its attributes.
    #[serde(default)]
    pub reinstated: u64,
    /// Memories split off a memory that held facts not restating one another.
    #[serde(default)]
    pub split: u64,
    /// Wrongly merged memories left whole: no embedder of their model to
    /// give the parts their vectors.
    #[serde(default)]
    pub unsplit: u64,
    /// Importance lowered by decay.
    pub decayed: u64,
    /// Folded into a near-identical memory (cosine ≥ 0.95) and archived.
    pub merged: u64,
    /// Memories that absorbed merged ones.
    pub merge_survivors: u64,
    /// Archived for low importance and long idleness.
    pub archived: u64,
    /// Old episodes folded into summaries and archived.
    pub consolidated: u64,
    /// Semantic summaries written.
    pub summaries: u64,
    /// Quarantined memories archived at the end of their review period.
    #[serde(default)]
    pub reviewed: u64,
    /// Exported and deleted after their retention: archived (expired plans
    /// among them), superseded and deleted memories.
    pub purged: u64,
    /// Of those, superseded memories.
    #[serde(default)]
    pub purged_superseded: u64,
    /// Turns of the archive emptied (content exported, then dropped).
    #[serde(default)]
    pub turns_emptied: u64,
    /// Turns of the archive exported and deleted.
    #[serde(default)]
    pub turns_purged: u64,
}

impl StepCounts {
    pub fn add(&mut self, other: &StepCounts) {
        self.reinstated += other.reinstated;
        self.split += other.split;
        self.unsplit += other.unsplit;
        self.decayed += other.decayed;
        self.merged += other.merged;
        self.merge_survivors += other.merge_survivors;
        self.archived += other.archived;
        self.consolidated += other.consolidated;
        self.summaries += other.summaries;
        self.reviewed += other.reviewed;
        self.purged += other.purged;
        self.purged_superseded += other.purged_superseded;
        self.turns_emptied += other.turns_emptied;
        self.turns_purged += other.turns_purged;
    }
}

/// A run's counts: in total, per tenant, and what it observed beside memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    #[serde(flatten)]
    pub total: StepCounts,
    #[serde(default)]
    pub by_tenant: BTreeMap<String, StepCounts>,
    /// Working-memory keys that expired (TTL) since the previous run; absent
    /// when the run had no NATS connection to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_working_keys: Option<u64>,
    /// Summaries written by the LLM (the others keep the rules' text); a dry
    /// run asks no LLM.
    #[serde(default)]
    pub llm_summaries: u64,
    /// Seconds each step took (in this attempt, for a resumed run).
    #[serde(default)]
    pub seconds: BTreeMap<String, f64>,
}

impl Counts {
    /// Adds one tenant's changes.
    pub fn record(&mut self, tenant: &str, change: impl FnOnce(&mut StepCounts)) {
        let mut one = StepCounts::default();
        change(&mut one);
        self.total.add(&one);
        self.by_tenant
            .entry(tenant.to_string())
            .or_default()
            .add(&one);
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Counts as recorded on a run row (a resumed run carries them on).
    pub fn from_json(value: &serde_json::Value) -> Self {
        serde_json::from_value(value.clone()).unwrap_or_default()
    }
}
