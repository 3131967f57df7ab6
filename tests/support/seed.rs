//! Memories written straight into Postgres, backdated and with chosen
//! vectors, for tests of what the janitor does with them.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// One memory to write; [`Seed::new`] gives an active semantic fact created at `at`.
#[derive(Debug, Clone)]
pub struct Seed {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    pub kind: &'static str,
    pub fact_type: &'static str,
    pub content: String,
    pub entities: Vec<String>,
    pub importance: f32,
    pub status: &'static str,
    pub created_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub access_count: i32,
    pub archived_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When it took its status (`None`: at its creation).
    pub status_at: Option<DateTime<Utc>>,
    pub pinned: bool,
    pub embedding: Vec<f32>,
    /// Provenance rows (fact ids); turn ids are derived from them.
    pub facts: Vec<String>,
}

impl Seed {
    pub fn new(tenant: &str, user: &str, content: &str, created_at: DateTime<Utc>) -> Self {
        Self {
            id: Uuid::new_v4(),
            tenant: tenant.into(),
            user_id: user.into(),
            kind: "semantic",
            fact_type: "fact",
            content: content.into(),
            entities: Vec::new(),
            importance: 0.5,
            status: "active",
            created_at,
            last_accessed_at: None,
            access_count: 0,
            archived_at: None,
            expires_at: None,
            status_at: None,
            pinned: false,
            embedding: basis(0),
            facts: vec![format!("fact-{}", Uuid::new_v4())],
        }
    }

    /// Created `days` before `now`.
    pub fn aged(tenant: &str, user: &str, content: &str, now: DateTime<Utc>, days: i64) -> Self {
        Self::new(tenant, user, content, now - Duration::days(days))
    }

    pub async fn write(&self, pool: &PgPool) -> Uuid {
        sqlx::query(
            "WITH m AS (
               INSERT INTO memories (id, tenant, user_id, kind, fact_type, content, content_key, entities,
                                     importance, confidence, source_trust, status, created_at, updated_at,
                                     last_accessed_at, access_count, archived_at, embedding_model,
                                     embedding_version, terms, index_state, expires_at, status_at, pinned)
               VALUES ($1, $2, $3, $4, $5, $6, lower($6), $7, $8, 0.9, 'high', $9, $10, $10, $11, $12, $13,
                       'test-model', '1', '{}', 'indexed', $15, $16, $17)
               RETURNING id)
             INSERT INTO memory_vectors (id, embedding) SELECT id, $14 FROM m",
        )
        .bind(self.id)
        .bind(&self.tenant)
        .bind(&self.user_id)
        .bind(self.kind)
        .bind(self.fact_type)
        .bind(&self.content)
        .bind(&self.entities)
        .bind(self.importance)
        .bind(self.status)
        .bind(self.created_at)
        .bind(self.last_accessed_at)
        .bind(self.access_count)
        .bind(self.archived_at)
        .bind(&self.embedding)
        .bind(self.expires_at)
        .bind(self.status_at)
        .bind(self.pinned)
        .execute(pool)
        .await
        .expect("memory written");
        for fact in &self.facts {
            sqlx::query(
                "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id) VALUES ($1, $2, $3, $4)",
            )
            .bind(self.id)
            .bind(fact)
            .bind(&self.tenant)
            .bind(format!("turn-of-{fact}"))
            .execute(pool)
            .await
            .expect("provenance written");
        }
        self.id
    }
}

/// A unit vector along axis `i` of 8 dimensions.
pub fn basis(i: usize) -> Vec<f32> {
    let mut v = vec![0.0; 8];
    v[i % 8] = 1.0;
    v
}

/// A unit vector at cosine `cos` from `basis(i)`, leaning towards `basis(j)`.
pub fn near(i: usize, j: usize, cos: f32) -> Vec<f32> {
    let mut v = vec![0.0; 8];
    v[i % 8] = cos;
    v[j % 8] = (1.0 - cos * cos).sqrt();
    v
}

/// A memory row as JSON with its vector (`embedding`, as when it was a
/// column), without the column that only tracks index synchronisation.
const MEMORY_JSON: &str = "to_jsonb(m) - 'index_state'
    || jsonb_build_object('embedding', (SELECT v.embedding FROM memory_vectors v WHERE v.id = m.id))";

/// Every memory row as JSON (keyed and sorted by id): [`MEMORY_JSON`].
pub async fn memories(pool: &PgPool) -> Vec<Value> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMORY_JSON} FROM memories m ORDER BY id"
    )))
    .fetch_all(pool)
    .await
    .expect("memories read")
}

/// Every provenance row as JSON, sorted.
pub async fn sources(pool: &PgPool) -> Vec<Value> {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('memory_id', memory_id, 'fact_id', fact_id, 'turn_id', turn_id)
         FROM memory_sources ORDER BY fact_id",
    )
    .fetch_all(pool)
    .await
    .expect("sources read")
}

/// One memory row as JSON.
pub async fn memory(pool: &PgPool, id: Uuid) -> Option<Value> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMORY_JSON} FROM memories m WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
    .expect("memory read")
}
