//! The retention of the `turns` archive: turns past one age are emptied
//! (content, metadata and extracted facts dropped; id, user, session, fate,
//! reason, flags and times kept), past another deleted, each exported first
//! as one JSON line (`"record": "turn"`) in the run's export; and the way
//! back from those lines. Also the index points purges leave to the
//! reconciler (`purged_points`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{Store, StoreError, row::IndexPoint};

/// The field that marks a turn's line in an export (memory lines have none).
pub const RECORD: &str = "record";
/// Its value on a turn's line.
pub const TURN: &str = "turn";

/// Where a read of old turns stands: after this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPosition {
    pub received_at: DateTime<Utc>,
    pub tenant: String,
    pub turn_id: String,
}

/// One old turn: its key, when it was received, and (for an export) the
/// whole row as one JSON text.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OldTurn {
    pub tenant: String,
    pub turn_id: String,
    pub received_at: DateTime<Utc>,
    pub line: Option<String>,
}

impl OldTurn {
    pub fn position(&self) -> TurnPosition {
        TurnPosition {
            received_at: self.received_at,
            tenant: self.tenant.clone(),
            turn_id: self.turn_id.clone(),
        }
    }
}

/// Which old turns a step reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStep {
    /// Turns still holding their content.
    Empty,
    /// Every turn, emptied or not.
    Purge,
}

/// Turns (of `tenant`, if any) received at or before `before`, after `from`,
/// in the order received; with their rows as export lines when `lines`.
pub async fn old_turns(
    conn: &mut PgConnection,
    step: TurnStep,
    tenant: Option<&str>,
    before: DateTime<Utc>,
    from: Option<&TurnPosition>,
    limit: i64,
    lines: bool,
) -> Result<Vec<OldTurn>, StoreError> {
    let emptied = match step {
        TurnStep::Empty => "AND t.content_dropped_at IS NULL",
        TurnStep::Purge => "",
    };
    // Two texts rather than one with `$3 IS NULL OR …`: a prepared plan then
    // starts its index range at the position.
    let after = match from {
        Some(_) => {
            "AND t.received_at >= $5
             AND (t.received_at, t.tenant, t.turn_id) > ($5::timestamptz, $6::text, $7::text)"
        }
        None => "",
    };
    let sql = format!(
        "SELECT t.tenant, t.turn_id, t.received_at,
                CASE WHEN $4 THEN (to_jsonb(t) || jsonb_build_object('{RECORD}', '{TURN}'))::text END AS line
           FROM turns t
          WHERE t.received_at <= $2 {emptied} {after} AND ($1::text IS NULL OR t.tenant = $1)
          ORDER BY t.received_at, t.tenant, t.turn_id LIMIT $3"
    );
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(before)
        .bind(limit)
        .bind(lines);
    if let Some(p) = from {
        query = query
            .bind(p.received_at)
            .bind(p.tenant.as_str())
            .bind(p.turn_id.as_str());
    }
    Ok(query.fetch_all(conn).await?)
}

/// Keys as two arrays, for `unnest`.
fn keys(turns: &[OldTurn]) -> (Vec<&str>, Vec<&str>) {
    turns
        .iter()
        .map(|t| (t.tenant.as_str(), t.turn_id.as_str()))
        .unzip()
}

/// Drops the content, metadata and facts of `turns`, marking when; returns
/// the tenant of each turn emptied.
pub async fn empty_turns(
    conn: &mut PgConnection,
    turns: &[OldTurn],
    at: DateTime<Utc>,
) -> Result<Vec<String>, StoreError> {
    let (tenants, ids) = keys(turns);
    Ok(sqlx::query_scalar(
        "UPDATE turns t SET content = '', metadata = '{}'::jsonb, facts = NULL, content_dropped_at = $3
           FROM unnest($1::text[], $2::text[]) AS k(tenant, turn_id)
          WHERE t.tenant = k.tenant AND t.turn_id = k.turn_id AND t.content_dropped_at IS NULL
         RETURNING t.tenant",
    )
    .bind(&tenants)
    .bind(&ids)
    .bind(at)
    .fetch_all(conn)
    .await?)
}

/// Deletes `turns` from the archive; returns the tenant of each turn deleted.
pub async fn delete_turns(
    conn: &mut PgConnection,
    turns: &[OldTurn],
) -> Result<Vec<String>, StoreError> {
    let (tenants, ids) = keys(turns);
    Ok(sqlx::query_scalar(
        "DELETE FROM turns t USING unnest($1::text[], $2::text[]) AS k(tenant, turn_id)
          WHERE t.tenant = k.tenant AND t.turn_id = k.turn_id
         RETURNING t.tenant",
    )
    .bind(&tenants)
    .bind(&ids)
    .fetch_all(conn)
    .await?)
}

/// What writing exported turns back did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnsBack {
    /// Emptied turns given their content, metadata and facts back.
    pub refilled: u64,
    /// Deleted turns written back, as they were when deleted.
    pub reinserted: u64,
    /// Lines with nothing to do: the turn holds its content again, or is
    /// there already.
    pub unchanged: u64,
}

impl Store {
    /// Writes back turns a run exported (its export's turn lines): a turn
    /// still in the archive but emptied gets its content back, a deleted one
    /// comes back whole. A run empties or deletes a turn, not both; a line a
    /// resumed run wrote twice finds nothing to do the second time.
    pub async fn restore_turns(
        &self,
        lines: &[serde_json::Value],
    ) -> Result<TurnsBack, StoreError> {
        let mut tx = self.pool.begin().await?;
        let mut back = TurnsBack::default();
        for line in lines {
            let row = {
                let mut row = line.clone();
                if let Some(o) = row.as_object_mut() {
                    o.remove(RECORD);
                }
                row
            };
            let refilled = sqlx::query(
                "UPDATE turns t SET content = r.content, metadata = r.metadata, facts = r.facts,
                        content_dropped_at = NULL
                   FROM jsonb_populate_record(NULL::turns, $1) AS r
                  WHERE t.tenant = r.tenant AND t.turn_id = r.turn_id
                    AND t.content_dropped_at IS NOT NULL AND r.content_dropped_at IS NULL",
            )
            .bind(&row)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if refilled > 0 {
                back.refilled += refilled;
                continue;
            }
            let reinserted = sqlx::query(
                "INSERT INTO turns SELECT * FROM jsonb_populate_record(NULL::turns, $1)
                 ON CONFLICT DO NOTHING",
            )
            .bind(&row)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if reinserted > 0 {
                back.reinserted += reinserted;
            } else {
                back.unchanged += 1;
            }
        }
        tx.commit().await?;
        Ok(back)
    }
}

/// An index point a purge left to remove.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PurgedPoint {
    pub run: Uuid,
    #[sqlx(flatten)]
    pub at: IndexPoint,
}

impl Store {
    /// Index points of purged memories still to remove.
    pub async fn purged_points(&self, limit: i64) -> Result<Vec<PurgedPoint>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT run, embedding_model, embedding_version, dimension, point
               FROM purged_points ORDER BY run, point LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records purged memories' points as removed from the index.
    pub async fn purged_points_removed(&self, points: &[PurgedPoint]) -> Result<(), StoreError> {
        if points.is_empty() {
            return Ok(());
        }
        let runs: Vec<Uuid> = points.iter().map(|p| p.run).collect();
        let ids: Vec<Uuid> = points.iter().map(|p| p.at.point).collect();
        sqlx::query(
            "DELETE FROM purged_points p USING unnest($1::uuid[], $2::uuid[]) AS k(run, point)
              WHERE p.run = k.run AND p.point = k.point",
        )
        .bind(&runs)
        .bind(&ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
