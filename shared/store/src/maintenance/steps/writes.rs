//! A step's batch writes, each with one audit event per changed memory
//! carrying the values it replaced.

use chrono::{DateTime, Utc};
use hindsight_core::memory::Status;
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{StoreError, maintenance::ACTOR};

/// Writes one audit event per memory of a run, naming each memory's user
/// (read here in one join, so the events' trigger looks up none; a memory
/// already deleted names none).
pub(crate) async fn add_events(
    conn: &mut PgConnection,
    run: Uuid,
    event: &str,
    rows: Vec<(Uuid, String, Value)>,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut tenants = Vec::with_capacity(rows.len());
    let mut details = Vec::with_capacity(rows.len());
    for (id, tenant, detail) in rows {
        ids.push(id);
        tenants.push(tenant);
        details.push(detail);
    }
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, user_id, event, actor, run_id, detail)
         SELECT e.id, e.tenant, m.user_id, $4, $5, $6, e.detail
         FROM unnest($1::uuid[], $2::text[], $3::jsonb[]) AS e(id, tenant, detail)
         LEFT JOIN memories m ON m.id = e.id",
    )
    .bind(ids)
    .bind(tenants)
    .bind(details)
    .bind(event)
    .bind(ACTOR)
    .bind(run)
    .execute(conn)
    .await?;
    Ok(())
}

/// A memory's importance lowered by decay.
#[derive(Debug, Clone)]
pub struct Decay {
    pub id: Uuid,
    pub tenant: String,
    pub importance: f32,
    pub before_importance: f32,
    pub before_decayed_at: Option<DateTime<Utc>>,
}

/// Decays a batch and archives another, the memories in both in one write
/// (each change with its own event, as the two steps write them apart).
/// Decay changes only `importance` and `decayed_at` (no indexed column, so
/// Postgres can update the rows in place); a memory also archived takes its
/// new importance in the archive's write, so it is rewritten once.
pub async fn apply_decay_archive(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    decays: &[Decay],
    archives: &[Archive],
) -> Result<(), StoreError> {
    let archived: std::collections::HashSet<Uuid> = archives.iter().map(|a| a.id).collect();
    let only_decayed: Vec<&Decay> = decays
        .iter()
        .filter(|d| !archived.contains(&d.id))
        .collect();
    if !only_decayed.is_empty() {
        let ids: Vec<Uuid> = only_decayed.iter().map(|r| r.id).collect();
        let importance: Vec<f32> = only_decayed.iter().map(|r| r.importance).collect();
        sqlx::query(
            "UPDATE memories m SET importance = u.importance, decayed_at = $3
             FROM unnest($1::uuid[], $2::real[]) AS u(id, importance) WHERE m.id = u.id",
        )
        .bind(&ids)
        .bind(&importance)
        .bind(as_of)
        .execute(&mut *conn)
        .await?;
    }
    apply_archive(&mut *conn, run, as_of, "archive", archives).await?;
    decay_events(conn, run, as_of, decays).await
}

