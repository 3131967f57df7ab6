//! The `memories` table (its provenance and audit log are
//! [`crate::provenance`]'s). Writes that must be atomic take a transaction
//! from the caller.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{Store, StoreError, vectors};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
    turn::TurnContext,
};

use hindsight_text::terms;

/// The `terms_version` that [`search_terms`] makes (see migration 0006).
pub const TERMS_VERSION: i16 = 2;

/// What the keyword channel searches a memory by: its content, its entities
/// and the content of the turn it replied to.
pub fn search_terms(
    content: &str,
    entities: &[impl AsRef<str>],
    context: Option<&TurnContext>,
) -> Vec<String> {
    terms::memory_terms(
        std::iter::once(content)
            .chain(entities.iter().map(AsRef::as_ref))
            .chain(context.map(|c| c.content.as_str())),
    )
}

pub type Tx<'a> = Transaction<'a, Postgres>;

/// An existing memory as dedupe sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Candidate {
    pub id: Uuid,
    pub content: String,
    pub content_key: String,
    pub embedding: Vec<f32>,
    pub importance: f32,
    pub confidence: f32,
    pub entities: Vec<String>,
    #[sqlx(json(nullable))]
    pub context: Option<TurnContext>,
}

/// A memory as the index needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Indexable {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    pub session_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub kind: Kind,
    #[sqlx(try_from = "String")]
    pub fact_type: FactType,
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub embedding_model: String,
    pub embedding_version: String,
    pub embedding: Vec<f32>,
}

/// A new memory.
#[derive(Debug, Clone)]
pub struct NewMemory {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: Kind,
    pub fact_type: FactType,
    pub content: String,
    pub content_key: String,
    pub entities: Vec<String>,
    pub importance: f32,
    pub confidence: f32,
    pub source_trust: String,
    pub status: Status,
    pub occurred_at: Option<DateTime<Utc>>,
    pub valid_from: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub embedding_model: String,
    pub embedding_version: String,
    pub embedding: Vec<f32>,
    pub context: Option<TurnContext>,
    /// The source of the memory's first turn (user, agent, tool, external);
    /// `None` for a summary of several memories.
    pub source: Option<String>,
    /// The poisoning screen's record (`screen:<score>`, `poison:<reason>`).
    pub flags: Vec<String>,
    /// Only what the assistant inferred, not what anyone stated.
    pub inferred: bool,
}

/// Over `memories m JOIN memory_vectors v`: only memories with a vector are candidates.
const CANDIDATE_COLUMNS: &str = "m.id, m.content, m.content_key, v.embedding, m.importance, m.confidence, m.entities, m.context";
/// Over `memories m JOIN memory_vectors v`: only memories with a vector are indexed.
const INDEXABLE_COLUMNS: &str = "m.id, m.tenant, m.user_id, m.session_id, m.kind, m.fact_type, m.status, m.created_at, m.occurred_at, m.updated_at, m.embedding_model, m.embedding_version, v.embedding";

/// Serialises dedupe-then-write per (tenant, user) across every persist replica
/// until the transaction ends.
pub async fn lock_user(tx: &mut Tx<'_>, tenant: &str, user_id: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 7))")
        .bind(tenant)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Fact ids among `fact_ids` that already landed in a memory.
pub async fn persisted_facts(
    tx: &mut Tx<'_>,
    tenant: &str,
    fact_ids: &[String],
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT fact_id FROM memory_sources WHERE tenant = $1 AND fact_id = ANY($2)",
    )
    .bind(tenant)
    .bind(fact_ids)
    .fetch_all(&mut **tx)
    .await?)
}

