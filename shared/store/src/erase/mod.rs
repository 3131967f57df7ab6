//! Erasing a user from Postgres (`erasures`, migration 0010): the job record
//! ([`Erasure`]), the one transaction that deletes every row of the user
//! ([`rows`]), and the work it leaves to the places outside Postgres, written
//! down by that same transaction so a killed job loses none of it ([`work`]:
//! stream messages by sequence, index points by id).

mod rows;
pub mod work;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::{Store, StoreError};
use hindsight_core::{
    erase::{Counts, Place},
    ids,
};

pub use work::{PendingMessage, PendingPoint};

/// The stream the `turns` archive's sequences are in (relative to the namespace).
pub const TURNS_STREAM: &str = "TURNS";

/// One erase of one user, as its record holds it.
#[derive(Debug, Clone)]
pub struct Erasure {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    pub actor: String,
    pub started_at: DateTime<Utc>,
    /// The places done so far.
    pub done: Vec<Place>,
    pub counts: Counts,
    /// Whether this call picked up a job an earlier call left running.
    pub resumed: bool,
}

impl Erasure {
    pub fn is_done(&self, place: Place) -> bool {
        self.done.contains(&place)
    }
}

/// The record of an erase. A finished one has no user id, only its hash.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ErasureRecord {
    pub id: Uuid,
    pub tenant: String,
    pub user_hash: String,
    pub actor: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub counts: Counts,
}

/// The hash an erase's record keeps instead of the user's id.
pub fn user_hash(tenant: &str, user_id: &str) -> String {
    ids::digest(&[tenant, user_id], 64)
}

fn places(names: Vec<String>) -> Result<Vec<Place>, StoreError> {
    Ok(names.iter().map(|n| n.parse()).collect::<Result<_, _>>()?)
}

fn counts(value: serde_json::Value) -> Counts {
    // Written by this module only; a record it cannot read counts nothing.
    serde_json::from_value(value).unwrap_or_default()
}

impl Store {
    /// Starts the erase of a user, or picks up the one already running for
    /// them (started by an earlier call that was killed or is still going).
    pub async fn start_erasure(
        &self,
        tenant: &str,
        user_id: &str,
        actor: &str,
    ) -> Result<Erasure, StoreError> {
        let id = Uuid::new_v4();
        sqlx::query(
            "INSERT INTO erasures (id, tenant, user_id, user_hash, actor)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (tenant, user_id) WHERE status = 'running' DO NOTHING",
        )
        .bind(id)
        .bind(tenant)
        .bind(user_id)
        .bind(user_hash(tenant, user_id))
        .bind(actor)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query(
            "SELECT id, actor, started_at, places, counts FROM erasures
             WHERE tenant = $1 AND user_id = $2 AND status = 'running'",
        )
        .bind(tenant)
        .bind(user_id)
        .fetch_one(&self.pool)
        .await?;
        let found: Uuid = row.try_get("id")?;
        Ok(Erasure {
            id: found,
            tenant: tenant.to_string(),
            user_id: user_id.to_string(),
            actor: row.try_get("actor")?,
            started_at: row.try_get("started_at")?,
            done: places(row.try_get("places")?)?,
            counts: counts(row.try_get("counts")?),
            resumed: found != id,
        })
    }

    /// Marks a place of the job done.
    pub async fn erasure_place_done(&self, job: Uuid, place: Place) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        mark_done(&mut conn, job, place).await
    }

    /// Ends the job if nothing is left for it to remove: its record then keeps
    /// the user's hash and the counts only. `None` while stream messages,
    /// index points or steps begun remain (the filter may have refused a turn of the user
    /// since the last look).
    pub async fn finish_erasure(&self, job: Uuid) -> Result<Option<ErasureRecord>, StoreError> {
        let mut tx = self.pool.begin().await?;
        // Waits for a filter batch that holds the job (it refuses a turn of the
        // user and writes its sequence down); from then on, the filter sees the
        // job finished and takes the user's turns as new ones.
        sqlx::query("SELECT 1 FROM erasures WHERE id = $1 FOR UPDATE")
            .bind(job)
            .execute(&mut *tx)
            .await?;
        let left: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM erasure_messages WHERE erasure = $1)
                 OR EXISTS (SELECT 1 FROM erasure_points WHERE erasure = $1)
                 OR EXISTS (SELECT 1 FROM erasure_steps WHERE erasure = $1)",
        )
        .bind(job)
        .fetch_one(&mut *tx)
        .await?;
        if left {
            return Ok(None);
        }
        let row = sqlx::query(
            "UPDATE erasures SET status = 'finished', user_id = NULL,
                    finished_at = coalesce(finished_at, clock_timestamp())
              WHERE id = $1
             RETURNING id, tenant, user_hash, actor, started_at, finished_at, counts",
        )
        .bind(job)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(record(&row)?))
    }
}

fn record(row: &sqlx::postgres::PgRow) -> Result<ErasureRecord, StoreError> {
    Ok(ErasureRecord {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        user_hash: row.try_get("user_hash")?,
        actor: row.try_get("actor")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        counts: counts(row.try_get("counts")?),
    })
}

/// Adds counts to the job's record, holding its row until the caller commits.
async fn add_counts(conn: &mut PgConnection, job: Uuid, add: &Counts) -> Result<(), StoreError> {
    let current: serde_json::Value =
        sqlx::query_scalar("SELECT counts FROM erasures WHERE id = $1 FOR UPDATE")
            .bind(job)
            .fetch_one(&mut *conn)
            .await?;
    let mut total = counts(current);
    total.add(add);
    let value = serde_json::to_value(&total).unwrap_or_default();
    sqlx::query("UPDATE erasures SET counts = $2 WHERE id = $1")
        .bind(job)
        .bind(value)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

async fn mark_done(conn: &mut PgConnection, job: Uuid, place: Place) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE erasures SET places = array_append(places, $2)
          WHERE id = $1 AND NOT ($2 = ANY (places))",
    )
    .bind(job)
    .bind(place.as_str())
    .execute(conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_user_hash_is_what_docs_erase_md_says_to_compute() {
        // printf 'acme\x1fann\x1f' | sha256sum
        assert_eq!(
            super::user_hash("acme", "ann"),
            "e437a8ef644f13a6632d97b9a04bcceb7a96d0628bd25e09156632bec4e8351d"
        );
    }
}
