//! A memory as recall scores it and the memory API shows it, and the columns
//! that read it.

use chrono::{DateTime, Utc};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
    turn::TurnContext,
};
use uuid::Uuid;

/// A memory as recall scores it and `GET /v1/memories/{id}` shows it.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct MemoryRow {
    pub id: Uuid,
    pub user_id: String,
    pub session_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub kind: Kind,
    #[sqlx(try_from = "String")]
    pub fact_type: FactType,
    pub content: String,
    pub entities: Vec<String>,
    pub importance: f32,
    pub confidence: f32,
    /// How far the source is trusted (high, medium, low).
    #[serde(rename = "trust")]
    pub source_trust: String,
    /// Where it came from: user, agent, tool or external (none for a summary).
    pub source: Option<String>,
    /// The poisoning screen's record (`screen:<score>`, `poison:<reason>`).
    pub flags: Vec<String>,
    /// Only what the assistant inferred, not what anyone stated.
    pub inferred: bool,
    #[sqlx(try_from = "String")]
    pub status: Status,
    /// Left as it is by every janitor step.
    pub pinned: bool,
    pub superseded_by: Option<Uuid>,
    pub occurred_at: Option<DateTime<Utc>>,
    /// When it became true: when it happened, else when it was said.
    pub valid_from: Option<DateTime<Utc>>,
    /// When it stops being true ("in Tokyo until Friday"), if it says.
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub access_count: i32,
    /// Source turn ids, oldest first.
    pub provenance: Vec<String>,
    /// The turn the memory's first source turn replied to.
    #[sqlx(json(nullable))]
    pub context: Option<TurnContext>,
}

impl MemoryRow {
    /// Whether it is past its end at `at`.
    pub fn expired_at(&self, at: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|end| end <= at)
    }
}

/// The columns of a [`MemoryRow`], over `memories m`.
pub const MEMORY_ROW_COLUMNS: &str = "m.id, m.user_id, m.session_id, m.kind, m.fact_type, m.content, m.entities,
    m.importance, m.confidence, m.source_trust, m.source, m.flags, m.inferred, m.status, m.pinned, m.superseded_by, m.occurred_at, m.valid_from, m.expires_at, m.created_at,
    m.updated_at, m.last_accessed_at, m.access_count, m.context,
    coalesce((SELECT array_agg(s.turn_id ORDER BY s.added_at, s.turn_id) FROM memory_sources s WHERE s.memory_id = m.id), '{}') AS provenance";

/// A memory's point in the index: its model (which names its collection) and
/// id; what an erase or a purge leaves for the reconciler to remove.
#[derive(Debug, Clone, PartialEq, Eq, Hash, sqlx::FromRow)]
pub struct IndexPoint {
    pub embedding_model: String,
    pub embedding_version: String,
    pub dimension: i32,
    pub point: Uuid,
}
