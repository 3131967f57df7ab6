//! Undoing a run from its audit events, in one transaction and in the reverse
//! order of the steps: unfold what was merged or consolidated (provenance
//! moves back), remove the summaries, unarchive, give survivors back their own
//! importance and use, undo decay. Each change is put back only while the
//! memory still holds what the run left there, so a later edit is never
//! overwritten; purged memories are not here to restore (see the export).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Store, StoreError};

/// What a restore put back, per kind of change, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// Merged or consolidated memories active again, with their provenance.
    pub unfolded: u64,
    /// Consolidated summaries removed.
    pub summaries_removed: u64,
    /// Summaries kept (archived) because facts were merged into them since.
    pub summaries_kept: u64,
    pub unarchived: u64,
    pub survivors: u64,
    pub undecayed: u64,
    /// Changes not put back because the memory changed (or was purged) since.
    pub skipped: u64,
    /// Memories the run purged: restorable from its export only.
    pub purged: u64,
    /// Purged memories written back from the export (when asked for).
    #[serde(default)]
    pub purged_restored: u64,
    /// Memories the repair step reinstated, superseded again.
    #[serde(default)]
    pub resuperseded: u64,
    /// Memories the repair step split off, joined back into the memory
    /// they came from (its content and vector as before).
    #[serde(default)]
    pub rejoined: u64,
}

const FOLDED: &str =
    "e.run_id = $1 AND e.event IN ('merge', 'consolidate') AND e.detail->>'role' = 'folded'";

