//! Where each memory came from (`memory_sources`: the fact and turn) and what
//! happened to it (`memory_events`, the audit log). Persist gathers a group's
//! rows in a [`Provenance`] while it decides the group's facts and writes them
//! with one statement per table, instead of two round trips per fact inside
//! the user's lock.

use serde_json::Value;
use uuid::Uuid;

use crate::{StoreError, memories::Tx};

/// Provenance rows of one user's memories to write, in the order they were
/// noted, with [`Provenance::write`] in the transaction that wrote the memories.
pub struct Provenance {
    tenant: String,
    user_id: String,
    actor: &'static str,
    /// Memory, fact, turn.
    sources: Vec<(Uuid, String, String)>,
    /// Memory, event, detail.
    events: Vec<(Uuid, &'static str, Value)>,
}

impl Provenance {
    /// Rows for the memories of `user_id` of `tenant`, written by `actor`.
    pub fn new(tenant: &str, user_id: &str, actor: &'static str) -> Self {
        Self {
            tenant: tenant.to_string(),
            user_id: user_id.to_string(),
            actor,
            sources: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Notes that `fact_id` (from `turn_id`) is folded into `memory_id`.
    pub fn source(&mut self, memory_id: Uuid, fact_id: &str, turn_id: &str) {
        self.sources
            .push((memory_id, fact_id.to_string(), turn_id.to_string()));
    }

    /// Notes an audit-log entry for `memory_id`.
    pub fn event(&mut self, memory_id: Uuid, event: &'static str, detail: Value) {
        self.events.push((memory_id, event, detail));
    }

    /// Writes every noted row: one statement for the sources (a source
    /// already recorded stays as it is) and one for the events, which keep
    /// the order they were noted in and name their user (so the events'
    /// trigger looks up none).
    pub async fn write(self, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        if !self.sources.is_empty() {
            let s = &self.sources;
            sqlx::query(
                "INSERT INTO memory_sources (memory_id, fact_id, tenant, turn_id)
                 SELECT memory_id, fact_id, $4, turn_id
                 FROM UNNEST($1::uuid[], $2::text[], $3::text[]) AS s(memory_id, fact_id, turn_id)
                 ON CONFLICT DO NOTHING",
            )
            .bind(s.iter().map(|r| r.0).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.1.as_str()).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.2.as_str()).collect::<Vec<_>>())
            .bind(&self.tenant)
            .execute(&mut **tx)
            .await?;
        }
        if !self.events.is_empty() {
            let (memories, (events, details)): (Vec<Uuid>, (Vec<&str>, Vec<Value>)) = self
                .events
                .into_iter()
                .map(|(memory, event, detail)| (memory, (event, detail)))
                .unzip();
            sqlx::query(
                "INSERT INTO memory_events (memory_id, tenant, user_id, event, actor, detail)
                 SELECT memory_id, $4, $5, event, $6, detail
                 FROM UNNEST($1::uuid[], $2::text[], $3::jsonb[])
                      WITH ORDINALITY AS e(memory_id, event, detail, n)
                 ORDER BY n",
            )
            .bind(memories)
            .bind(events)
            .bind(details)
            .bind(&self.tenant)
            .bind(&self.user_id)
            .bind(self.actor)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }
}

/// Writes one audit-log entry for `memory_id` now (an operator's edit).
pub async fn add_event(
    tx: &mut Tx<'_>,
    memory_id: Uuid,
    tenant: &str,
    event: &str,
    actor: &str,
    detail: Value,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO memory_events (memory_id, tenant, event, actor, detail) VALUES ($1, $2, $3, $4, $5)")
        .bind(memory_id)
        .bind(tenant)
        .bind(event)
        .bind(actor)
        .bind(detail)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
