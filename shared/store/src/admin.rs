//! Reading and changing single memories on behalf of a tenant (the gateway's
//! `/v1/memories/{id}` and the MCP tools), and the per-user overview. Every
//! change bumps `updated_at` and sets the memory pending, so the reconciler
//! brings the index in step (or removes it from the index), and is written to
//! the audit log with its actor and the values it replaced.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::{
    Store, StoreError,
    memories::{TERMS_VERSION, search_terms},
    row::{MEMORY_ROW_COLUMNS, MemoryRow},
};
use hindsight_core::{fact::FactType, memory::Status, turn::TurnContext};

use hindsight_text::statement;

/// A change to one memory; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct MemoryPatch {
    /// New content with its embedding (made by the caller with the memory's model).
    pub content: Option<(String, Vec<f32>)>,
    pub importance: Option<f32>,
    pub confidence: Option<f32>,
    pub fact_type: Option<FactType>,
    /// `Active` or `Archived` (restoring or archiving by hand).
    pub status: Option<Status>,
    /// Left alone by the janitor.
    pub pinned: Option<bool>,
}

/// The counts and latest writes of one user.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub user_id: String,
    pub total: i64,
    pub by_status: Vec<(String, i64)>,
    /// Active memories only.
    pub by_fact_type: Vec<(String, i64)>,
    pub sessions: i64,
    pub first_at: Option<DateTime<Utc>>,
    pub last_at: Option<DateTime<Utc>>,
    pub latest: Vec<LatestWrite>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct LatestWrite {
    pub id: Uuid,
    #[sqlx(try_from = "String")]
    pub fact_type: FactType,
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub content: String,
    pub updated_at: DateTime<Utc>,
}