/// Active memories written but not yet in the index, plus those whose content
/// key matches, plus the given ids: every candidate the index cannot vouch for.
/// `all` loads every active memory of the user and model (when the index
/// cannot be asked, dedupe falls back to comparing against all of them).
#[allow(clippy::too_many_arguments)]
pub async fn candidates(
    tx: &mut Tx<'_>,
    tenant: &str,
    user_id: &str,
    model: &str,
    version: &str,
    keys: &[String],
    ids: &[Uuid],
    all: bool,
) -> Result<Vec<Candidate>, StoreError> {
    let sql = format!(
        "SELECT {CANDIDATE_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
         WHERE m.tenant = $1 AND m.user_id = $2 AND m.embedding_model = $3 AND m.embedding_version = $4
           AND m.status = 'active'
           AND ($7 OR m.index_state = 'pending' OR m.content_key = ANY($5) OR m.id = ANY($6))"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(user_id)
        .bind(model)
        .bind(version)
        .bind(keys)
        .bind(ids)
        .bind(all)
        .fetch_all(&mut **tx)
        .await?)
}

/// How many of a user's memories [`lexical_candidates`] ranks at most per
/// fact: those holding the fact's rarest terms (a near-duplicate holds them).
/// Ranking every memory that shares any term (a name most of them hold) cost
/// a scan of the user's rows per fact, growing with the user.
pub const LEXICAL_BUDGET: i64 = 200;

/// The rarest of `terms` (by the user's document frequency) while their
/// frequencies add up to at most `budget`, and always the rarest one; terms
/// the user has no memory with are left out. Ties go in the order given.
pub fn rarest_terms(mut known: Vec<(String, i64)>, budget: i64) -> Vec<String> {
    known.retain(|(_, df)| *df > 0);
    known.sort_by_key(|(_, df)| *df);
    let mut spent = 0;
    known
        .into_iter()
        .take_while(|(_, df)| {
            let first = spent == 0;
            spent += df;
            first || spent <= budget
        })
        .map(|(t, _)| t)
        .collect()
}

/// Active memories of a user (under one model) sharing the most search terms
/// with `terms`, at most `limit`: the candidates for a fact whose script the
/// embedder does not read, where its nearest vectors say little. Only
/// memories holding the fact's rarest terms are ranked, at most
/// [`LEXICAL_BUDGET`] of them, so a fact costs the same however many
/// memories its user has.
pub async fn lexical_candidates(
    tx: &mut Tx<'_>,
    tenant: &str,
    user_id: &str,
    model: &str,
    version: &str,
    terms: &[String],
    limit: usize,
) -> Result<Vec<Candidate>, StoreError> {
    if terms.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let known: Vec<(String, i64)> = sqlx::query_as(
        "SELECT term, df FROM memory_terms WHERE tenant = $1 AND user_id = $2 AND term = ANY($3)",
    )
    .bind(tenant)
    .bind(user_id)
    .bind(terms)
    .fetch_all(&mut **tx)
    .await?;
    // In the order asked, so that terms of equal frequency are chosen alike every time.
    let mut known = known;
    known.sort_by_key(|(t, _)| terms.iter().position(|q| q == t));
    let rare = rarest_terms(known, LEXICAL_BUDGET);
    if rare.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT {CANDIDATE_COLUMNS} FROM (
           SELECT m.id, m.terms, m.created_at FROM memories m
           WHERE m.tenant = $1 AND m.user_id = $2 AND m.embedding_model = $3 AND m.embedding_version = $4
             AND m.status = 'active' AND m.terms && $7
           LIMIT {LEXICAL_BUDGET}) AS c
         JOIN memories m ON m.id = c.id JOIN memory_vectors v ON v.id = c.id
         ORDER BY cardinality(ARRAY(SELECT unnest(c.terms) INTERSECT SELECT unnest($5::text[]))) DESC,
                  c.created_at DESC
         LIMIT $6"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(user_id)
        .bind(model)
        .bind(version)
        .bind(terms)
        .bind(limit as i64)
        .bind(&rare)
        .fetch_all(&mut **tx)
        .await?)
}

pub async fn insert(tx: &mut Tx<'_>, m: &NewMemory) -> Result<(), StoreError> {
    insert_on(tx, m).await
}