impl Store {
    /// Writes back memories a purge exported (lines of its export), as they
    /// were when purged, with their provenance; rows already present are left
    /// alone. Returns how many came back.
    pub async fn reinsert_exported(
        &self,
        run: Uuid,
        rows: &[serde_json::Value],
        actor: &str,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let mut back = 0;
        for row in rows {
            let inserted = sqlx::query(
                // Exports written before a NOT NULL column existed lack it:
                // its default comes first, the row's own value wins.
                // Back in the index too: its point was removed (or is to be).
                "INSERT INTO memories
                 SELECT * FROM jsonb_populate_record(NULL::memories,
                     '{\"flags\": [], \"inferred\": false, \"pinned\": false}'::jsonb
                     || ($1 - 'sources') || '{\"index_state\": \"pending\"}'::jsonb)
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(row)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                continue;
            }
            back += 1;
            sqlx::query(
                "INSERT INTO memory_vectors (id, embedding)
                 SELECT ($1->>'id')::uuid, ARRAY(SELECT x::real
                                                FROM jsonb_array_elements_text($1->'embedding')
                                                     WITH ORDINALITY AS a(x, i) ORDER BY i)
                 WHERE jsonb_typeof($1->'embedding') = 'array'
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(row)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM purged_points WHERE point = ($1->>'id')::uuid")
                .bind(row)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id, added_at)
                 SELECT ($1->>'id')::uuid, s->>'fact_id', $1->>'tenant', s->>'turn_id', (s->>'added_at')::timestamptz
                 FROM jsonb_array_elements($1->'sources') AS s
                 ON CONFLICT DO NOTHING",
            )
            .bind(row)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO memory_events (memory_id, tenant, event, actor, run_id, detail)
                 VALUES (($1->>'id')::uuid, $1->>'tenant', 'restore', $2, $3, jsonb_build_object('from_export', true))",
            )
            .bind(row)
            .bind(actor)
            .bind(run)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(back)
    }

    /// Restores run `run` (the caller holds the janitor lock and has checked
    /// that the run is a finished or interrupted real run). `actor` is written
    /// on the `restore` events.
    pub async fn restore_run(&self, run: Uuid, actor: &str) -> Result<Restored, StoreError> {
        let mut tx = self.pool.begin().await?;
        let count = |event: &'static str, role: Option<&'static str>| {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM memory_events
                 WHERE run_id = $1 AND event = $2 AND ($3::text IS NULL OR detail->>'role' = $3)",
            )
            .bind(run)
            .bind(event)
            .bind(role)
        };
        let changes = count("decay", None).fetch_one(&mut *tx).await?
            + count("archive", None).fetch_one(&mut *tx).await?
            + count("merge", None).fetch_one(&mut *tx).await?
            + count("consolidate", None).fetch_one(&mut *tx).await?;
        let purged = count("purge", None).fetch_one(&mut *tx).await? as u64;
        let repairs = count("restore", Some("reinstated"))
            .fetch_one(&mut *tx)
            .await?
            + count("create", Some("split")).fetch_one(&mut *tx).await?;

        sqlx::query(
            "INSERT INTO memory_events (memory_id, tenant, event, actor, run_id, detail)
             SELECT DISTINCT e.memory_id, e.tenant, 'restore', $2, $1, jsonb_build_object('restored_run', $1)
             FROM memory_events e
             WHERE e.run_id = $1 AND e.event IN ('decay', 'archive', 'merge', 'consolidate')
               AND EXISTS (SELECT 1 FROM memories m WHERE m.id = e.memory_id)",
        )
        .bind(run)
        .bind(actor)
        .execute(&mut *tx)
        .await?;

        let sql = format!(
            "UPDATE memory_sources s SET memory_id = e.memory_id
             FROM memory_events e CROSS JOIN LATERAL jsonb_array_elements_text(e.detail->'fact_ids') AS f(fact_id)
             WHERE {FOLDED} AND s.tenant = e.tenant AND s.fact_id = f.fact_id
               AND s.memory_id = (e.detail->>'into')::uuid
               AND EXISTS (SELECT 1 FROM memories m WHERE m.id = e.memory_id)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run)
            .execute(&mut *tx)
            .await?;
        let sql = format!(
            "UPDATE memories m SET status = e.detail->'before'->>'status',
                    archived_at = (e.detail->'before'->>'archived_at')::timestamptz,
                    status_at = (e.detail->'before'->>'status_at')::timestamptz,
                    merged_into = NULL,
                    updated_at = (e.detail->'before'->>'updated_at')::timestamptz,
                    index_state = 'pending'
             FROM memory_events e
             WHERE {FOLDED} AND m.id = e.memory_id AND m.status = 'archived'
               AND m.merged_into = (e.detail->>'into')::uuid"
        );
        let unfolded = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run)
            .execute(&mut *tx)
            .await?
            .rows_affected();

        const SUMMARY: &str =
            "e.run_id = $1 AND e.event = 'consolidate' AND e.detail->>'role' = 'summary'";
        let sql = format!(
            "DELETE FROM memories m USING memory_events e
             WHERE {SUMMARY} AND m.id = e.memory_id
               AND NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.memory_id = m.id)"
        );
        let summaries_removed = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let sql = format!(
            "UPDATE memories m SET status = 'archived', archived_at = now(),
                    updated_at = clock_timestamp(), index_state = 'pending'
             FROM memory_events e
             WHERE {SUMMARY} AND m.id = e.memory_id AND m.status = 'active'"
        );
        let summaries_kept = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run)
            .execute(&mut *tx)
            .await?
            .rows_affected();

        let unarchived = sqlx::query(
            "UPDATE memories m SET status = e.detail->'before'->>'status',
                    archived_at = (e.detail->'before'->>'archived_at')::timestamptz,
                    status_at = (e.detail->'before'->>'status_at')::timestamptz,
                    updated_at = (e.detail->'before'->>'updated_at')::timestamptz,
                    index_state = 'pending'
             FROM memory_events e
             WHERE e.run_id = $1 AND e.event = 'archive' AND m.id = e.memory_id
               AND m.status = 'archived' AND m.merged_into IS NULL
               AND m.archived_at = (e.detail->'after'->>'archived_at')::timestamptz",
        )
        .bind(run)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        // Accesses recorded since the merge stay counted: only the merged-in
        // part of the count is taken back.
        let survivors = sqlx::query(
            "UPDATE memories m SET
                    importance = CASE WHEN m.importance = (e.detail->'after'->>'importance')::real
                                      THEN (e.detail->'before'->>'importance')::real ELSE m.importance END,
                    access_count = greatest(0, m.access_count
                                   - ((e.detail->'after'->>'access_count')::int
                                      - (e.detail->'before'->>'access_count')::int)),
                    last_accessed_at = CASE
                        WHEN m.last_accessed_at IS NOT DISTINCT FROM (e.detail->'after'->>'last_accessed_at')::timestamptz
                        THEN (e.detail->'before'->>'last_accessed_at')::timestamptz ELSE m.last_accessed_at END,
                    updated_at = (e.detail->'before'->>'updated_at')::timestamptz
             FROM memory_events e
             WHERE e.run_id = $1 AND e.event = 'merge' AND e.detail->>'role' = 'survivor'
               AND m.id = e.memory_id",
        )
        .bind(run)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        let (resuperseded, rejoined) = undo_repairs(&mut tx, run, actor).await?;

        let undecayed = sqlx::query(
            "UPDATE memories m SET importance = (e.detail->'before'->>'importance')::real,
                    decayed_at = (e.detail->'before'->>'decayed_at')::timestamptz
             FROM memory_events e
             WHERE e.run_id = $1 AND e.event = 'decay' AND m.id = e.memory_id
               AND m.importance = (e.detail->'after'->>'importance')::real",
        )
        .bind(run)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        sqlx::query(
            "UPDATE maintenance_runs SET status = 'restored', restored_at = now() WHERE id = $1",
        )
        .bind(run)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let done = unfolded
            + summaries_removed
            + summaries_kept
            + unarchived
            + survivors
            + undecayed
            + resuperseded
            + rejoined;
        Ok(Restored {
            unfolded,
            summaries_removed,
            summaries_kept,
            unarchived,
            survivors,
            undecayed,
            skipped: ((changes + repairs).max(0) as u64).saturating_sub(done),
            purged,
            purged_restored: 0,
            resuperseded,
            rejoined,
        })
    }
}

