//! The turn: one message of a conversation, as any agent publishes it to
//! `<ns>.turns.<tenant>`, and the kept turn the filter passes on.
//!
//! Parsing is by hand rather than through `#[derive(Deserialize)]` so that every
//! rejection names the field and what was wrong with it: the reason lands in the
//! DLQ, where a person reads it.

mod envelope;
#[cfg(test)]
mod tests;

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::digest;

pub use envelope::{EnvelopeError, parse_envelope};

/// Largest accepted envelope (the whole JSON document).
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024;
/// Largest accepted `content`.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// Deepest accepted nesting of `metadata`.
pub const MAX_METADATA_DEPTH: usize = 16;
/// Longest accepted `speaker` display name, in characters.
pub const MAX_SPEAKER_CHARS: usize = 128;

/// Who produced a turn in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    Tool,
    System,
}

/// Where the content came from; decides how far it is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    User,
    Agent,
    Tool,
    External,
}

/// How far the content of a turn is trusted, from its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    High,
    Medium,
    Low,
}

impl Role {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "system" => Role::System,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }

    /// The source assumed when a turn does not name one.
    pub fn default_source(self) -> Source {
        match self {
            Role::User => Source::User,
            Role::Assistant | Role::System => Source::Agent,
            Role::Tool => Source::Tool,
        }
    }
}

impl Source {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => Source::User,
            "agent" => Source::Agent,
            "tool" => Source::Tool,
            "external" => Source::External,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Agent => "agent",
            Source::Tool => "tool",
            Source::External => "external",
        }
    }

    /// What the user says and what tools return is trusted; what the agent
    /// inferred less so; text from outside (web pages, emails) least.
    pub fn trust(self) -> Trust {
        match self {
            Source::User | Source::Tool => Trust::High,
            Source::Agent => Trust::Medium,
            Source::External => Trust::Low,
        }
    }
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::High => "high",
            Trust::Medium => "medium",
            Trust::Low => "low",
        }
    }
}

/// The largest UTC offset a turn may give, in minutes: 18 hours (real zones
/// span −12:00 to +14:00).
pub const MAX_UTC_OFFSET_MINUTES: i64 = 18 * 60;

/// A turn that passed validation, with every default applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub tenant: String,
    pub turn_id: String,
    pub user_id: String,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub speaker: String,
    pub role: Role,
    pub source: Source,
    pub content: String,
    /// UTC; the receive time when the agent gave none.
    pub ts: DateTime<Utc>,
    /// The sender's UTC offset in minutes east, from a `ts` such as
    /// `2026-05-08T07:30:00+08:00`; none for `Z` (or `-00:00`, RFC 3339's
    /// "offset unknown") and for a turn without `ts`. The filter fills it
    /// from the configured time zone ([`crate::zone`]) when none was given,
    /// so later stages read the turn on its sender's calendar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset_minutes: Option<i32>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

impl Turn {
    /// The turn's time on its sender's calendar (UTC without an offset).
    pub fn local_ts(&self) -> DateTime<FixedOffset> {
        crate::zone::at_offset(self.ts, self.utc_offset_minutes.unwrap_or(0))
    }

    /// The message id used for `Nats-Msg-Id` on every subject this turn travels.
    pub fn msg_id(&self) -> String {
        format!("{}:{}", self.tenant, self.turn_id)
    }
}

/// The turn another one replies to: the session's previous kept turn (secrets
/// redacted, never a quarantined one). A reply such as "Yes, last weekend, it
/// was great" means something only next to "Did you go camping?": the
/// extractors read it, and facts keep it so that recall can find them by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnContext {
    pub turn_id: String,
    pub speaker: String,
    /// At most [`MAX_CONTEXT_CHARS`] characters: the end of a long turn, where
    /// its question usually is.
    pub content: String,
}

/// Longest context a turn carries, in characters.
pub const MAX_CONTEXT_CHARS: usize = 600;

impl TurnContext {
    /// The context of a turn that replies to `previous`, its content cut to
    /// its last [`MAX_CONTEXT_CHARS`] characters at a word boundary.
    pub fn of(previous: &Turn) -> Self {
        Self::new(&previous.turn_id, &previous.speaker, &previous.content)
    }

    pub fn new(turn_id: &str, speaker: &str, content: &str) -> Self {
        let chars = content.chars().count();
        let content = if chars <= MAX_CONTEXT_CHARS {
            content.trim().to_string()
        } else {
            let tail: String = content.chars().skip(chars - MAX_CONTEXT_CHARS).collect();
            match tail.split_once(char::is_whitespace) {
                Some((_, rest)) if !rest.trim().is_empty() => rest.trim().to_string(),
                _ => tail.trim().to_string(),
            }
        };
        Self {
            turn_id: turn_id.to_string(),
            speaker: speaker.to_string(),
            content,
        }
    }
}

/// What the filter passes on: the turn (secrets redacted) and what the filter
/// learnt about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptTurn {
    #[serde(flatten)]
    pub turn: Turn,
    pub trust: Trust,
    /// Suspected memory poisoning: later stages keep it out of trusted recall.
    pub quarantine: bool,
    /// Why the filter flagged it (poisoning patterns, redactions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// The turn this one replies to, when the session has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<TurnContext>,
}

/// The poisoning screen's flags among `flags`: `screen:<score>` and `poison:<reason>`.
pub fn screen_flags(flags: &[String]) -> Vec<String> {
    flags
        .iter()
        .filter(|f| f.starts_with("screen:") || f.starts_with("poison:"))
        .cloned()
        .collect()
}

/// The poisoning screen's score recorded in `flags` (0 when none is; below 0
/// when the screen saw a cue that its learnt model outweighed).
pub fn screen_score(flags: &[String]) -> f64 {
    flags
        .iter()
        .filter_map(|f| f.strip_prefix("screen:")?.parse::<f64>().ok())
        .reduce(f64::max)
        .unwrap_or(0.0)
}

impl crate::stage::Message for KeptTurn {
    fn tenant(&self) -> &str {
        &self.turn.tenant
    }

    fn msg_id(&self) -> String {
        self.turn.msg_id()
    }
}