/// [`insert`] on any connection (the janitor writes summaries inside its own transactions).
pub async fn insert_on(conn: &mut sqlx::PgConnection, m: &NewMemory) -> Result<(), StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO memories (id, tenant, user_id, agent_id, session_id, kind, fact_type, content, content_key,
                               entities, importance, confidence, source_trust, status, occurred_at, valid_from,
                               expires_at, embedding_model, embedding_version, terms, context, terms_version,
                               source, flags, inferred, index_state)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
                 $23, $24, $25, 'pending')
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(m.id)
    .bind(&m.tenant)
    .bind(&m.user_id)
    .bind(&m.agent_id)
    .bind(&m.session_id)
    .bind(m.kind.as_str())
    .bind(m.fact_type.as_str())
    .bind(&m.content)
    .bind(&m.content_key)
    .bind(&m.entities)
    .bind(m.importance)
    .bind(m.confidence)
    .bind(&m.source_trust)
    .bind(m.status.as_str())
    .bind(m.occurred_at)
    .bind(m.valid_from)
    .bind(m.expires_at)
    .bind(&m.embedding_model)
    .bind(&m.embedding_version)
    .bind(search_terms(&m.content, &m.entities, m.context.as_ref()))
    .bind(m.context.as_ref().map(sqlx::types::Json))
    .bind(TERMS_VERSION)
    .bind(&m.source)
    .bind(&m.flags)
    .bind(m.inferred)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    // A memory already there keeps its vector, as it keeps everything else.
    if inserted > 0 {
        vectors::put(conn, m.id, &m.embedding).await?;
    }
    Ok(())
}

/// Folds a new fact into an existing memory. `terms` are the merged
/// memory's [`search_terms`]; `context` is kept unless the memory had none;
/// a stated fact (`inferred` false) makes the memory stated.
#[allow(clippy::too_many_arguments)]
pub async fn merge(
    tx: &mut Tx<'_>,
    id: Uuid,
    content: &str,
    content_key: &str,
    embedding: Option<&[f32]>,
    importance: f32,
    confidence: f32,
    entities: &[String],
    terms: &[String],
    context: Option<&TurnContext>,
    inferred: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE memories
         SET inferred = inferred AND $10, content = $2, content_key = $3, terms = $7,
             importance = greatest(importance, $4), confidence = least(1.0, greatest(confidence, $5) + 0.1),
             entities = ARRAY(SELECT DISTINCT unnest(entities || $6::text[])),
             context = coalesce(context, $8), terms_version = $9,
             updated_at = clock_timestamp(), index_state = 'pending'
         WHERE id = $1",
    )
    .bind(id)
    .bind(content)
    .bind(content_key)
    .bind(importance)
    .bind(confidence)
    .bind(entities)
    .bind(terms)
    .bind(context.map(sqlx::types::Json))
    .bind(TERMS_VERSION)
    .bind(inferred)
    .execute(&mut **tx)
    .await?;
    if let Some(embedding) = embedding {
        vectors::put(tx, id, embedding).await?;
    }
    Ok(())
}