impl Store {
    /// One memory of the tenant, whatever its user or status.
    pub async fn memory(&self, tenant: &str, id: Uuid) -> Result<Option<MemoryRow>, StoreError> {
        let sql = format!(
            "SELECT {MEMORY_ROW_COLUMNS} FROM memories m WHERE m.tenant = $1 AND m.id = $2"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Applies a patch; `None` when the tenant has no such memory (deleted
    /// memories cannot be changed).
    pub async fn update_memory(
        &self,
        tenant: &str,
        id: Uuid,
        patch: &MemoryPatch,
        actor: &str,
    ) -> Result<Option<MemoryRow>, StoreError> {
        let mut tx = self.pool.begin().await?;
        type Before = (
            String,
            f32,
            f32,
            String,
            String,
            Vec<String>,
            Option<sqlx::types::Json<TurnContext>>,
            bool,
        );
        let before: Option<Before> = sqlx::query_as(
            "SELECT content, importance, confidence, fact_type, status, entities, context, pinned FROM memories
             WHERE tenant = $1 AND id = $2 AND status <> 'deleted' FOR UPDATE",
        )
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((content, importance, confidence, fact_type, status, entities, context, pinned)) =
            before
        else {
            return Ok(None);
        };
        let (new_content, embedding) = match &patch.content {
            Some((c, e)) => (Some(c.as_str()), Some(e.as_slice())),
            None => (None, None),
        };
        sqlx::query(
            "UPDATE memories SET
                content = coalesce($3, content),
                content_key = coalesce($4, content_key),
                terms = coalesce($5, terms),
                terms_version = CASE WHEN $5 IS NULL THEN terms_version ELSE $10 END,
                importance = coalesce($6, importance),
                confidence = coalesce($7, confidence),
                fact_type = coalesce($8, fact_type),
                status = coalesce($9, status),
                archived_at = CASE WHEN $9 = 'archived' THEN now() WHEN $9 = 'active' THEN NULL ELSE archived_at END,
                pinned = coalesce($11, pinned),
                updated_at = clock_timestamp(), index_state = 'pending'
             WHERE tenant = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(id)
        .bind(new_content)
        .bind(new_content.map(statement::content_key))
        .bind(new_content.map(|c| search_terms(c, &entities, context.as_ref().map(|j| &j.0))))
        .bind(patch.importance)
        .bind(patch.confidence)
        .bind(patch.fact_type.map(FactType::as_str))
        .bind(patch.status.map(Status::as_str))
        .bind(TERMS_VERSION)
        .bind(patch.pinned)
        .execute(&mut *tx)
        .await?;
        if let Some(embedding) = embedding {
            super::vectors::put(&mut tx, id, embedding).await?;
        }
        let before_status = Status::try_from(status.as_str())?;
        let event = match patch.status {
            Some(Status::Archived) if before_status != Status::Archived => "archive",
            Some(Status::Active) if before_status != Status::Active => "restore",
            _ => "update",
        };
        let detail = json!({
            "before": {"content": content, "importance": importance, "confidence": confidence,
                       "fact_type": fact_type, "status": status, "pinned": pinned},
            "changed": {"content": new_content, "importance": patch.importance,
                        "confidence": patch.confidence, "fact_type": patch.fact_type, "status": patch.status,
                        "pinned": patch.pinned},
        });
        super::provenance::add_event(&mut tx, id, tenant, event, actor, detail).await?;
        tx.commit().await?;
        self.memory(tenant, id).await
    }

    /// Lowers a memory's importance by `factor` (0–1) of itself; 1 archives
    /// it (out of the index and of recall, still in Postgres).
    pub async fn forget_memory(
        &self,
        tenant: &str,
        id: Uuid,
        factor: f32,
        actor: &str,
    ) -> Result<Option<MemoryRow>, StoreError> {
        let factor = factor.clamp(0.0, 1.0);
        let mut tx = self.pool.begin().await?;
        let before: Option<(f32, String)> = sqlx::query_as(
            "SELECT importance, status FROM memories
             WHERE tenant = $1 AND id = $2 AND status <> 'deleted' FOR UPDATE",
        )
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((importance, status)) = before else {
            return Ok(None);
        };
        let archive = factor >= 1.0;
        sqlx::query(
            "UPDATE memories SET importance = $3,
                status = CASE WHEN $4 THEN 'archived' ELSE status END,
                archived_at = CASE WHEN $4 THEN now() ELSE archived_at END,
                updated_at = clock_timestamp(), index_state = 'pending'
             WHERE tenant = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(id)
        .bind(importance * (1.0 - factor))
        .bind(archive)
        .execute(&mut *tx)
        .await?;
        let detail =
            json!({"before": {"importance": importance, "status": status}, "decay_factor": factor});
        let event = if archive { "archive" } else { "decay" };
        super::provenance::add_event(&mut tx, id, tenant, event, actor, detail).await?;
        tx.commit().await?;
        self.memory(tenant, id).await
    }

    /// Soft delete: the row stays (status `deleted`, out of the index and of
    /// every recall) until the janitor purges it. `false` when there is no such memory.
    pub async fn delete_memory(
        &self,
        tenant: &str,
        id: Uuid,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let before: Option<String> = sqlx::query_scalar(
            "SELECT status FROM memories WHERE tenant = $1 AND id = $2 AND status <> 'deleted' FOR UPDATE",
        )
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(before) = before else {
            return Ok(false);
        };
        sqlx::query(
            "UPDATE memories SET status = 'deleted', archived_at = now(),
                updated_at = clock_timestamp(), index_state = 'pending'
             WHERE tenant = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        super::provenance::add_event(
            &mut tx,
            id,
            tenant,
            "delete",
            actor,
            json!({"before": {"status": before}}),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Counts by status and type, sessions, first and last dates, latest writes.
    pub async fn overview(
        &self,
        tenant: &str,
        user_id: &str,
        latest: usize,
    ) -> Result<Overview, StoreError> {
        let by_status: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, count(*) FROM memories WHERE tenant = $1 AND user_id = $2
             GROUP BY status ORDER BY status",
        )
        .bind(tenant)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        let by_fact_type: Vec<(String, i64)> = sqlx::query_as(
            "SELECT fact_type, count(*) FROM memories WHERE tenant = $1 AND user_id = $2 AND status = 'active'
             GROUP BY fact_type ORDER BY count(*) DESC, fact_type",
        )
        .bind(tenant)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        let (sessions, first_at, last_at): (i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
            sqlx::query_as(
                "SELECT count(DISTINCT session_id), min(coalesce(occurred_at, created_at)),
                        max(coalesce(occurred_at, created_at))
                 FROM memories WHERE tenant = $1 AND user_id = $2 AND status <> 'deleted'",
            )
            .bind(tenant)
            .bind(user_id)
            .fetch_one(&self.pool)
            .await?;
        let latest: Vec<LatestWrite> = sqlx::query_as(
            "SELECT id, fact_type, status, content, updated_at FROM memories
             WHERE tenant = $1 AND user_id = $2 AND status <> 'deleted'
             ORDER BY updated_at DESC, id LIMIT $3",
        )
        .bind(tenant)
        .bind(user_id)
        .bind(i64::try_from(latest).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        Ok(Overview {
            user_id: user_id.to_string(),
            total: by_status.iter().map(|(_, n)| n).sum(),
            by_status,
            by_fact_type,
            sessions,
            first_at,
            last_at,
            latest,
        })
    }
}

impl Store {
    /// The embedding model of a memory of the tenant.
    pub async fn memory_model(&self, tenant: &str, id: Uuid) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar(
                "SELECT embedding_model FROM memories WHERE tenant = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?,
        )
    }
}
