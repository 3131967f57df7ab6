//! `maintenance_runs` rows and the lock that lets one run execute at a time
//! across every janitor replica.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::{Store, StoreError};

/// One run as recorded.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct RunRow {
    pub id: Uuid,
    pub tenant: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The run's clock.
    pub as_of: DateTime<Utc>,
    pub scheduled_for: Option<DateTime<Utc>>,
    pub trigger: String,
    pub dry_run: bool,
    pub status: String,
    pub counts: Value,
    pub errors: Value,
    pub restored_at: Option<DateTime<Utc>>,
    pub host: Option<String>,
}

pub(crate) const RUN_COLUMNS: &str = "id, tenant, started_at, finished_at, as_of, scheduled_for, trigger, dry_run, status, counts, errors, restored_at, host";

/// A new run to record.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub id: Uuid,
    pub tenant: Option<&'a str>,
    pub as_of: DateTime<Utc>,
    pub scheduled_for: Option<DateTime<Utc>>,
    pub trigger: &'a str,
    pub dry_run: bool,
    pub host: &'a str,
}

/// Held while a run executes. It is a session-level advisory lock on a
/// connection of its own, so a janitor that dies (or is killed) releases it
/// with its connection.
pub struct JanitorLock {
    conn: PgConnection,
}

/// The advisory lock key of the janitor (one per database).
const LOCK_KEY: &str = "hindsight:janitor";

impl JanitorLock {
    /// Releases the lock and closes its connection.
    pub async fn release(mut self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
            .bind(LOCK_KEY)
            .execute(&mut self.conn)
            .await?;
        self.conn.close().await?;
        Ok(())
    }
}

impl Store {
    /// Takes the janitor lock if no other run holds it.
    pub async fn try_lock_janitor(&self) -> Result<Option<JanitorLock>, StoreError> {
        let options = self.pool.connect_options();
        let mut conn = PgConnection::connect_with(&options).await?;
        let locked: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
                .bind(LOCK_KEY)
                .fetch_one(&mut conn)
                .await?;
        if locked {
            Ok(Some(JanitorLock { conn }))
        } else {
            conn.close().await?;
            Ok(None)
        }
    }

    /// A connection of its own for a run's steps (a dry run keeps one
    /// transaction open on it for the whole run).
    ///
    /// Its commits do not wait for the WAL to reach the disk (a run commits
    /// hundreds of chunks): a chunk lost in a crash is one the resumed run
    /// does again, as the chunk's counts go with it, and an export is synced
    /// before the chunk that deletes what it holds commits.
    pub async fn dedicated_connection(&self) -> Result<PgConnection, StoreError> {
        let mut conn = PgConnection::connect_with(&self.pool.connect_options()).await?;
        sqlx::query("SET synchronous_commit = off")
            .execute(&mut conn)
            .await?;
        Ok(conn)
    }

    /// Records a run as started. `false` when its schedule slot already has a
    /// real run (another janitor served it).
    pub async fn insert_run(&self, run: &NewRun<'_>) -> Result<bool, StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO maintenance_runs (id, tenant, as_of, scheduled_for, trigger, dry_run, host)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT DO NOTHING",
        )
        .bind(run.id)
        .bind(run.tenant)
        .bind(run.as_of)
        .bind(run.scheduled_for)
        .bind(run.trigger)
        .bind(run.dry_run)
        .bind(run.host)
        .execute(&self.pool)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    /// A real run left `running` by a janitor that died: only called under
    /// the lock, so nobody is executing it.
    pub async fn interrupted_run(&self) -> Result<Option<RunRow>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM maintenance_runs
             WHERE status = 'running' AND NOT dry_run ORDER BY started_at DESC LIMIT 1"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Marks dry runs left `running` by a janitor that died (nothing to resume:
    /// their changes were rolled back with their connection).
    pub async fn abandon_dry_runs(&self) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "UPDATE maintenance_runs SET status = 'interrupted', finished_at = now()
             WHERE status = 'running' AND dry_run",
        )
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Whether a real run already serves this schedule slot (running, finished or restored).
    pub async fn slot_served(&self, scheduled_for: DateTime<Utc>) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM maintenance_runs
                            WHERE scheduled_for = $1 AND NOT dry_run AND status <> 'failed')",
        )
        .bind(scheduled_for)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Records the run's counts so far (inside the transaction of the changes they count).
    pub async fn save_run_counts(
        conn: &mut PgConnection,
        id: Uuid,
        counts: &Value,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE maintenance_runs SET counts = $2 WHERE id = $1")
            .bind(id)
            .bind(counts)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Ends a run: `finished` or `failed`, with its final counts and errors.
    pub async fn finish_run(
        &self,
        id: Uuid,
        status: &str,
        counts: &Value,
        errors: &Value,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE maintenance_runs SET status = $2, counts = $3, errors = $4, finished_at = now() WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .bind(counts)
        .bind(errors)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn run_row(&self, id: Uuid) -> Result<Option<RunRow>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM maintenance_runs WHERE id = $1");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The latest runs, newest first.
    pub async fn runs(&self, limit: i64) -> Result<Vec<RunRow>, StoreError> {
        let sql =
            format!("SELECT {RUN_COLUMNS} FROM maintenance_runs ORDER BY started_at DESC LIMIT $1");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    /// The `as_of` of the latest real run that finished before `before`.
    pub async fn previous_run_as_of(
        &self,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT max(as_of) FROM maintenance_runs
             WHERE NOT dry_run AND status IN ('finished', 'restored') AND as_of < $1",
        )
        .bind(before)
        .fetch_one(&self.pool)
        .await?)
    }
}
