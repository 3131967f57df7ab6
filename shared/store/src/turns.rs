//! The `turns` archive: every valid raw turn with its fate. All calls take a
//! whole batch, so a stage batch costs a fixed number of round trips.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Store, StoreError};
use hindsight_core::turn::TurnContext;

/// Separates flags inside one array element on the way into `UNNEST`
/// (Postgres arrays of arrays must be rectangular).
const FLAG_SEPARATOR: char = '\u{1f}';

/// A turn as it is archived.
#[derive(Debug, Clone)]
pub struct TurnRow {
    pub tenant: String,
    pub turn_id: String,
    pub user_id: String,
    pub session_id: String,
    pub agent_id: Option<String>,
    pub speaker: String,
    pub role: String,
    pub source: String,
    pub trust: String,
    pub content: String,
    pub metadata: Value,
    pub ts: DateTime<Utc>,
    pub stream_seq: i64,
    /// `kept` or `dropped`.
    pub fate: String,
    pub reason: Option<String>,
    pub quarantine: bool,
    pub flags: Vec<String>,
}

/// What the archive already knows of a turn.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ArchivedFate {
    pub tenant: String,
    pub turn_id: String,
    pub stream_seq: i64,
    pub fate: String,
    pub reason: Option<String>,
}

pub type TurnKey = (String, String);

