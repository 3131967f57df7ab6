//! What recall reads from Postgres besides the keyword channel: the candidate
//! rows with their provenance, the structured-filter and entity channels, and
//! the access counts it records afterwards.
//!
//! Every query here names the tenant and the user: the candidate ids the
//! channels propose are only ever read back within that scope, so no channel
//! (the vector index included) can leak another user's memory.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Store, StoreError};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status, names},
    turn::TurnContext,
};

/// The structured filters of a recall; empty fields filter nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    pub session_id: Option<String>,
    pub fact_types: Vec<FactType>,
    pub occurred_from: Option<DateTime<Utc>>,
    pub occurred_to: Option<DateTime<Utc>>,
}

impl Filters {
    pub fn is_empty(&self) -> bool {
        self.session_id.is_none()
            && self.fact_types.is_empty()
            && self.occurred_from.is_none()
            && self.occurred_to.is_none()
    }
}

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
    pub superseded_by: Option<Uuid>,
    pub occurred_at: Option<DateTime<Utc>>,
    /// When it became true: when it happened, else when it was said.
    pub valid_from: Option<DateTime<Utc>>,
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

/// A candidate row as recall scores it: the memory, and what the signals
/// that did not propose it need to score it all the same.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecallRow {
    #[sqlx(flatten)]
    pub memory: MemoryRow,
    pub terms: Vec<String>,
    pub embedding: Option<Vec<f32>>,
}

pub(crate) const MEMORY_ROW_COLUMNS: &str = "m.id, m.user_id, m.session_id, m.kind, m.fact_type, m.content, m.entities,
    m.importance, m.confidence, m.source_trust, m.source, m.flags, m.inferred, m.status, m.superseded_by, m.occurred_at, m.valid_from, m.created_at,
    m.updated_at, m.last_accessed_at, m.access_count, m.context,
    coalesce((SELECT array_agg(s.turn_id ORDER BY s.added_at, s.turn_id) FROM memory_sources s WHERE s.memory_id = m.id), '{}') AS provenance";

/// The filter clauses over `m`, with parameters $4 (session), $5 (types),
/// $6 and $7 (time range); the date of a memory is when it happened, else
/// when it was learnt.
const FILTER_CLAUSES: &str = "($4::text IS NULL OR m.session_id = $4)
    AND (cardinality($5::text[]) = 0 OR m.fact_type = ANY($5))
    AND ($6::timestamptz IS NULL OR coalesce(m.occurred_at, m.created_at) >= $6)
    AND ($7::timestamptz IS NULL OR coalesce(m.occurred_at, m.created_at) <= $7)";

/// Entities in more memories than this do not single anything out (a user's
/// own name): the entity channel leaves them to the other channels.
pub const ENTITY_SELECTIVITY: i64 = 200;

/// The entity channel's answer: its memories, and the query's entities it
/// looked up (those that single something out), which score any memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntityAnswer {
    pub ids: Vec<Uuid>,
    pub entities: Vec<String>,
}

impl Store {
    /// The given memories of one user, in the statuses asked for and within
    /// the filters, with their terms, and their embeddings where `with_vector`
    /// names them (reading a vector costs: only those not already scored by
    /// the index); ids outside that scope are silently absent.
    pub async fn recall_rows(
        &self,
        tenant: &str,
        user_id: &str,
        statuses: &[Status],
        filters: &Filters,
        ids: &[Uuid],
        with_vector: &[Uuid],
    ) -> Result<Vec<RecallRow>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {MEMORY_ROW_COLUMNS}, m.terms,
                    CASE WHEN m.id = ANY($9) THEN m.embedding END AS embedding
             FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) AND {FILTER_CLAUSES}
               AND m.id = ANY($8)"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(user_id)
            .bind(names(statuses))
            .bind(&filters.session_id)
            .bind(names(&filters.fact_types))
            .bind(filters.occurred_from)
            .bind(filters.occurred_to)
            .bind(ids)
            .bind(with_vector)
            .fetch_all(&self.pool)
            .await?)
    }

    /// The embeddings of these memories of one tenant, by id.
    pub async fn embeddings(
        &self,
        tenant: &str,
        ids: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, Vec<f32>>, StoreError> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let rows: Vec<(Uuid, Vec<f32>)> = sqlx::query_as(
            "SELECT id, embedding FROM memories WHERE tenant = $1 AND id = ANY($2) AND embedding IS NOT NULL",
        )
        .bind(tenant)
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// The structured-filter channel: the user's memories within the
    /// filters, most recent first.
    pub async fn filter_channel(
        &self,
        tenant: &str,
        user_id: &str,
        statuses: &[Status],
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT m.id FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) AND {FILTER_CLAUSES}
             ORDER BY coalesce(m.occurred_at, m.created_at) DESC, m.id
             LIMIT $8"
        );
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(user_id)
            .bind(names(statuses))
            .bind(&filters.session_id)
            .bind(names(&filters.fact_types))
            .bind(filters.occurred_from)
            .bind(filters.occurred_to)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?)
    }

    /// The entity channel: the user's memories naming the given entities (in
    /// any of the spellings given), most entities matched first, then the most
    /// important. Entities naming more than [`ENTITY_SELECTIVITY`] memories are
    /// left out.
    pub async fn entity_channel(
        &self,
        tenant: &str,
        user_id: &str,
        statuses: &[Status],
        entities: &[String],
        limit: usize,
    ) -> Result<EntityAnswer, StoreError> {
        if entities.is_empty() || limit == 0 {
            return Ok(EntityAnswer::default());
        }
        let counts: Vec<(String, i64)> = sqlx::query_as(
            "SELECT e, (SELECT count(*) FROM (
                    SELECT 1 FROM memories m
                    WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) AND m.entities @> ARRAY[e]
                    LIMIT $5) x)
             FROM unnest($4::text[]) AS e",
        )
        .bind(tenant)
        .bind(user_id)
        .bind(names(statuses))
        .bind(entities)
        .bind(ENTITY_SELECTIVITY + 1)
        .fetch_all(&self.pool)
        .await?;
        let selective: Vec<String> = counts
            .into_iter()
            .filter(|(_, n)| *n > 0 && *n <= ENTITY_SELECTIVITY)
            .map(|(e, _)| e)
            .collect();
        if selective.is_empty() {
            return Ok(EntityAnswer::default());
        }
        let ids = sqlx::query_scalar(
            "SELECT m.id FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) AND m.entities && $4::text[]
             ORDER BY (SELECT count(*) FROM unnest(m.entities) AS x WHERE x = ANY($4)) DESC,
                      m.importance DESC, m.id
             LIMIT $5",
        )
        .bind(tenant)
        .bind(user_id)
        .bind(names(statuses))
        .bind(&selective)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        Ok(EntityAnswer {
            ids,
            entities: selective,
        })
    }

    /// Counts one access of each memory, now.
    pub async fn record_access(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        // updated_at is left alone: an access is not a change the index must see.
        sqlx::query(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = now()
             WHERE id = ANY($1)",
        )
        .bind(ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
