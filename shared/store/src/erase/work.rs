//! What an erase still has to remove outside Postgres: stream messages by
//! stream and sequence (`erasure_messages`), index points by model and id
//! (`erasure_points`), and steps that remove many at once (`erasure_steps`:
//! an export's rewrite, the working-memory purge). Each is counted to its job
//! once: a message or a point when its row is deleted, a step when it begins.

use std::collections::{BTreeMap, HashSet};

use uuid::Uuid;

use super::{TURNS_STREAM, add_counts};
use crate::{Store, StoreError, row::IndexPoint};
use hindsight_core::erase::Counts;

/// An index point an erase waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, sqlx::FromRow)]
pub struct PendingPoint {
    pub erasure: Uuid,
    #[sqlx(flatten)]
    pub at: IndexPoint,
}

/// A stream message still to remove: its stream (relative to the namespace) and sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::FromRow)]
pub struct PendingMessage {
    pub stream: String,
    pub seq: i64,
}

/// A turn the filter received: its tenant, user and TURNS sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReceivedTurn {
    pub tenant: String,
    pub user_id: String,
    pub seq: i64,
}

impl Store {
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
        // The reconciler calls this every loop: no transaction for nothing.
        if points.is_empty() {
            return Ok(());
        }
        let mut by_job: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
        for p in points {
            by_job.entry(p.erasure).or_default().push(p.at.point);
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

    /// Writes down messages for the job to remove; returns how many were new.
    pub async fn record_messages(
        &self,
        job: Uuid,
        messages: &[PendingMessage],
    ) -> Result<u64, StoreError> {
        if messages.is_empty() {
            return Ok(0);
        }
        let (streams, seqs): (Vec<&str>, Vec<i64>) =
            messages.iter().map(|m| (m.stream.as_str(), m.seq)).unzip();
        Ok(sqlx::query(
            "INSERT INTO erasure_messages (erasure, stream, seq)
             SELECT $1, s, q FROM UNNEST($2::text[], $3::bigint[]) AS m(s, q)
             ON CONFLICT DO NOTHING",
        )
        .bind(job)
        .bind(&streams)
        .bind(&seqs)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// The job's messages still to remove, in stream and sequence order.
    pub async fn pending_messages(
        &self,
        job: Uuid,
        limit: i64,
    ) -> Result<Vec<PendingMessage>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT stream, seq FROM erasure_messages WHERE erasure = $1
              ORDER BY stream, seq LIMIT $2",
        )
        .bind(job)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records messages as removed from their streams, each counted once.
    pub async fn messages_removed(
        &self,
        job: Uuid,
        messages: &[PendingMessage],
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let (streams, seqs): (Vec<&str>, Vec<i64>) =
            messages.iter().map(|m| (m.stream.as_str(), m.seq)).unzip();
        let mut tx = self.pool.begin().await?;
        let removed: Vec<(String, i64)> = sqlx::query_as(
            "WITH gone AS (
                DELETE FROM erasure_messages e USING UNNEST($2::text[], $3::bigint[]) AS m(s, q)
                 WHERE e.erasure = $1 AND e.stream = m.s AND e.seq = m.q
                RETURNING e.stream)
             SELECT stream, count(*) FROM gone GROUP BY stream",
        )
        .bind(job)
        .bind(&streams)
        .bind(&seqs)
        .fetch_all(&mut *tx)
        .await?;
        let c = Counts {
            stream_messages: removed
                .into_iter()
                .map(|(s, n)| (s, n.max(0) as u64))
                .collect(),
            ..Counts::default()
        };
        add_counts(&mut tx, job, &c).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The filter's check: which of these turns belong to a user being erased.
    /// Their sequences are written down for the erase to remove from TURNS,
    /// in the same statement, so the erase cannot finish in between.
    pub async fn refuse_erased(&self, turns: &[ReceivedTurn]) -> Result<HashSet<i64>, StoreError> {
        if turns.is_empty() {
            return Ok(HashSet::new());
        }
        let tenants: Vec<&str> = turns.iter().map(|t| t.tenant.as_str()).collect();
        let users: Vec<&str> = turns.iter().map(|t| t.user_id.as_str()).collect();
        let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
        let refused: Vec<i64> = sqlx::query_scalar(
            "WITH erasing AS (
                SELECT e.id, t.q FROM erasures e
                  JOIN UNNEST($1::text[], $2::text[], $3::bigint[]) AS t(tenant, user_id, q)
                    ON e.tenant = t.tenant AND e.user_id = t.user_id
                 WHERE e.status = 'running'
                   FOR SHARE OF e),
             recorded AS (
                INSERT INTO erasure_messages (erasure, stream, seq)
                SELECT id, $4, q FROM erasing ON CONFLICT DO NOTHING)
             SELECT q FROM erasing",
        )
        .bind(&tenants)
        .bind(&users)
        .bind(&seqs)
        .bind(TURNS_STREAM)
        .fetch_all(&self.pool)
        .await?;
        Ok(refused.into_iter().collect())
    }

    /// Begins a step that removes many things at once: what it removes is
    /// counted now, with the audit events of `purged` (memories purged before
    /// the erase, whose events did not name their user) deleted and counted
    /// too. `false` when the step was begun already (a job resumed after a
    /// kill): nothing is counted again, and the caller runs the step again.
    pub async fn begin_step(
        &self,
        job: &super::Erasure,
        step: &str,
        removes: &Counts,
        purged: &[Uuid],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let new = sqlx::query(
            "INSERT INTO erasure_steps (erasure, step) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(job.id)
        .bind(step)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if new {
            let events =
                sqlx::query("DELETE FROM memory_events WHERE tenant = $1 AND memory_id = ANY($2)")
                    .bind(&job.tenant)
                    .bind(purged)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            let mut c = removes.clone();
            c.events += events;
            add_counts(&mut tx, job.id, &c).await?;
        }
        tx.commit().await?;
        Ok(new)
    }

    /// The step ran to its end.
    pub async fn step_done(&self, job: Uuid, step: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM erasure_steps WHERE erasure = $1 AND step = $2")
            .bind(job)
            .bind(step)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The steps the job began and did not end (a resumed job's).
    pub async fn steps_begun(&self, job: Uuid) -> Result<Vec<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT step FROM erasure_steps WHERE erasure = $1 ORDER BY step")
                .bind(job)
                .fetch_all(&self.pool)
                .await?,
        )
    }
}
