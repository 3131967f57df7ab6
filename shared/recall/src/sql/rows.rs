//! What recall reads from Postgres besides the keyword channel ([`super::keyword`]): the candidate
//! rows with their provenance, the structured-filter and entity channels, and
//! the access counts it records afterwards.
//!
//! Every query here names the tenant and the user: the candidate ids the
//! channels propose are only ever read back within that scope, so no channel
//! (the vector index included) can leak another user's memory.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use hindsight_core::{closed_set::names, fact::FactType, memory::Status};
use hindsight_store::{
    Store, StoreError,
    row::{MEMORY_ROW_COLUMNS, MemoryRow},
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

/// A candidate row as recall scores it: the memory, and what the signals
/// that did not propose it need to score it all the same.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecallRow {
    #[sqlx(flatten)]
    pub memory: MemoryRow,
    pub terms: Vec<String>,
    pub embedding: Option<Vec<f32>>,
}

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

/// The given memories of one user, in the statuses asked for and within
/// the filters, with their terms, and their embeddings if `with_vectors`
/// (reading a vector costs: only for memories the index did not score);
/// ids outside that scope are silently absent.
pub async fn recall_rows(
    store: &Store,
    tenant: &str,
    user_id: &str,
    statuses: &[Status],
    filters: &Filters,
    ids: &[Uuid],
    with_vectors: bool,
) -> Result<Vec<RecallRow>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT {MEMORY_ROW_COLUMNS}, m.terms,
                CASE WHEN $9::boolean
                     THEN (SELECT v.embedding FROM memory_vectors v WHERE v.id = m.id) END AS embedding
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
        .bind(with_vectors)
        .fetch_all(&store.pool)
        .await?)
}

/// The embeddings of these memories of one tenant, by id.
pub async fn embeddings(
    store: &Store,
    tenant: &str,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Vec<f32>>, StoreError> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let rows: Vec<(Uuid, Vec<f32>)> = sqlx::query_as(
        "SELECT m.id, v.embedding FROM memories m JOIN memory_vectors v ON v.id = m.id
         WHERE m.tenant = $1 AND m.id = ANY($2)",
    )
    .bind(tenant)
    .bind(ids)
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// The structured-filter channel: the user's memories within the
/// filters, most recent first.
pub async fn filter_channel(
    store: &Store,
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
        .fetch_all(&store.pool)
        .await?)
}

/// The entity channel: the user's memories naming the given entities (in
/// any of the spellings given), most entities matched first, then the most
/// important. Entities naming more than [`ENTITY_SELECTIVITY`] memories are
/// left out.
pub async fn entity_channel(
    store: &Store,
    tenant: &str,
    user_id: &str,
    statuses: &[Status],
    entities: &[String],
    limit: usize,
) -> Result<EntityAnswer, StoreError> {
    if entities.is_empty() || limit == 0 {
        return Ok(EntityAnswer::default());
    }
    let indexed = super::indexed_clause(statuses);
    let counts: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT e, (SELECT count(*) FROM (
                SELECT 1 FROM memories m
                WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) {indexed}
                  AND m.entities @> ARRAY[e]
                LIMIT $5) x)
         FROM unnest($4::text[]) AS e"
    )))
    .bind(tenant)
    .bind(user_id)
    .bind(names(statuses))
    .bind(entities)
    .bind(ENTITY_SELECTIVITY + 1)
    .fetch_all(&store.pool)
    .await?;
    let selective: Vec<String> = counts
        .into_iter()
        .filter(|(_, n)| *n > 0 && *n <= ENTITY_SELECTIVITY)
        .map(|(e, _)| e)
        .collect();
    if selective.is_empty() {
        return Ok(EntityAnswer::default());
    }
    let ids = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT m.id FROM memories m
         WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($3) {indexed}
           AND m.entities && $4::text[]
         ORDER BY (SELECT count(*) FROM unnest(m.entities) AS x WHERE x = ANY($4)) DESC,
                  m.importance DESC, m.id
         LIMIT $5"
    )))
    .bind(tenant)
    .bind(user_id)
    .bind(names(statuses))
    .bind(&selective)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&store.pool)
    .await?;
    Ok(EntityAnswer {
        ids,
        entities: selective,
    })
}

/// Counts one access of each memory, now.
pub async fn record_access(store: &Store, ids: &[Uuid]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    // updated_at is left alone: an access is not a change the index must see.
    sqlx::query(
        "UPDATE memories SET access_count = access_count + 1, last_accessed_at = now()
         WHERE id = ANY($1)",
    )
    .bind(ids)
    .execute(&store.pool)
    .await?;
    Ok(())
}