/// Undoes the repair step of run `run`: memories it reinstated are
/// superseded again, and memories it split off go back into the memory they
/// came from (provenance first), whose content, terms and vector are put
/// back while it still holds what the split left. Returns (superseded
/// again, joined back).
async fn undo_repairs(
    tx: &mut sqlx::PgConnection,
    run: Uuid,
    actor: &str,
) -> Result<(u64, u64), StoreError> {
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, event, actor, run_id, detail)
         SELECT DISTINCT e.memory_id, e.tenant, 'restore', $2, $1, jsonb_build_object('restored_run', $1)
         FROM memory_events e
         WHERE e.run_id = $1 AND e.detail->>'role' IN ('reinstated', 'split') AND e.event <> 'create'
           AND EXISTS (SELECT 1 FROM memories m WHERE m.id = e.memory_id)",
    )
    .bind(run)
    .bind(actor)
    .execute(&mut *tx)
    .await?;
    let resuperseded = sqlx::query(
        "UPDATE memories m SET status = 'superseded', superseded_by = (e.detail->>'superseded_by')::uuid,
                updated_at = clock_timestamp(), index_state = 'pending'
         FROM memory_events e
         WHERE e.run_id = $1 AND e.event = 'restore' AND e.detail->>'role' = 'reinstated'
           AND m.id = e.memory_id AND m.status = 'active' AND m.superseded_by IS NULL",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    const SPLIT_OFF: &str = "e.run_id = $1 AND e.event = 'create' AND e.detail->>'role' = 'split'";
    let sql = format!(
        "UPDATE memory_sources s SET memory_id = (e.detail->>'from')::uuid
         FROM memory_events e
         WHERE {SPLIT_OFF} AND s.memory_id = e.memory_id
           AND EXISTS (SELECT 1 FROM memories m WHERE m.id = (e.detail->>'from')::uuid)"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(run)
        .execute(&mut *tx)
        .await?;
    let sql = format!(
        "DELETE FROM memories m USING memory_events e
         WHERE {SPLIT_OFF} AND m.id = e.memory_id
           AND NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.memory_id = m.id)"
    );
    let rejoined = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(run)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    // The vector first: the memory's content still says which were split.
    sqlx::query(
        "UPDATE memory_vectors v SET embedding = ARRAY(SELECT x::real
                                  FROM jsonb_array_elements_text(e.detail->'before'->'embedding')
                                       WITH ORDINALITY AS a(x, i) ORDER BY i)
         FROM memory_events e, memories m
         WHERE e.run_id = $1 AND e.event = 'update' AND e.detail->>'role' = 'split'
           AND m.id = e.memory_id AND m.content = e.detail->'after'->>'content' AND v.id = m.id",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE memories m SET content = e.detail->'before'->>'content',
                content_key = e.detail->'before'->>'content_key',
                terms = ARRAY(SELECT jsonb_array_elements_text(e.detail->'before'->'terms')),
                updated_at = clock_timestamp(), index_state = 'pending'
         FROM memory_events e
         WHERE e.run_id = $1 AND e.event = 'update' AND e.detail->>'role' = 'split'
           AND m.id = e.memory_id AND m.content = e.detail->'after'->>'content'",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    Ok((resuperseded, rejoined))
}