impl Store {
    /// The archived fate of each of these turns that is already archived.
    pub async fn archived_fates(
        &self,
        keys: &[TurnKey],
    ) -> Result<HashMap<TurnKey, ArchivedFate>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (tenants, ids): (Vec<_>, Vec<_>) = keys.iter().cloned().unzip();
        let rows: Vec<ArchivedFate> = sqlx::query_as(
            "SELECT t.tenant, t.turn_id, t.stream_seq, t.fate, t.reason
             FROM turns t
             JOIN UNNEST($1::text[], $2::text[]) AS k(tenant, turn_id)
               ON t.tenant = k.tenant AND t.turn_id = k.turn_id",
        )
        .bind(&tenants)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ((r.tenant.clone(), r.turn_id.clone()), r))
            .collect())
    }

    /// The content of the latest archived turn of each `(tenant, session,
    /// speaker)`; absent when the janitor has emptied it.
    pub async fn previous_by_speaker(
        &self,
        keys: &HashSet<(String, String, String)>,
    ) -> Result<HashMap<(String, String, String), String>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let mut tenants = Vec::with_capacity(keys.len());
        let mut sessions = Vec::with_capacity(keys.len());
        let mut speakers = Vec::with_capacity(keys.len());
        for (t, s, p) in keys {
            tenants.push(t.as_str());
            sessions.push(s.as_str());
            speakers.push(p.as_str());
        }
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT k.tenant, k.session_id, k.speaker, p.content
             FROM UNNEST($1::text[], $2::text[], $3::text[]) AS k(tenant, session_id, speaker)
             CROSS JOIN LATERAL (
                 SELECT t.content, t.content_dropped_at FROM turns t
                 WHERE t.tenant = k.tenant AND t.session_id = k.session_id AND t.speaker = k.speaker
                 ORDER BY t.stream_seq DESC
                 LIMIT 1
             ) p
             WHERE p.content_dropped_at IS NULL",
        )
        .bind(&tenants)
        .bind(&sessions)
        .bind(&speakers)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, s, p, c)| ((t, s, p), c))
            .collect())
    }

    /// For each `(tenant, session, stream sequence)`, the session's latest
    /// kept, unquarantined turn before that sequence (with its own sequence):
    /// what a turn there replies to. Keys without one, or whose one the
    /// janitor has emptied, are absent.
    pub async fn previous_kept(
        &self,
        keys: &[(String, String, i64)],
    ) -> Result<HashMap<(String, String, i64), (i64, TurnContext)>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let mut tenants = Vec::with_capacity(keys.len());
        let mut sessions = Vec::with_capacity(keys.len());
        let mut seqs = Vec::with_capacity(keys.len());
        for (t, s, q) in keys {
            tenants.push(t.as_str());
            sessions.push(s.as_str());
            seqs.push(*q);
        }
        let rows: Vec<(String, String, i64, i64, String, String, String)> = sqlx::query_as(
            "SELECT k.tenant, k.session_id, k.seq, p.stream_seq, p.turn_id, p.speaker, p.content
             FROM UNNEST($1::text[], $2::text[], $3::bigint[]) AS k(tenant, session_id, seq)
             CROSS JOIN LATERAL (
                 SELECT t.stream_seq, t.turn_id, t.speaker, t.content, t.content_dropped_at
                 FROM turns t
                 WHERE t.tenant = k.tenant AND t.session_id = k.session_id
                   AND t.fate = 'kept' AND t.stream_seq < k.seq AND NOT t.quarantine
                 ORDER BY t.stream_seq DESC
                 LIMIT 1
             ) p
             WHERE p.content_dropped_at IS NULL",
        )
        .bind(&tenants)
        .bind(&sessions)
        .bind(&seqs)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, s, q, at, id, speaker, content)| {
                ((t, s, q), (at, TurnContext::new(&id, &speaker, &content)))
            })
            .collect())
    }

    /// Archives turns that are not archived yet; returns the keys this call
    /// inserted (a key missing from the result was archived by someone else first).
    pub async fn archive_turns(&self, rows: &[TurnRow]) -> Result<HashSet<TurnKey>, StoreError> {
        if rows.is_empty() {
            return Ok(HashSet::new());
        }
        let col = |f: fn(&TurnRow) -> String| rows.iter().map(f).collect::<Vec<_>>();
        let inserted: Vec<(String, String)> = sqlx::query_as(
            "INSERT INTO turns (tenant, turn_id, user_id, session_id, agent_id, speaker, role, source,
                                trust, content, metadata, ts, stream_seq, fate, reason, quarantine, flags)
             SELECT tenant, turn_id, user_id, session_id, agent_id, speaker, role, source,
                    trust, content, metadata, ts, stream_seq, fate, reason, quarantine,
                    CASE WHEN flags = '' THEN '{}'::text[] ELSE string_to_array(flags, chr(31)) END
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::text[], $9::text[], $10::text[], $11::jsonb[],
                         $12::timestamptz[], $13::bigint[], $14::text[], $15::text[], $16::bool[],
                         $17::text[])
                  AS r(tenant, turn_id, user_id, session_id, agent_id, speaker, role, source,
                       trust, content, metadata, ts, stream_seq, fate, reason, quarantine, flags)
             ON CONFLICT (tenant, turn_id) DO NOTHING
             RETURNING tenant, turn_id",
        )
        .bind(col(|r| r.tenant.clone()))
        .bind(col(|r| r.turn_id.clone()))
        .bind(col(|r| r.user_id.clone()))
        .bind(col(|r| r.session_id.clone()))
        .bind(rows.iter().map(|r| r.agent_id.clone()).collect::<Vec<_>>())
        .bind(col(|r| r.speaker.clone()))
        .bind(col(|r| r.role.clone()))
        .bind(col(|r| r.source.clone()))
        .bind(col(|r| r.trust.clone()))
        .bind(col(|r| r.content.clone()))
        .bind(rows.iter().map(|r| r.metadata.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.ts).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.stream_seq).collect::<Vec<_>>())
        .bind(col(|r| r.fate.clone()))
        .bind(rows.iter().map(|r| r.reason.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.quarantine).collect::<Vec<_>>())
        .bind(col(|r| r.flags.join(&FLAG_SEPARATOR.to_string())))
        .fetch_all(&self.pool)
        .await?;
        Ok(inserted.into_iter().collect())
    }

    /// Records later publishes of archived turns by their stream sequence.
    /// Idempotent: recording the same sequence twice changes nothing.
    pub async fn record_duplicates(&self, duplicates: &[(TurnKey, i64)]) -> Result<(), StoreError> {
        if duplicates.is_empty() {
            return Ok(());
        }
        let tenants: Vec<&str> = duplicates.iter().map(|((t, _), _)| t.as_str()).collect();
        let ids: Vec<&str> = duplicates.iter().map(|((_, id), _)| id.as_str()).collect();
        let seqs: Vec<i64> = duplicates.iter().map(|(_, s)| *s).collect();
        sqlx::query(
            "UPDATE turns t
             SET duplicate_seqs = ARRAY(SELECT DISTINCT s FROM unnest(t.duplicate_seqs || k.seqs) AS s ORDER BY s)
             FROM (
                 SELECT tenant, turn_id, array_agg(seq ORDER BY seq) AS seqs
                 FROM UNNEST($1::text[], $2::text[], $3::bigint[]) AS k(tenant, turn_id, seq)
                 GROUP BY tenant, turn_id
             ) k
             WHERE t.tenant = k.tenant AND t.turn_id = k.turn_id
               AND cardinality(t.duplicate_seqs) < 1000",
        )
        .bind(&tenants)
        .bind(&ids)
        .bind(&seqs)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// What the extract stage recorded for a turn.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Extraction {
    pub tenant: String,
    pub turn_id: String,
    /// `facts` or `no_facts`.
    pub outcome: String,
    pub reason: Option<String>,
    pub extractor: Option<String>,
    /// The facts emitted, as a JSON array.
    pub facts: Option<String>,
}

