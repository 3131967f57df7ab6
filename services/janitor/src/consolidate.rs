//! Folding a user's old, unused episodes into semantic summaries: episodes
//! are grouped by topic (their first named entity, else their fact type) and
//! each group of two or more becomes one or more summaries that keep every
//! original sentence, with the dates they span. The summary's vector is the
//! normalised mean of the originals' (no model is needed to write it). With an
//! LLM configured, the run asks it for the summary's text instead
//! ([`Summary::rewrite`]), keeping these words when it cannot answer.

use std::collections::BTreeMap;

use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};
use hindsight_store::{maintenance::steps::VectorRow, memories::NewMemory};
use hindsight_text::statement;
use uuid::Uuid;

/// Longest summary, in characters; a larger topic becomes several summaries.
pub const SUMMARY_CHARS: usize = 800;

/// A summary to write and the episodes it replaces.
#[derive(Debug, Clone)]
pub struct Summary {
    pub memory: NewMemory,
    pub originals: Vec<Uuid>,
    pub topic: String,
    /// The episodes, dated ("2026-05-18: Li flew to Oslo"), for an LLM to summarise.
    pub episodes: Vec<String>,
}

impl Summary {
    /// Replaces the rules' text with another (an LLM's).
    pub fn rewrite(&mut self, content: String) {
        self.memory.content_key = statement::content_key(&content);
        self.memory.content = content;
    }
}

/// The topic an episode is filed under.
pub fn topic(row: &VectorRow) -> String {
    row.entities
        .first()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| row.fact_type.to_string())
}

/// The summaries of one user's eligible episodes (one embedding model).
/// Topics with a single episode are left as they are: there is nothing to fold.
pub fn summarise(rows: &[VectorRow]) -> Vec<Summary> {
    let mut topics: BTreeMap<String, Vec<&VectorRow>> = BTreeMap::new();
    for row in rows {
        topics.entry(topic(row)).or_default().push(row);
    }
    let mut out = Vec::new();
    for (topic, episodes) in topics {
        if episodes.len() < 2 {
            continue;
        }
        for part in split_by_length(&topic, &episodes) {
            if part.len() >= 2 {
                out.push(summary(&topic, &part));
            }
        }
    }
    out
}

fn sentence(row: &VectorRow) -> &str {
    row.content.trim().trim_end_matches(['.', '。', ';'])
}

/// Splits a topic's episodes (in time order) so each summary fits [`SUMMARY_CHARS`].
fn split_by_length<'a>(topic: &str, episodes: &[&'a VectorRow]) -> Vec<Vec<&'a VectorRow>> {
    let mut parts = vec![Vec::new()];
    let mut length = topic.len() + 40;
    for &row in episodes {
        let add = sentence(row).chars().count() + 2;
        let current = parts.last_mut().expect("parts is never empty");
        if !current.is_empty() && length + add > SUMMARY_CHARS {
            parts.push(vec![row]);
            length = topic.len() + 40 + add;
        } else {
            current.push(row);
            length += add;
        }
    }
    parts
}

fn when(row: &VectorRow) -> chrono::DateTime<chrono::Utc> {
    row.occurred_at.unwrap_or(row.created_at)
}

fn summary(topic: &str, episodes: &[&VectorRow]) -> Summary {
    let first = episodes[0];
    let (from, to) = episodes
        .iter()
        .map(|r| when(r))
        .fold((when(first), when(first)), |(a, b), t| (a.min(t), b.max(t)));
    let sentences: Vec<&str> = episodes.iter().map(|r| sentence(r)).collect();
    let content = format!(
        "{topic} — {} earlier episodes, {} to {}: {}.",
        episodes.len(),
        from.format("%Y-%m-%d"),
        to.format("%Y-%m-%d"),
        sentences.join("; ")
    );
    let mut entities: Vec<String> = Vec::new();
    for e in episodes.iter().flat_map(|r| &r.entities) {
        if !entities.contains(e) && entities.len() < 16 {
            entities.push(e.clone());
        }
    }
    let same = |f: fn(&VectorRow) -> Option<String>| {
        let v = f(first);
        episodes.iter().all(|r| f(r) == v).then_some(v).flatten()
    };
    let fact_type = if episodes.iter().all(|r| r.fact_type == first.fact_type) {
        first.fact_type
    } else {
        FactType::Fact
    };
    let trust_rank = |t: &str| match t {
        "low" => 0,
        "medium" => 1,
        _ => 2,
    };
    let source_trust = episodes
        .iter()
        .map(|r| r.source_trust.as_str())
        .min_by_key(|t| trust_rank(t))
        .unwrap_or("medium")
        .to_string();
    let originals: Vec<Uuid> = episodes.iter().map(|r| r.id).collect();
    let memory = NewMemory {
        id: summary_id(&originals),
        tenant: first.tenant.clone(),
        user_id: first.user_id.clone(),
        agent_id: same(|r| r.agent_id.clone()),
        session_id: same(|r| r.session_id.clone()),
        kind: Kind::Semantic,
        fact_type,
        content_key: statement::content_key(&content),
        content,
        entities,
        importance: episodes.iter().map(|r| r.importance).fold(0.0, f32::max),
        confidence: episodes.iter().map(|r| r.confidence).fold(1.0, f32::min),
        source_trust,
        status: Status::Active,
        occurred_at: episodes.iter().filter_map(|r| r.occurred_at).min(),
        valid_from: episodes.iter().filter_map(|r| r.valid_from).min(),
        expires_at: None,
        embedding_model: first.embedding_model.clone(),
        embedding_version: first.embedding_version.clone(),
        embedding: centroid(episodes),
        // A summary spans many turns; it replies to none of them.
        context: None,
        source: None,
        flags: vec![],
        inferred: false,
    };
    Summary {
        memory,
        originals,
        topic: topic.to_string(),
        episodes: episodes
            .iter()
            .map(|r| format!("{}: {}", when(r).format("%Y-%m-%d"), sentence(r)))
            .collect(),
    }
}