pub async fn supersede(tx: &mut Tx<'_>, old: Uuid, by: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE memories SET status = 'superseded', superseded_by = $2, updated_at = clock_timestamp(), index_state = 'pending'
         WHERE id = $1",
    )
    .bind(old)
    .bind(by)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    /// Rewrites the search terms of up to `limit` memories made by an older
    /// [`TERMS_VERSION`]; returns how many. Rows another caller is rewriting
    /// are skipped, so several persist replicas can run this at once.
    pub async fn upgrade_terms(&self, limit: i64) -> Result<usize, StoreError> {
        let mut tx = self.pool.begin().await?;
        type Texts = (
            Uuid,
            String,
            Vec<String>,
            Option<sqlx::types::Json<TurnContext>>,
        );
        let rows: Vec<Texts> = sqlx::query_as(
            "SELECT id, content, entities, context FROM memories
                 WHERE terms_version < $1 LIMIT $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(TERMS_VERSION)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let ids: Vec<Uuid> = rows.iter().map(|r| r.0).collect();
        // One array element per row; Postgres arrays of arrays must be rectangular.
        let terms: Vec<String> = rows
            .iter()
            .map(|(_, content, entities, context)| {
                search_terms(content, entities, context.as_ref().map(|c| &c.0)).join("\u{1f}")
            })
            .collect();
        // The terms feed only the keyword channel: updated_at and the index stay as they are.
        sqlx::query(
            "UPDATE memories m SET terms = string_to_array(r.terms, chr(31)), terms_version = $3
             FROM UNNEST($1::uuid[], $2::text[]) AS r(id, terms)
             WHERE m.id = r.id",
        )
        .bind(&ids)
        .bind(&terms)
        .bind(TERMS_VERSION)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(rows.len())
    }

    /// Memories by id, as the index needs them.
    pub async fn indexable(&self, ids: &[Uuid]) -> Result<Vec<Indexable>, StoreError> {
        let sql = format!(
            "SELECT {INDEXABLE_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
             WHERE m.id = ANY($1)"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(ids)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Memories waiting for the index, oldest first, that have not changed for `settle`.
    pub async fn pending_index(
        &self,
        limit: i64,
        settle_ms: i64,
    ) -> Result<Vec<Indexable>, StoreError> {
        let sql = format!(
            "SELECT {INDEXABLE_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
             WHERE m.index_state = 'pending'
               AND m.updated_at < clock_timestamp() - make_interval(secs => $2::double precision / 1000)
             ORDER BY m.updated_at LIMIT $1"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .bind(settle_ms)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Marks memories indexed (or removed from the index) unless they changed
    /// since they were read: a newer version stays pending.
    pub async fn mark_index_state(
        &self,
        rows: &[(Uuid, DateTime<Utc>)],
        state: &str,
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<Uuid> = rows.iter().map(|(id, _)| *id).collect();
        let stamps: Vec<DateTime<Utc>> = rows.iter().map(|(_, t)| *t).collect();
        sqlx::query(
            "UPDATE memories m SET index_state = $3
             FROM UNNEST($1::uuid[], $2::timestamptz[]) AS r(id, updated_at)
             WHERE m.id = r.id AND m.updated_at = r.updated_at",
        )
        .bind(&ids)
        .bind(&stamps)
        .bind(state)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every memory that belongs in the index, page by page (for a rebuild).
    pub async fn indexable_page(
        &self,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Indexable>, StoreError> {
        let sql = format!(
            "SELECT {INDEXABLE_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
             WHERE m.status = ANY($1) AND ($2::uuid IS NULL OR m.id > $2)
             ORDER BY m.id LIMIT $3"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&Status::INDEXED.map(Status::as_str)[..])
            .bind(after)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    /// The embedding models that memories use, as `(name, version, dimension)`.
    pub async fn embedding_models(&self) -> Result<Vec<(String, String, i32)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT DISTINCT m.embedding_model, m.embedding_version, coalesce(array_length(v.embedding, 1), 0)
             FROM memories m JOIN memory_vectors v ON v.id = m.id",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::rarest_terms;

    fn dfs(list: &[(&str, i64)]) -> Vec<(String, i64)> {
        list.iter().map(|(t, d)| (t.to_string(), *d)).collect()
    }

    #[test]
    fn the_rarest_terms_are_taken_within_the_budget() {
        let known = dfs(&[("john", 900), ("ecology", 3), ("dune", 40), ("read", 120)]);
        assert_eq!(rarest_terms(known, 200), ["ecology", "dune", "read"]);
    }

    #[test]
    fn the_rarest_term_is_taken_even_over_the_budget() {
        let known = dfs(&[("said", 1500), ("john", 900), ("gone", 0)]);
        assert_eq!(rarest_terms(known, 200), ["john"]);
        assert!(rarest_terms(Vec::new(), 200).is_empty());
    }
}
