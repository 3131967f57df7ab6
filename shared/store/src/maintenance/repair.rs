//! The repair step's reads and writes: memories persist superseded or merged
//! facts into under an earlier rule, with the content of each fact from its
//! provenance (the facts recorded on its turn), and the changes that put
//! them right, each with an audit event that [`super::restore`] reverses.

use serde_json::json;
use sqlx::{PgConnection, types::Json};
use uuid::Uuid;

use crate::{
    StoreError,
    maintenance::steps::add_events,
    memories::{TERMS_VERSION, search_terms},
    vectors,
};
use hindsight_core::turn::TurnContext;

/// A fact's content as its turn recorded it, by `s.tenant`, `s.turn_id` and
/// `s.fact_id` (NULL when the turn or its facts are gone).
const FACT_CONTENT: &str = "(SELECT f->>'content' FROM turns t, jsonb_array_elements(t.facts) f
      WHERE t.tenant = s.tenant AND t.turn_id = s.turn_id AND f->>'fact_id' = s.fact_id LIMIT 1)";

/// A memory persist superseded, and the fact that superseded it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Superseded {
    pub id: Uuid,
    pub tenant: String,
    pub content: String,
    pub superseded_by: Uuid,
    /// The content of the fact that made the superseding memory.
    pub by_fact: String,
}

/// Memories persist marked superseded (of one tenant, or all), with the
/// fact that superseded each, where its provenance still holds it.
pub async fn superseded(
    conn: &mut PgConnection,
    tenant: Option<&str>,
) -> Result<Vec<Superseded>, StoreError> {
    let sql = format!(
        "SELECT m.id, m.tenant, m.content, m.superseded_by, by_fact
         FROM memories m
         CROSS JOIN LATERAL (
             SELECT {FACT_CONTENT} AS by_fact
             FROM memory_sources s WHERE s.memory_id = m.superseded_by
             ORDER BY s.added_at, s.fact_id LIMIT 1) f
         WHERE m.status = 'superseded' AND m.superseded_by IS NOT NULL
           AND ($1::text IS NULL OR m.tenant = $1) AND by_fact IS NOT NULL
           AND EXISTS (SELECT 1 FROM memory_events e
                       WHERE e.memory_id = m.id AND e.event = 'supersede' AND e.actor = 'persist')
         ORDER BY m.tenant, m.id"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .fetch_all(conn)
        .await?)
}

/// Makes superseded memories active again (once each), recording on each
/// what superseded it.
pub async fn reinstate(
    conn: &mut PgConnection,
    run: Uuid,
    rows: &[&Superseded],
) -> Result<u64, StoreError> {
    let mut done = 0;
    for r in rows {
        let changed = sqlx::query(
            "UPDATE memories SET status = 'active', superseded_by = NULL,
                    updated_at = clock_timestamp(), index_state = 'pending'
             WHERE id = $1 AND status = 'superseded' AND superseded_by = $2",
        )
        .bind(r.id)
        .bind(r.superseded_by)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if changed == 0 {
            continue;
        }
        done += 1;
        let detail = json!({"role": "reinstated", "superseded_by": r.superseded_by});
        add_events(conn, run, "restore", vec![(r.id, r.tenant.clone(), detail)]).await?;
    }
    Ok(done)
}

/// An active memory persist merged facts into, with every fact of its
/// provenance in the order they arrived.
#[derive(Debug, Clone)]
pub struct Merged {
    pub id: Uuid,
    pub tenant: String,
    pub content: String,
    pub entities: Vec<String>,
    pub context: Option<TurnContext>,
    pub embedding_model: String,
    pub embedding_version: String,
    /// (fact id, content), the memory's founding fact first.
    pub facts: Vec<(String, String)>,
}

#[derive(sqlx::FromRow)]
struct MergedRow {
    id: Uuid,
    tenant: String,
    content: String,
    entities: Vec<String>,
    context: Option<Json<TurnContext>>,
    embedding_model: String,
    embedding_version: String,
    fact_id: String,
    fact_content: Option<String>,
}