/// A summary's id follows from what it folds, so a run that is interrupted
/// and resumed (or repeated on a copy of the data) writes the same summary.
fn summary_id(originals: &[Uuid]) -> Uuid {
    let mut key = Vec::with_capacity(originals.len() * 16);
    for id in originals {
        key.extend_from_slice(id.as_bytes());
    }
    Uuid::new_v5(&SUMMARY_NAMESPACE, &key)
}

const SUMMARY_NAMESPACE: Uuid = Uuid::from_u128(0x6869_6e64_7369_6768_745f_7375_6d6d_6172);

fn centroid(episodes: &[&VectorRow]) -> Vec<f32> {
    let dimension = episodes[0].embedding.len();
    let mut sum = vec![0f32; dimension];
    for r in episodes.iter().filter(|r| r.embedding.len() == dimension) {
        for (s, x) in sum.iter_mut().zip(&r.embedding) {
            *s += x;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|x| *x /= norm);
    }
    sum
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn episode(content: &str, entity: Option<&str>, day: u32) -> VectorRow {
        let at = Utc
            .with_ymd_and_hms(2025, 3, day, 12, 0, 0)
            .single()
            .expect("date");
        VectorRow {
            id: Uuid::new_v4(),
            tenant: "t".into(),
            user_id: "u".into(),
            agent_id: None,
            session_id: Some(format!("s{day}")),
            fact_type: FactType::Event,
            content: content.into(),
            entities: entity.map(|e| vec![e.to_string()]).unwrap_or_default(),
            importance: 0.3 + day as f32 / 100.0,
            confidence: 0.9,
            source_trust: if day == 2 { "low" } else { "high" }.into(),
            access_count: 0,
            occurred_at: Some(at),
            valid_from: Some(at),
            created_at: at,
            last_accessed_at: None,
            updated_at: at,
            status_at: None,
            embedding_model: "m".into(),
            embedding_version: "1".into(),
            embedding: vec![day as f32, 1.0],
        }
    }

    #[test]
    fn one_summary_per_topic_of_two_or_more() {
        let rows = vec![
            episode("Li flew to Oslo.", Some("Oslo"), 1),
            episode("Li met Erik in Oslo.", Some("Oslo"), 2),
            episode("Li bought a bike.", None, 3),
        ];
        let out = summarise(&rows);
        assert_eq!(out.len(), 1, "the lone episode stays");
        let s = &out[0];
        assert_eq!(
            s.memory.content,
            "Oslo — 2 earlier episodes, 2025-03-01 to 2025-03-02: Li flew to Oslo; Li met Erik in Oslo."
        );
        assert_eq!(s.originals, vec![rows[0].id, rows[1].id]);
        assert_eq!(s.memory.kind, Kind::Semantic);
        assert_eq!(s.memory.source_trust, "low", "the weakest source wins");
        assert!((s.memory.importance - 0.32).abs() < 1e-6);
        assert_eq!(s.memory.session_id, None, "two sessions");
        let norm: f32 = s.memory.embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn long_topics_split_into_several_summaries() {
        let long = "x".repeat(300);
        let rows: Vec<VectorRow> = (1..=6).map(|d| episode(&long, Some("Oslo"), d)).collect();
        let out = summarise(&rows);
        assert_eq!(out.len(), 3);
        assert!(
            out.iter()
                .all(|s| s.memory.content.chars().count() <= SUMMARY_CHARS)
        );
        assert_eq!(out.iter().map(|s| s.originals.len()).sum::<usize>(), 6);
    }
}
