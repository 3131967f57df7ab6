//! The LoCoMo evaluation data (../shared/eval/README.md): conversations as
//! turns under the evaluation protocol, and questions with their evidence.

use std::{collections::BTreeMap, path::Path};

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

/// The tenant every LoCoMo conversation is published under.
pub const TENANT: &str = "locomo";

#[derive(Debug, Clone)]
pub struct Turn {
    pub user_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub speaker: String,
    pub ts: DateTime<Utc>,
    pub content: String,
}

impl Turn {
    /// The turn id as published: the dialogue id qualified by the
    /// conversation, since a turn is identified by (tenant, turn_id) and every
    /// conversation shares the tenant and numbers its turns from `D1:1`.
    pub fn qualified_id(&self) -> String {
        qualify(&self.user_id, &self.turn_id)
    }

    /// The envelope an agent would publish for this turn.
    pub fn envelope(&self) -> Value {
        json!({
            "tenant": TENANT,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "turn_id": self.qualified_id(),
            "speaker": self.speaker,
            "role": "user",
            "ts": self.ts.to_rfc3339(),
            "content": self.content,
        })
    }
}

/// `<sample_id>/<dia_id>`: a dialogue id unique within the tenant.
pub fn qualify(user_id: &str, dia_id: &str) -> String {
    format!("{user_id}/{dia_id}")
}

#[derive(Debug, Clone)]
pub struct Question {
    pub user_id: String,
    pub question: String,
    pub category: u8,
    /// Turn ids (`D<session>:<turn>`).
    pub evidence: Vec<String>,
    /// When the question is asked: the conversation's last session. Recall
    /// is made as of then, so a plan that had ended by that day is past.
    pub asked_at: DateTime<Utc>,
}

#[derive(Debug, Default)]
pub struct Dataset {
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
}

#[derive(Deserialize)]
struct RawConversation {
    sample_id: String,
    conversation: BTreeMap<String, Value>,
    qa: Vec<RawQuestion>,
}

#[derive(Deserialize)]
struct RawQuestion {
    #[serde(default)]
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    category: u8,
}

/// `"1:56 pm on 8 May, 2023"` as UTC.
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    let normalised = text.trim().replace("am", "AM").replace("pm", "PM");
    NaiveDateTime::parse_from_str(&normalised, "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|t| t.and_utc())
}

/// Evidence ids, repaired: `"D8:6; D9:17"` → two ids, `"D:11:26"` → `D11:26`, `"D30:05"` → `D30:5`.
pub fn parse_evidence(raw: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in raw {
        for token in entry.split([';', ',', ' ']).filter(|t| !t.is_empty()) {
            let numbers: Vec<u32> = token
                .trim_start_matches('D')
                .split(':')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.parse().ok())
                .collect();
            if let [session, turn] = numbers[..] {
                out.push(format!("D{session}:{turn}"));
            }
        }
    }
    out
}

impl Dataset {
    /// Only the turns and questions of these conversations (`sample_id`s);
    /// an id the data does not hold is an error.
    pub fn only(self, conversations: &[String]) -> anyhow::Result<Self> {
        for c in conversations {
            if !self.turns.iter().any(|t| &t.user_id == c) {
                let mut known: Vec<&str> = self.turns.iter().map(|t| t.user_id.as_str()).collect();
                known.dedup();
                anyhow::bail!(
                    "no conversation {c:?} in the data (it has {})",
                    known.join(", ")
                );
            }
        }
        let keep = |id: &String| conversations.contains(id);
        Ok(Self {
            turns: self
                .turns
                .into_iter()
                .filter(|t| keep(&t.user_id))
                .collect(),
            questions: self
                .questions
                .into_iter()
                .filter(|q| keep(&q.user_id))
                .collect(),
        })
    }
}

pub fn load(path: &Path) -> anyhow::Result<Dataset> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let raw: Vec<RawConversation> = serde_json::from_str(&text)?;
    let mut data = Dataset::default();
    for conv in raw {
        let mut sessions: Vec<(u32, &Vec<Value>)> = conv
            .conversation
            .iter()
            .filter_map(|(k, v)| {
                let n = k.strip_prefix("session_")?.parse::<u32>().ok()?;
                Some((n, v.as_array()?))
            })
            .collect();
        sessions.sort_by_key(|(n, _)| *n);
        let mut last_date = None;
        for (n, turns) in sessions {
            let date = conv
                .conversation
                .get(&format!("session_{n}_date_time"))
                .and_then(Value::as_str)
                .and_then(parse_date)
                .ok_or_else(|| {
                    anyhow::anyhow!("{}: session {n} has no readable date", conv.sample_id)
                })?;
            last_date = last_date.max(Some(date));
            for t in turns {
                let (Some(speaker), Some(dia_id)) = (t["speaker"].as_str(), t["dia_id"].as_str())
                else {
                    continue;
                };
                let mut content = t["text"].as_str().unwrap_or_default().to_string();
                if let Some(caption) = t.get("blip_caption").and_then(Value::as_str) {
                    content = format!("{content} [shares a photo: {caption}]")
                        .trim()
                        .to_string();
                }
                data.turns.push(Turn {
                    user_id: conv.sample_id.clone(),
                    session_id: format!("{}/session_{n}", conv.sample_id),
                    turn_id: dia_id.to_string(),
                    speaker: speaker.to_string(),
                    ts: date,
                    content,
                });
            }
        }
        let asked_at =
            last_date.ok_or_else(|| anyhow::anyhow!("{}: no session", conv.sample_id))?;
        for q in conv.qa {
            data.questions.push(Question {
                user_id: conv.sample_id.clone(),
                question: q.question,
                category: q.category,
                evidence: parse_evidence(&q.evidence),
                asked_at,
            });
        }
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_malformed_evidence_are_read() {
        assert_eq!(
            parse_date("1:56 pm on 8 May, 2023").map(|d| d.to_rfc3339()),
            Some("2023-05-08T13:56:00+00:00".into())
        );
        assert_eq!(
            parse_date("10:37 am on 27 June, 2023").map(|d| d.to_rfc3339()),
            Some("2023-06-27T10:37:00+00:00".into())
        );
        let raw = vec!["D8:6; D9:17".to_string(), "D:11:26".into(), "D30:05".into()];
        assert_eq!(parse_evidence(&raw), ["D8:6", "D9:17", "D11:26", "D30:5"]);
    }
}
