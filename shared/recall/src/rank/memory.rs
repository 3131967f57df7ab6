//! A recalled memory as every surface returns it (`hindsight recall --json`,
//! HTTP, NATS, MCP).

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use hindsight_core::{fact::FactType, memory::Status, turn::TurnContext};

/// Longest context shown with a recalled memory, in characters (the end of
/// the turn it replied to, where its question usually is).
pub const SHOWN_CONTEXT_CHARS: usize = 160;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecalledMemory {
    pub id: Uuid,
    pub content: String,
    /// What the memory's turn replied to, as `speaker: text` (the text's
    /// last [`SHOWN_CONTEXT_CHARS`] characters); counted in the token budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    pub fact_type: FactType,
    pub status: Status,
    pub importance: f32,
    pub confidence: f32,
    /// Where the memory came from: user, agent, tool or external (none for
    /// the janitor's summary of several memories).
    pub source: Option<String>,
    /// How far the memory's source is trusted: high, medium or low.
    pub trust: String,
    /// The poisoning screen's record of its turn: `screen:<score>` and
    /// `poison:<reason>` (why it was quarantined, or the cues of a near miss).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Only what the assistant inferred, not what anyone stated.
    #[serde(default)]
    pub inferred: bool,
    pub occurred_at: Option<DateTime<Utc>>,
    /// When it stops being true, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Past its `expires_at` at the recall's `as_of`: no longer current
    /// (recalled only with `include: expired`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
    pub created_at: DateTime<Utc>,
    /// The ids of the turns the memory came from.
    pub provenance: Vec<String>,
    pub score: f64,
    /// Memories in this answer that state another value of the same thing
    /// (one superseded the other, or both are active): never resolved silently.
    pub conflicts_with: Vec<Uuid>,
}

/// A memory's context as an answer shows it: `speaker: text`, the text cut
/// to its last [`SHOWN_CONTEXT_CHARS`] characters at a word boundary.
pub fn shown_context(c: &TurnContext) -> String {
    let short = TurnContext::new(&c.turn_id, &c.speaker, &c.content);
    let chars = short.content.chars().count();
    let text = if chars <= SHOWN_CONTEXT_CHARS {
        short.content
    } else {
        let tail: String = short
            .content
            .chars()
            .skip(chars - SHOWN_CONTEXT_CHARS)
            .collect();
        match tail.split_once(char::is_whitespace) {
            Some((_, rest)) if !rest.trim().is_empty() => format!("…{}", rest.trim()),
            _ => format!("…{}", tail.trim()),
        }
    };
    format!("{}: {text}", c.speaker)
}

impl RecalledMemory {
    /// Whether the screen saw orders to the agent in it (quarantined or not):
    /// a cue of what the text does, with a score above 0, or the LLM's word
    /// on a borderline turn (`poison:llm`). Likeness to the corpus's attacks
    /// alone (`learnt:`, `similar:`) is a near miss, not an order, and so is
    /// a cue the learnt model outweighed.
    pub fn reads_as_order(&self) -> bool {
        let scored = hindsight_core::turn::screen_score(&self.flags) > 0.0;
        self.flags.iter().any(|f| {
            f.strip_prefix("poison:").is_some_and(|r| {
                r == "llm" || (scored && !r.starts_with("learnt:") && !r.starts_with("similar:"))
            })
        })
    }

    /// Who a reader is told the memory came from.
    pub fn source_label(&self) -> &'static str {
        match self.source.as_deref() {
            Some("user") => "from the user",
            Some("agent") => "from the assistant",
            Some("tool") => "from a tool",
            Some("external") => "from an external document",
            _ => "a summary",
        }
    }

    /// The date a reader should see: the day it happened (a calendar day,
    /// stored as its midnight UTC), else the day it was learnt on `zone`'s
    /// calendar.
    pub fn date(&self, zone: chrono_tz::Tz) -> NaiveDate {
        match self.occurred_at {
            Some(day) => day.date_naive(),
            None => self.created_at.with_timezone(&zone).date_naive(),
        }
    }
}

/// A memory with plain values, for the tests of the recall modules.
#[cfg(test)]
#[test]
fn a_long_context_shows_its_end() {
    let long = format!("{} Did you go camping last weekend?", "word ".repeat(60));
    let shown = shown_context(&TurnContext::new("t1", "Caroline", &long));
    assert!(shown.starts_with("Caroline: …"), "{shown}");
    assert!(shown.ends_with("Did you go camping last weekend?"));
    assert!(shown.chars().count() <= "Caroline: …".len() + SHOWN_CONTEXT_CHARS);
    let short = shown_context(&TurnContext::new("t1", "Caroline", "Did you go?"));
    assert_eq!(short, "Caroline: Did you go?");
}

#[cfg(test)]
pub(crate) fn sample(content: &str) -> RecalledMemory {
    RecalledMemory {
        id: Uuid::new_v4(),
        content: content.into(),
        context: None,
        fact_type: FactType::Fact,
        status: Status::Active,
        importance: 0.5,
        confidence: 0.7,
        source: Some("user".into()),
        trust: "high".into(),
        flags: vec![],
        inferred: false,
        occurred_at: None,
        expires_at: None,
        expired: false,
        created_at: Utc::now(),
        provenance: vec![],
        score: 1.0,
        conflicts_with: vec![],
    }
}
