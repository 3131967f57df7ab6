//! The recall request and answer as they travel over HTTP, NATS and MCP. The
//! tenant is never part of the body: each surface takes it from where it is
//! authenticated (the bearer key, the subject, the MCP session).

use std::collections::BTreeMap;

use crate::rank::{fusion::Parts, memory::RecalledMemory};
use chrono::{DateTime, Utc};
use hindsight_core::{
    closed_set::VariantArray,
    fact::FactType,
    memory::{Include, Status},
    signal::Signal,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The longest query recall accepts, in characters.
pub const MAX_QUERY_CHARS: usize = 4_000;
/// The largest token budget a request may ask for.
pub const MAX_TOKENS_LIMIT: usize = 32_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallRequest {
    pub user_id: String,
    /// What to recall; may be empty when filters say what is wanted.
    #[serde(default)]
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fact_types: Vec<FactType>,
    /// When the memory happened (else when it was learnt), inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<String>,
    /// At most this many memories; without it, a dynamic k (those scoring
    /// close to the best), within the token budget either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
    /// What is searched beside active memories that are current: other
    /// statuses (superseded, archived, quarantined; deleted ones never), and
    /// memories past their end (`expired`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<Include>,
    /// The moment the recall is made as of (default: now): what is past its
    /// end then is expired, and "last week" in the query is the week before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    #[serde(default)]
    pub explain: bool,
}

impl RecallRequest {
    pub fn new(user_id: impl Into<String>, query: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            query: query.into(),
            session_id: None,
            fact_types: Vec::new(),
            from: None,
            to: None,
            entities: Vec::new(),
            top_k: None,
            max_tokens: None,
            include: Vec::new(),
            as_of: None,
            explain: false,
        }
    }

    /// Checks the request; the message says what to change.
    pub fn validate(&self) -> Result<(), RequestError> {
        let fail = |m: String| Err(RequestError(m));
        if self.user_id.trim().is_empty() {
            return fail("user_id is required".into());
        }
        if self.query.chars().count() > MAX_QUERY_CHARS {
            return fail(format!("query is longer than {MAX_QUERY_CHARS} characters"));
        }
        let filtered = self.session_id.is_some()
            || !self.fact_types.is_empty()
            || self.from.is_some()
            || self.to.is_some()
            || !self.entities.is_empty();
        if self.query.trim().is_empty() && !filtered {
            return fail(
                "query is empty: give a query, or filters (session_id, fact_types, from/to, entities)"
                    .into(),
            );
        }
        if let Some(k) = self.top_k
            && !(1..=crate::rank::budget::MAX_K).contains(&k)
        {
            return fail(format!(
                "top_k must be between 1 and {}",
                crate::rank::budget::MAX_K
            ));
        }
        if let Some(t) = self.max_tokens
            && !(1..=MAX_TOKENS_LIMIT).contains(&t)
        {
            return fail(format!(
                "max_tokens must be between 1 and {MAX_TOKENS_LIMIT}"
            ));
        }
        if let (Some(from), Some(to)) = (self.from, self.to)
            && from > to
        {
            return fail("from is after to".into());
        }
        Ok(())
    }

    /// The statuses searched: active, plus those asked for.
    pub fn statuses(&self) -> Vec<Status> {
        let mut s = vec![Status::Active];
        for status in self.include.iter().filter_map(|i| i.status()) {
            if !s.contains(&status) {
                s.push(status);
            }
        }
        s
    }

    /// Whether memories past their end at `as_of` are asked for too.
    pub fn includes_expired(&self) -> bool {
        self.include.contains(&Include::Expired)
    }
}

/// A request that cannot be answered as it stands.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid recall request: {0}")]
pub struct RequestError(pub String);

/// Why one candidate ranked where it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainedCandidate {
    pub id: Uuid,
    pub content: String,
    /// 1-based rank per signal ([`Signal`]); absent when the signal gave it nothing.
    pub ranks: BTreeMap<String, usize>,
    /// The fused signals (0–1), before the time boost.
    pub fused: f64,
    pub relevance: f64,
    pub recency: f64,
    pub importance: f64,
    pub access: f64,
    pub score: f64,
    /// Whether it is in the answer; if not, why not.
    pub returned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

impl ExplainedCandidate {
    pub fn new(id: Uuid, content: String, ranks: &[Option<usize>], fused: f64, p: Parts) -> Self {
        Self {
            id,
            content,
            ranks: Signal::VARIANTS
                .iter()
                .zip(ranks)
                .filter_map(|(c, r)| r.map(|r| (c.to_string(), r)))
                .collect(),
            fused,
            relevance: p.relevance,
            recency: p.recency,
            importance: p.importance,
            access: p.access,
            score: p.score,
            returned: false,
            left_out: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallResponse {
    pub memories: Vec<RecalledMemory>,
    /// True when a channel failed (the vector index or the query embedding)
    /// and the answer comes from the others.
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// The session's working memory (exact keys) when the request names a
    /// session; null otherwise.
    #[serde(default)]
    pub working_memory: Option<serde_json::Map<String, serde_json::Value>>,
    /// Estimated tokens of the memories' content.
    pub tokens: usize,
    /// Every candidate, when `explain` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<Vec<ExplainedCandidate>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_bad_bounds_are_refused_with_a_reason() {
        let err =
            serde_json::from_str::<RecallRequest>(r#"{"user_id":"u","query":"q","tenant":"x"}"#)
                .map(|_| ())
                .expect_err("tenant is not a body field");
        assert!(err.to_string().contains("unknown field `tenant`"));
        let mut r = RecallRequest::new("u", "q");
        r.top_k = Some(0);
        assert!(r.validate().is_err());
        let deleted = serde_json::from_str::<RecallRequest>(
            r#"{"user_id":"u","query":"q","include":["deleted"]}"#,
        )
        .map(|_| ())
        .expect_err("deleted memories are never recalled");
        assert!(
            deleted
                .to_string()
                .contains("expected one of `superseded`, `archived`, `quarantined`, `expired`"),
            "{deleted}"
        );
        let unknown = serde_json::from_str::<RecallRequest>(
            r#"{"user_id":"u","query":"q","fact_types":["opinion"]}"#,
        )
        .map(|_| ())
        .expect_err("an unknown fact type");
        assert!(
            unknown.to_string().contains("unknown variant `opinion`"),
            "{unknown}"
        );
        let empty = RecallRequest::new("u", " ");
        assert!(
            empty
                .validate()
                .expect_err("empty")
                .0
                .contains("query is empty")
        );
    }

    #[test]
    fn statuses_are_active_plus_those_included() {
        let mut r = RecallRequest::new("u", "q");
        assert_eq!(r.statuses(), [Status::Active]);
        r.include = vec![
            Include::Superseded,
            Include::Expired,
            Include::Superseded,
            Include::Archived,
        ];
        assert_eq!(
            r.statuses(),
            [Status::Active, Status::Superseded, Status::Archived]
        );
        assert!(r.includes_expired());
    }
}