impl Store {
    /// The recorded extraction of each of these turns that has one.
    pub async fn extractions(
        &self,
        keys: &[TurnKey],
    ) -> Result<HashMap<TurnKey, Extraction>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (tenants, ids): (Vec<_>, Vec<_>) = keys.iter().cloned().unzip();
        let rows: Vec<Extraction> = sqlx::query_as(
            "SELECT t.tenant, t.turn_id, t.extract_outcome AS outcome, t.extract_reason AS reason,
                    t.extractor, t.facts::text AS facts
             FROM turns t
             JOIN UNNEST($1::text[], $2::text[]) AS k(tenant, turn_id)
               ON t.tenant = k.tenant AND t.turn_id = k.turn_id
             WHERE t.extract_outcome IS NOT NULL",
        )
        .bind(&tenants)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ((r.tenant.clone(), r.turn_id.clone()), r))
            .collect())
    }

    /// Records extractions; the first one recorded for a turn wins, so a
    /// redelivery can never replace facts that were already emitted. Returns
    /// the turns this call recorded.
    pub async fn record_extractions(
        &self,
        rows: &[Extraction],
    ) -> Result<HashSet<TurnKey>, StoreError> {
        if rows.is_empty() {
            return Ok(HashSet::new());
        }
        let recorded: Vec<(String, String)> = sqlx::query_as(
            "UPDATE turns t
             SET extract_outcome = r.outcome, extract_reason = r.reason, extractor = r.extractor, facts = r.facts::jsonb
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                  AS r(tenant, turn_id, outcome, reason, extractor, facts)
             WHERE t.tenant = r.tenant AND t.turn_id = r.turn_id AND t.extract_outcome IS NULL
             RETURNING t.tenant, t.turn_id",
        )
        .bind(rows.iter().map(|r| r.tenant.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.turn_id.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.outcome.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.reason.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.extractor.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.facts.clone()).collect::<Vec<_>>())
        .fetch_all(&self.pool)
        .await?;
        Ok(recorded.into_iter().collect())
    }
}

impl Store {
    /// Whether the pipeline is done with `turns` published turns: each went
    /// through the filter (kept or dropped), each kept turn was extracted,
    /// every fact is in a memory, and the index has caught up. For
    /// benchmarks, evaluations and tests, which run in a database of their own.
    pub async fn drained(&self, turns: usize) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM turns) >= $1
                AND NOT EXISTS (SELECT 1 FROM turns WHERE fate = 'kept' AND extract_outcome IS NULL)
                AND (SELECT coalesce(sum(jsonb_array_length(facts)), 0) FROM turns) = (SELECT count(*) FROM memory_sources)
                AND NOT EXISTS (SELECT 1 FROM memories WHERE index_state = 'pending')",
        )
        .bind(i64::try_from(turns).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await?)
    }
}

/// Marks an archived turn quarantined after the filter kept it as trusted:
/// a later stage's screen (nearness at the embed stage, the LLM's opinion)
/// quarantined one of its facts. `flags` join the turn's own (once each), so
/// the archive shows why; a turn already quarantined is left as it is.
pub async fn quarantine_later(
    conn: &mut sqlx::PgConnection,
    tenant: &str,
    turn_id: &str,
    flags: &[String],
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE turns
            SET quarantine = true,
                flags = ARRAY(SELECT DISTINCT f FROM unnest(flags || $3::text[]) AS f ORDER BY f)
          WHERE tenant = $1 AND turn_id = $2 AND NOT quarantine",
    )
    .bind(tenant)
    .bind(turn_id)
    .bind(flags)
    .execute(conn)
    .await?;
    Ok(())
}
