//! The database place of an erase: one transaction that deletes every row of
//! the user and writes down what the places outside Postgres must remove.

use std::collections::BTreeMap;

use sqlx::{PgConnection, Row};

use super::{Erasure, TURNS_STREAM, add_counts};
use crate::{
    Store, StoreError,
    memories::{TERMS_VERSION, search_terms},
};
use hindsight_core::{erase::Counts, turn::TurnContext};
use uuid::Uuid;

impl Store {
    /// What erasing the user from Postgres would remove, changing nothing
    /// (with the TURNS messages the archive names).
    pub async fn erasable(&self, tenant: &str, user_id: &str) -> Result<Counts, StoreError> {
        // A transaction only for the planner setting of `contexts_of`; it changes nothing.
        let mut conn = self.pool.begin().await?;
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
               (SELECT count(*) FROM memories m JOIN memory_vectors v ON v.id = m.id
                 WHERE m.tenant = $1 AND m.user_id = $2 AND m.index_state <> 'removed') AS index_points,
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
        conn.rollback().await?;
        Ok(Counts {
            memories: n("memories")?,
            sources: n("sources")?,
            events: n("events")?,
            turns: n("turns")?,
            keyword_stats: n("keyword_stats")?,
            contexts: contexts.len() as u64,
            index_points: n("index_points")?,
            stream_messages: BTreeMap::from([(TURNS_STREAM.to_string(), n("turn_messages")?)]),
            ..Counts::default()
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
             SELECT $3, m.embedding_model, m.embedding_version, cardinality(v.embedding), m.id
               FROM memories m JOIN memory_vectors v ON v.id = m.id
              WHERE m.tenant = $1 AND m.user_id = $2 AND m.index_state <> 'removed'
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
        tx.commit().await?;
        Ok(c)
    }
}

/// Other users' memories whose context (the turn they replied to, kept to be
/// shown and searched) is a turn of this user: `(id, content, entities)`.
///
/// Called inside a transaction. Nested loops are off for it: right after a
/// bulk of turns the planner may think the user has one turn and compare
/// each of them with every memory of the tenant (14 s at 10,000 turns); a
/// hash of the user's turn ids over one scan of the tenant's memories
/// holding a context is what it should do whatever the statistics say.
async fn contexts_of(
    conn: &mut PgConnection,
    tenant: &str,
    user_id: &str,
) -> Result<Vec<(Uuid, String, Vec<String>)>, StoreError> {
    sqlx::query("SET LOCAL enable_nestloop = off")
        .execute(&mut *conn)
        .await?;
    let rows = sqlx::query_as(
        "SELECT m.id, m.content, m.entities FROM memories m
          WHERE m.tenant = $1 AND m.user_id <> $2 AND m.context IS NOT NULL
            AND m.context->>'turn_id' IN (SELECT turn_id FROM turns WHERE tenant = $1 AND user_id = $2)",
    )
    .bind(tenant)
    .bind(user_id)
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query("SET LOCAL enable_nestloop = on")
        .execute(&mut *conn)
        .await?;
    Ok(rows)
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
