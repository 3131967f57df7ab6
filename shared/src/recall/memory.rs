//! A recalled memory as every surface returns it (`hindsight recall --json`,
//! HTTP, NATS, MCP).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecalledMemory {
    pub id: Uuid,
    pub content: String,
    pub fact_type: String,
    pub status: String,
    pub importance: f32,
    pub confidence: f32,
    /// How far the memory's source is trusted: high, medium or low.
    pub source: String,
    pub occurred_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The ids of the turns the memory came from.
    pub provenance: Vec<String>,
    pub score: f64,
    /// Memories in this answer that state another value of the same thing
    /// (one superseded the other, or both are active): never resolved silently.
    pub conflicts_with: Vec<Uuid>,
}

impl RecalledMemory {
    /// The date a reader should see: when it happened, else when it was learnt.
    pub fn date(&self) -> DateTime<Utc> {
        self.occurred_at.unwrap_or(self.created_at)
    }
}

/// A memory with plain values, for the tests of the recall modules.
#[cfg(test)]
pub(crate) fn sample(content: &str) -> RecalledMemory {
    RecalledMemory {
        id: Uuid::new_v4(),
        content: content.into(),
        fact_type: "fact".into(),
        status: "active".into(),
        importance: 0.5,
        confidence: 0.7,
        source: "high".into(),
        occurred_at: None,
        created_at: Utc::now(),
        provenance: vec![],
        score: 1.0,
        conflicts_with: vec![],
    }
}