/// Active memories (of one tenant, or all) that persist merged a fact into,
/// whose every fact's content the provenance still holds. A memory whose
/// facts came to it otherwise (a consolidation's summary, a janitor merge)
/// is not among them: those facts were never merged by persist's rule.
pub async fn merged(
    conn: &mut PgConnection,
    tenant: Option<&str>,
) -> Result<Vec<Merged>, StoreError> {
    let sql = format!(
        "SELECT m.id, m.tenant, m.content, m.entities, m.context, m.embedding_model, m.embedding_version,
                s.fact_id, {FACT_CONTENT} AS fact_content
         FROM memories m JOIN memory_sources s ON s.memory_id = m.id
         WHERE m.status = 'active' AND EXISTS (SELECT 1 FROM memory_vectors v WHERE v.id = m.id)
           AND ($1::text IS NULL OR m.tenant = $1)
           AND EXISTS (SELECT 1 FROM memory_events e
                       WHERE e.memory_id = m.id AND e.event = 'merge' AND e.actor = 'persist')
           AND NOT EXISTS (SELECT 1 FROM memory_events e
                           WHERE e.memory_id = m.id AND e.actor = 'janitor'
                             AND e.event IN ('merge', 'consolidate'))
         ORDER BY m.tenant, m.id, s.added_at, s.fact_id"
    );
    let rows: Vec<MergedRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .fetch_all(conn)
        .await?;
    // Grouped by memory (the rows come ordered by it); a memory with a fact
    // whose content is gone is not judged.
    let mut grouped: Vec<(Merged, bool)> = Vec::new();
    for r in rows {
        if grouped.last().is_none_or(|(m, _)| m.id != r.id) {
            let memory = Merged {
                id: r.id,
                tenant: r.tenant,
                content: r.content,
                entities: r.entities,
                context: r.context.map(|c| c.0),
                embedding_model: r.embedding_model,
                embedding_version: r.embedding_version,
                facts: Vec::new(),
            };
            grouped.push((memory, true));
        }
        if let Some((m, known)) = grouped.last_mut() {
            match r.fact_content {
                Some(content) => m.facts.push((r.fact_id, content)),
                None => *known = false,
            }
        }
    }
    let out: Vec<Merged> = grouped
        .into_iter()
        .filter(|(m, known)| *known && m.facts.len() > 1)
        .map(|(m, _)| m)
        .collect();
    Ok(out)
}

/// One part of a wrongly merged memory: its content and vector, and the
/// facts it holds.
#[derive(Debug, Clone)]
pub struct Part {
    pub content: String,
    pub content_key: String,
    pub embedding: Vec<f32>,
    pub fact_ids: Vec<String>,
}

/// Splits `memory`: it keeps `kept` (content and vector); each of `parts`
/// becomes a memory of its own (id derived from the run and its first fact,
/// the rest copied from the memory) taking its facts' provenance along.
/// Returns how many memories were split off.
pub async fn split(
    conn: &mut PgConnection,
    run: Uuid,
    memory: &Merged,
    kept: &Part,
    parts: &[Part],
) -> Result<u64, StoreError> {
    let before: Option<(String, String, Vec<String>, Vec<f32>)> = sqlx::query_as(
        "SELECT m.content, m.content_key, m.terms, v.embedding
         FROM memories m JOIN memory_vectors v ON v.id = m.id WHERE m.id = $1 AND m.status = 'active'",
    )
    .bind(memory.id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((content, content_key, terms, embedding)) = before else {
        return Ok(0);
    };
    let terms_of = |c: &str| search_terms(c, &memory.entities, memory.context.as_ref());
    sqlx::query(
        "UPDATE memories SET content = $2, content_key = $3, terms = $4, terms_version = $5,
                updated_at = clock_timestamp(), index_state = 'pending'
         WHERE id = $1",
    )
    .bind(memory.id)
    .bind(&kept.content)
    .bind(&kept.content_key)
    .bind(terms_of(&kept.content))
    .bind(TERMS_VERSION)
    .execute(&mut *conn)
    .await?;
    vectors::put(conn, memory.id, &kept.embedding).await?;
    let detail = json!({
        "role": "split",
        "before": {"content": content, "content_key": content_key, "terms": terms, "embedding": embedding},
        "after": {"content": kept.content},
    });
    add_events(
        conn,
        run,
        "update",
        vec![(memory.id, memory.tenant.clone(), detail)],
    )
    .await?;
    let mut made = 0;
    for part in parts {
        let Some(first) = part.fact_ids.first() else {
            continue;
        };
        let id = Uuid::new_v5(&run, format!("{}:{first}", memory.tenant).as_bytes());
        let inserted = sqlx::query(
            "INSERT INTO memories (id, tenant, user_id, agent_id, session_id, scope, kind, fact_type, content,
                                   content_key, entities, importance, confidence, source_trust, status, occurred_at,
                                   valid_from, expires_at, embedding_model, embedding_version, terms,
                                   context, terms_version, source, flags, inferred, index_state)
             SELECT $2, tenant, user_id, agent_id, session_id, scope, kind, fact_type, $3,
                    $4, entities, importance, confidence, source_trust, 'active', occurred_at,
                    valid_from, expires_at, embedding_model, embedding_version, $5,
                    context, $6, source, flags, inferred, 'pending'
             FROM memories WHERE id = $1
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(memory.id)
        .bind(id)
        .bind(&part.content)
        .bind(&part.content_key)
        .bind(terms_of(&part.content))
        .bind(TERMS_VERSION)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if inserted == 0 {
            continue;
        }
        vectors::put(conn, id, &part.embedding).await?;
        made += 1;
        sqlx::query(
            "UPDATE memory_sources SET memory_id = $2
             WHERE memory_id = $1 AND tenant = $3 AND fact_id = ANY($4)",
        )
        .bind(memory.id)
        .bind(id)
        .bind(&memory.tenant)
        .bind(&part.fact_ids)
        .execute(&mut *conn)
        .await?;
        let detail = json!({"role": "split", "from": memory.id, "fact_ids": part.fact_ids});
        add_events(
            conn,
            run,
            "create",
            vec![(id, memory.tenant.clone(), detail)],
        )
        .await?;
    }
    Ok(made)
}
