//! Erasing a user from Postgres (`erasures`, migration 0010): the job record,
//! the one transaction that deletes every row of the user, and the work it
//! leaves to the places outside Postgres (stream sequences, index points),
//! written down by that same transaction so a killed job loses none of it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::{
    Store, StoreError,
    memories::{TERMS_VERSION, search_terms},
};
use hindsight_core::{
    erase::{Counts, Place},
    ids,
    turn::TurnContext,
};

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

/// The finished record of an erase: no user id, only its hash.
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

/// An index point still to remove: its model (which names its collection) and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, sqlx::FromRow)]
pub struct PendingPoint {
    pub erasure: Uuid,
    pub embedding_model: String,
    pub embedding_version: String,
    pub dimension: i32,
    pub point: Uuid,
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

    /// Whether an erase of the user is running (their new turns are refused meanwhile).
    pub async fn erasing(&self, tenant: &str, user_id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM erasures
                            WHERE tenant = $1 AND user_id = $2 AND status = 'running')",
        )
        .bind(tenant)
        .bind(user_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// What erasing the user from Postgres would remove, changing nothing.
    pub async fn erasable(&self, tenant: &str, user_id: &str) -> Result<Counts, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let row = sqlx::query(
            "SELECT
               (SELECT count(*) FROM memories WHERE tenant = $1 AND user_id = $2) AS memories,
               (SELECT count(*) FROM memory_sources s JOIN memories m ON m.id = s.memory_id
                 WHERE m.tenant = $1 AND m.user_id = $2) AS sources,
               (SELECT count(*) FROM memory_events e
                 WHERE e.tenant = $1 AND (e.user_id = $2 OR e.memory_id IN
                       (SELECT id FROM memories WHERE tenant = $1 AND user_id = $2))) AS events,
               (SELECT count(*) FROM turns WHERE tenant = $1 AND user_id = $2) AS turns,
               (SELECT count(*) FROM memory_terms WHERE tenant = $1 AND user_id = $2)
                 + (SELECT count(*) FROM memory_users WHERE tenant = $1 AND user_id = $2) AS keyword_stats,
               (SELECT count(*) FROM memories WHERE tenant = $1 AND user_id = $2
                 AND embedding IS NOT NULL AND index_state <> 'removed') AS index_points,
               (SELECT coalesce(sum(1 + cardinality(duplicate_seqs)), 0)::bigint FROM turns
                 WHERE tenant = $1 AND user_id = $2) AS turn_messages",
        )
        .bind(tenant)
        .bind(user_id)
        .fetch_one(&mut *conn)
        .await?;
        let n = |name: &str| -> Result<u64, StoreError> {
            Ok(row.try_get::<i64, _>(name)?.max(0) as u64)
        };
        let contexts = contexts_of(&mut conn, tenant, user_id).await?;
        Ok(Counts {
            memories: n("memories")?,
            sources: n("sources")?,
            events: n("events")?,
            turns: n("turns")?,
            keyword_stats: n("keyword_stats")?,
            contexts: contexts.len() as u64,
            index_points: n("index_points")?,
            stream_messages: BTreeMap::from([(TURNS_STREAM.to_string(), n("turn_messages")?)]),
        })
    }

    /// Deletes every row of the user in one transaction and writes down the
    /// stream sequences and index points the later places remove. Run again
    /// (a second pass for what was in flight), it removes only what arrived
    /// since; the counts of each pass are added to the job's.
    pub async fn erase_rows(&self, job: &Erasure) -> Result<Counts, StoreError> {
        let (tenant, user) = (job.tenant.as_str(), job.user_id.as_str());
        let mut tx = self.pool.begin().await?;
        // Holds the job while it changes, so that two callers resuming the same
        // job take their turns and count each row once.
        sqlx::query("SELECT 1 FROM erasures WHERE id = $1 FOR UPDATE")
            .bind(job.id)
            .execute(&mut *tx)
            .await?;
        // Every statement reads `$1` tenant, `$2` user; the job is `$3` where used.
        let exec = async |tx: &mut PgConnection, sql: &'static str| -> Result<u64, StoreError> {
            Ok(sqlx::query(sql)
                .bind(tenant)
                .bind(user)
                .execute(tx)
                .await?
                .rows_affected())
        };
        let for_job = async |tx: &mut PgConnection, sql: &'static str| -> Result<u64, StoreError> {
            Ok(sqlx::query(sql)
                .bind(tenant)
                .bind(user)
                .bind(job.id)
                .execute(tx)
                .await?
                .rows_affected())
        };
        let mut c = Counts::default();
        // Work for later places first, from the rows about to go.
        for_job(
            &mut tx,
            "INSERT INTO erasure_points (erasure, embedding_model, embedding_version, dimension, point)
             SELECT $3, embedding_model, embedding_version, cardinality(embedding), id FROM memories
              WHERE tenant = $1 AND user_id = $2 AND embedding IS NOT NULL AND index_state <> 'removed'
             ON CONFLICT DO NOTHING",
        )
        .await?;
        for_job(
            &mut tx,
            "INSERT INTO erasure_messages (erasure, stream, seq)
             SELECT $3, 'TURNS', s FROM turns, unnest(stream_seq || duplicate_seqs) AS s
              WHERE tenant = $1 AND user_id = $2
             ON CONFLICT DO NOTHING",
        )
        .await?;
        c.contexts = clear_contexts(&mut tx, tenant, user).await?;
        c.events = exec(
            &mut tx,
            "DELETE FROM memory_events
              WHERE tenant = $1 AND (user_id = $2 OR memory_id IN
                    (SELECT id FROM memories WHERE tenant = $1 AND user_id = $2))",
        )
        .await?;
        c.sources = exec(
            &mut tx,
            "DELETE FROM memory_sources WHERE memory_id IN
                    (SELECT id FROM memories WHERE tenant = $1 AND user_id = $2)",
        )
        .await?;
        // The statistics go before the memories, so that the trigger keeping
        // them finds nothing to update for each deleted memory.
        c.keyword_stats = exec(
            &mut tx,
            "DELETE FROM memory_terms WHERE tenant = $1 AND user_id = $2",
        )
        .await?
            + exec(
                &mut tx,
                "DELETE FROM memory_users WHERE tenant = $1 AND user_id = $2",
            )
            .await?;
        c.memories = exec(
            &mut tx,
            "DELETE FROM memories WHERE tenant = $1 AND user_id = $2",
        )
        .await?;
        // Deleting the memories counted their terms out again; the rows they
        // left behind hold nothing of the user but their words.
        exec(
            &mut tx,
            "DELETE FROM memory_terms WHERE tenant = $1 AND user_id = $2",
        )
        .await?;
        exec(
            &mut tx,
            "DELETE FROM memory_users WHERE tenant = $1 AND user_id = $2",
        )
        .await?;
        c.turns = exec(
            &mut tx,
            "DELETE FROM turns WHERE tenant = $1 AND user_id = $2",
        )
        .await?;
        // Points are counted when the index's owner removes them, messages
        // when their stream does.
        add_counts(&mut tx, job.id, &c).await?;
        mark_done(&mut tx, job.id, Place::Database).await?;
        tx.commit().await?;
        Ok(c)
    }

    /// Index points that erases are waiting for, oldest job first.
    pub async fn pending_points(&self, limit: i64) -> Result<Vec<PendingPoint>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT erasure, embedding_model, embedding_version, dimension, point
               FROM erasure_points ORDER BY erasure, point LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records points as removed from the index, each counted once to its job.
    pub async fn points_removed(&self, points: &[PendingPoint]) -> Result<(), StoreError> {
        let mut by_job: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
        for p in points {
            by_job.entry(p.erasure).or_default().push(p.point);
        }
        let mut tx = self.pool.begin().await?;
        for (job, ids) in by_job {
            let removed =
                sqlx::query("DELETE FROM erasure_points WHERE erasure = $1 AND point = ANY($2)")
                    .bind(job)
                    .bind(&ids)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            let c = Counts {
                index_points: removed,
                ..Counts::default()
            };
            add_counts(&mut tx, job, &c).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// How many of the job's index points are still to remove.
    pub async fn points_left(&self, job: Uuid) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM erasure_points WHERE erasure = $1")
                .bind(job)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Marks a place of the job done.
    pub async fn erasure_place_done(&self, job: Uuid, place: Place) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        mark_done(&mut conn, job, place).await
    }

    /// Ends the job: its record keeps the user's hash and the counts only.
    pub async fn finish_erasure(&self, job: Uuid) -> Result<ErasureRecord, StoreError> {
        let row = sqlx::query(
            "UPDATE erasures SET status = 'finished', user_id = NULL,
                    finished_at = coalesce(finished_at, clock_timestamp())
              WHERE id = $1
             RETURNING id, tenant, user_hash, actor, started_at, finished_at, counts",
        )
        .bind(job)
        .fetch_one(&self.pool)
        .await?;
        record(&row)
    }

    /// The job's record as it stands.
    pub async fn erasure_record(&self, job: Uuid) -> Result<ErasureRecord, StoreError> {
        let row = sqlx::query(
            "SELECT id, tenant, user_hash, actor, started_at, finished_at, counts
               FROM erasures WHERE id = $1",
        )
        .bind(job)
        .fetch_one(&self.pool)
        .await?;
        record(&row)
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

/// Adds counts to the job's record (the caller holds the job's row).
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

/// Other users' memories whose context (the turn they replied to, kept to be
/// shown and searched) is a turn of this user: `(id, content, entities)`.
async fn contexts_of(
    conn: &mut PgConnection,
    tenant: &str,
    user_id: &str,
) -> Result<Vec<(Uuid, String, Vec<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT m.id, m.content, m.entities FROM memories m
          WHERE m.tenant = $1 AND m.user_id <> $2 AND m.context IS NOT NULL
            AND m.context->>'turn_id' IN (SELECT turn_id FROM turns WHERE tenant = $1 AND user_id = $2)",
    )
    .bind(tenant)
    .bind(user_id)
    .fetch_all(conn)
    .await?)
}

/// Clears those contexts, and the search terms they gave.
async fn clear_contexts(
    conn: &mut PgConnection,
    tenant: &str,
    user_id: &str,
) -> Result<u64, StoreError> {
    let rows = contexts_of(conn, tenant, user_id).await?;
    for (id, content, entities) in &rows {
        sqlx::query(
            "UPDATE memories SET context = NULL, terms = $2, terms_version = $3 WHERE id = $1",
        )
        .bind(id)
        .bind(search_terms(content, entities, None::<&TurnContext>))
        .bind(TERMS_VERSION)
        .execute(&mut *conn)
        .await?;
    }
    Ok(rows.len() as u64)
}