/// The events of decayed memories: what each importance was, and became.
async fn decay_events(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    rows: &[Decay],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let importance: Vec<f32> = rows.iter().map(|r| r.importance).collect();
    // The events' details are built by Postgres from the columns: the
    // decay of a million memories writes a million of them.
    let before: Vec<f32> = rows.iter().map(|r| r.before_importance).collect();
    let before_at: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.before_decayed_at).collect();
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, user_id, event, actor, run_id, detail)
         SELECT m.id, m.tenant, m.user_id, 'decay', $5, $6, jsonb_build_object(
                    'before', jsonb_build_object('importance', u.before, 'decayed_at', u.before_at),
                    'after', jsonb_build_object('importance', u.importance, 'decayed_at', $3::timestamptz))
         FROM unnest($1::uuid[], $2::real[], $4::real[], $7::timestamptz[])
              AS u(id, importance, before, before_at)
         JOIN memories m ON m.id = u.id",
    )
    .bind(&ids)
    .bind(&importance)
    .bind(as_of)
    .bind(&before)
    .bind(ACTOR)
    .bind(run)
    .bind(&before_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A memory moved to `archived` (by the archive step, or folded into another).
#[derive(Debug, Clone)]
pub struct Archive {
    pub id: Uuid,
    pub tenant: String,
    /// The survivor or summary it was folded into; `None` for a plain archive.
    pub into: Option<Uuid>,
    pub before_status: Status,
    pub before_archived_at: Option<DateTime<Utc>>,
    pub before_updated_at: DateTime<Utc>,
    pub before_status_at: Option<DateTime<Utc>>,
    /// The importance decay gives it in the same write (see
    /// [`apply_decay_archive`]); `None` leaves it as it is.
    pub importance: Option<f32>,
}

/// Archives a batch (out of the index and of recall, still in Postgres). A
/// folded memory's provenance moves to the memory it was folded into, and its
/// event lists the moved facts so that a restore can move them back.
pub async fn apply_archive(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    event: &str,
    rows: &[Archive],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let into: Vec<Option<Uuid>> = rows.iter().map(|r| r.into).collect();
    let decayed: Vec<Option<f32>> = rows.iter().map(|r| r.importance).collect();
    sqlx::query(
        // status_at on the run's clock too, so that a resumed run writes what
        // an uninterrupted one would have.
        "UPDATE memories m SET status = 'archived', archived_at = $3, status_at = $3, merged_into = u.into_id,
                updated_at = clock_timestamp(), index_state = 'pending',
                importance = coalesce(u.importance, m.importance),
                decayed_at = CASE WHEN u.importance IS NULL THEN m.decayed_at ELSE $3 END
         FROM unnest($1::uuid[], $2::uuid[], $4::real[]) AS u(id, into_id, importance) WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&into)
    .bind(as_of)
    .bind(&decayed)
    .execute(&mut *conn)
    .await?;
    // Only memories folded into another move their provenance.
    let folding = rows.iter().any(|r| r.into.is_some());
    let moved: Vec<(Uuid, Vec<String>)> = if !folding {
        Vec::new()
    } else {
        sqlx::query_as(
            "WITH moved AS (
            UPDATE memory_sources s SET memory_id = u.into_id
            FROM unnest($1::uuid[], $2::uuid[]) AS u(id, into_id)
            WHERE s.memory_id = u.id AND u.into_id IS NOT NULL
            RETURNING u.id, s.fact_id)
         SELECT id, array_agg(fact_id ORDER BY fact_id) FROM moved GROUP BY id",
        )
        .bind(&ids)
        .bind(&into)
        .fetch_all(&mut *conn)
        .await?
    };
    let mut moved: std::collections::HashMap<Uuid, Vec<String>> = moved.into_iter().collect();
    // The details are built by Postgres from the columns (an archive step
    // writes hundreds of thousands); a folded memory's add where it went.
    let folded: Vec<Option<Value>> = rows
        .iter()
        .map(|r| {
            r.into.map(|into| {
                json!({"role": "folded", "into": into,
                       "fact_ids": moved.remove(&r.id).unwrap_or_default()})
            })
        })
        .collect();
    let status: Vec<&str> = rows.iter().map(|r| r.before_status.as_str()).collect();
    let archived_at: Vec<Option<DateTime<Utc>>> =
        rows.iter().map(|r| r.before_archived_at).collect();
    let updated_at: Vec<DateTime<Utc>> = rows.iter().map(|r| r.before_updated_at).collect();
    let status_at: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.before_status_at).collect();
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, user_id, event, actor, run_id, detail)
         SELECT m.id, m.tenant, m.user_id, $3, $4, $5, jsonb_build_object(
                    'before', jsonb_build_object('status', u.status, 'archived_at', u.archived_at,
                                                 'updated_at', u.updated_at, 'status_at', u.status_at),
                    'after', jsonb_build_object('status', 'archived', 'archived_at', $6::timestamptz))
                || coalesce(u.folded, '{}'::jsonb)
         FROM unnest($1::uuid[], $2::jsonb[], $7::text[], $8::timestamptz[], $9::timestamptz[],
                     $10::timestamptz[]) AS u(id, folded, status, archived_at, updated_at, status_at)
         JOIN memories m ON m.id = u.id",
    )
    .bind(&ids)
    .bind(&folded)
    .bind(event)
    .bind(ACTOR)
    .bind(run)
    .bind(as_of)
    .bind(&status)
    .bind(&archived_at)
    .bind(&updated_at)
    .bind(&status_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// What a merge does to the memory that survives it.
#[derive(Debug, Clone)]
pub struct Survivor {
    pub id: Uuid,
    pub tenant: String,
    pub merged: Vec<Uuid>,
    pub importance: f32,
    pub access_count: i32,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub before_importance: f32,
    pub before_access_count: i32,
    pub before_last_accessed_at: Option<DateTime<Utc>>,
    pub before_updated_at: DateTime<Utc>,
}

/// Gives survivors the combined importance and use of what merged into them.
pub async fn apply_survivors(
    conn: &mut PgConnection,
    run: Uuid,
    rows: &[Survivor],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let importance: Vec<f32> = rows.iter().map(|r| r.importance).collect();
    let access: Vec<i32> = rows.iter().map(|r| r.access_count).collect();
    let last: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.last_accessed_at).collect();
    sqlx::query(
        "UPDATE memories m SET importance = u.importance, access_count = u.access_count,
                last_accessed_at = u.last_accessed_at, updated_at = clock_timestamp()
         FROM unnest($1::uuid[], $2::real[], $3::int[], $4::timestamptz[])
              AS u(id, importance, access_count, last_accessed_at)
         WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&importance)
    .bind(&access)
    .bind(&last)
    .execute(&mut *conn)
    .await?;
    let events = rows
        .iter()
        .map(|r| {
            let detail = json!({
                "role": "survivor",
                "merged": r.merged,
                "before": {"importance": r.before_importance, "access_count": r.before_access_count,
                           "last_accessed_at": r.before_last_accessed_at, "updated_at": r.before_updated_at},
                "after": {"importance": r.importance, "access_count": r.access_count,
                          "last_accessed_at": r.last_accessed_at},
            });
            (r.id, r.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, "merge", events).await
}

/// Writes consolidated summaries (new semantic memories) with their events;
/// the originals are archived into them with [`apply_archive`] afterwards.
pub async fn insert_summaries(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    summaries: &[(crate::memories::NewMemory, Vec<Uuid>)],
) -> Result<(), StoreError> {
    if summaries.is_empty() {
        return Ok(());
    }
    for (m, _) in summaries {
        crate::memories::insert_on(&mut *conn, m).await?;
    }
    // Written as of the run's clock, so a resumed run writes the same rows.
    let ids: Vec<Uuid> = summaries.iter().map(|(m, _)| m.id).collect();
    sqlx::query("UPDATE memories SET created_at = $2 WHERE id = ANY($1)")
        .bind(&ids)
        .bind(as_of)
        .execute(&mut *conn)
        .await?;
    let events = summaries
        .iter()
        .map(|(m, originals)| {
            let detail = json!({"role": "summary", "originals": originals});
            (m.id, m.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, "consolidate", events).await
}

/// The rows a purge is about to delete, each as one JSON object with its
/// provenance and vector, to be written to the export before they go
/// (`embedding` sits beside the row's columns, as when it was one of them).
pub async fn export_rows(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<Value>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT to_jsonb(m)
                || jsonb_build_object('embedding', (SELECT v.embedding FROM memory_vectors v WHERE v.id = m.id))
                || jsonb_build_object('sources', coalesce(
                    (SELECT jsonb_agg(jsonb_build_object('fact_id', s.fact_id, 'turn_id', s.turn_id,
                                                         'added_at', s.added_at) ORDER BY s.fact_id)
                     FROM memory_sources s WHERE s.memory_id = m.id), '[]'::jsonb))
         FROM memories m WHERE m.id = ANY($1) ORDER BY m.id",
    )
    .bind(ids)
    .fetch_all(conn)
    .await?)
}

/// Deletes exported rows (their provenance goes with them), with a `purge`
/// event naming the export that holds them.
pub async fn apply_purge(
    conn: &mut PgConnection,
    run: Uuid,
    rows: &[(Uuid, String)],
    export: &str,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.0).collect();
    // Memories still in the index (superseded ones, or archived ones the
    // reconciler has not yet taken out) leave their points to remove.
    sqlx::query(
        "INSERT INTO purged_points (run, embedding_model, embedding_version, dimension, point)
         SELECT $2, m.embedding_model, m.embedding_version, cardinality(v.embedding), m.id
           FROM memories m JOIN memory_vectors v ON v.id = m.id
          WHERE m.id = ANY($1) AND m.index_state <> 'removed'
         ON CONFLICT DO NOTHING",
    )
    .bind(&ids)
    .bind(run)
    .execute(&mut *conn)
    .await?;
    // The events first, while the rows can still name their users.
    let events = rows
        .iter()
        .map(|(id, tenant)| (*id, tenant.clone(), json!({"export": export})))
        .collect();
    add_events(&mut *conn, run, "purge", events).await?;
    sqlx::query("DELETE FROM memories WHERE id = ANY($1)")
        .bind(&ids)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
