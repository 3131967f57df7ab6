//! The turn: one message of a conversation, as any agent publishes it to
//! `<ns>.turns.<tenant>`, and the kept turn the filter passes on.
//!
//! Parsing is by hand rather than through `#[derive(Deserialize)]` so that every
//! rejection names the field and what was wrong with it: the reason lands in the
//! DLQ, where a person reads it.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{digest, is_valid_id, is_valid_tenant};

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

/// Why an envelope was refused; the message says which field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("envelope is {size} bytes, more than the {max} allowed")]
    TooLarge { size: usize, max: usize },
    #[error("envelope is not valid UTF-8 (first bad byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("envelope is empty: expected a JSON object")]
    Empty,
    #[error("envelope is not valid JSON: {0}")]
    NotJson(String),
    #[error("envelope must be a JSON object, got {0}")]
    NotObject(&'static str),
    #[error("field `{0}` is required")]
    Missing(&'static str),
    #[error("field `{0}` appears more than once; a turn names each field once")]
    DuplicateField(String),
    #[error("field `{field}` must be {expected}, got {got}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
        got: &'static str,
    },
    #[error("field `{field}` is invalid: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("tenant {envelope:?} in the envelope does not match tenant {subject:?} of the subject")]
    TenantMismatch { envelope: String, subject: String },
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string_field<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, EnvelopeError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(EnvelopeError::WrongType {
            field,
            expected: "a string",
            got: kind(other),
        }),
    }
}

fn id_field(
    obj: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, EnvelopeError> {
    match string_field(obj, field)? {
        None => Ok(None),
        Some(id) if is_valid_id(id) => Ok(Some(id.to_string())),
        Some(id) => Err(EnvelopeError::Invalid {
            field,
            reason: format!(
                "{:?} must be 1 to 128 characters of A-Z a-z 0-9 . _ : / @ -",
                shorten(id)
            ),
        }),
    }
}

fn required_id(obj: &Map<String, Value>, field: &'static str) -> Result<String, EnvelopeError> {
    id_field(obj, field)?.ok_or(EnvelopeError::Missing(field))
}

/// The first control character other than tab, newline and carriage return.
/// They have no place in conversation text, and NUL cannot be stored in Postgres.
fn control_char(s: &str) -> Option<(usize, char)> {
    s.chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= 40 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(40).collect::<String>())
    }
}

/// Checks metadata depth (`depth` is that of the object or array `value` would
/// be: the metadata object itself is level 1) and that no string in it holds a
/// NUL (Postgres `jsonb` refuses it).
fn check_metadata(value: &Value, depth: usize) -> Result<(), String> {
    if depth > MAX_METADATA_DEPTH && (value.is_object() || value.is_array()) {
        return Err(format!("nested deeper than {MAX_METADATA_DEPTH} levels"));
    }
    match value {
        Value::String(s) if s.contains('\0') => Err("contains a NUL character".into()),
        Value::Array(items) => items.iter().try_for_each(|v| check_metadata(v, depth + 1)),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            if k.contains('\0') {
                Err("a key contains a NUL character".into())
            } else {
                check_metadata(v, depth + 1)
            }
        }),
        _ => Ok(()),
    }
}

/// The first field named twice in the top-level object of `text` (valid JSON
/// whose object has `distinct` fields). A parser keeps one of the two values
/// (serde_json the last, others the first), so a turn that names a field twice
/// means different things to different readers: it is refused instead.
fn duplicate_field(text: &str, distinct: usize) -> Option<String> {
    struct Names(Vec<String>);
    impl<'de> Deserialize<'de> for Names {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Names;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Names, A::Error> {
                    let mut names = Vec::new();
                    while let Some(name) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        names.push(name);
                    }
                    Ok(Names(names))
                }
            }
            d.deserialize_map(Visitor)
        }
    }
    let Names(names) = serde_json::from_str(text).ok()?;
    if names.len() == distinct {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    names.into_iter().find(|n| !seen.insert(n.clone()))
}

/// Parses and validates a raw envelope received on the subject of `subject_tenant`.
/// `received_at` stands in for a missing `ts`.
pub fn parse_envelope(
    payload: &[u8],
    subject_tenant: &str,
    received_at: DateTime<Utc>,
) -> Result<Turn, EnvelopeError> {
    if payload.len() > MAX_ENVELOPE_BYTES {
        return Err(EnvelopeError::TooLarge {
            size: payload.len(),
            max: MAX_ENVELOPE_BYTES,
        });
    }
    let text = std::str::from_utf8(payload).map_err(|e| EnvelopeError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    // A byte order mark is not JSON, but some tools write one; RFC 8259 lets a
    // parser ignore it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(EnvelopeError::Empty);
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| EnvelopeError::NotJson(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(EnvelopeError::NotObject(kind(&value)));
    };
    if let Some(field) = duplicate_field(text, obj.len()) {
        return Err(EnvelopeError::DuplicateField(field));
    }

    let tenant = required_id(&obj, "tenant")?;
    if !is_valid_tenant(&tenant) {
        return Err(EnvelopeError::Invalid {
            field: "tenant",
            reason: format!("{tenant:?} may not contain '.'"),
        });
    }
    if tenant != subject_tenant {
        return Err(EnvelopeError::TenantMismatch {
            envelope: tenant,
            subject: subject_tenant.to_string(),
        });
    }
    let user_id = required_id(&obj, "user_id")?;
    let session_id = required_id(&obj, "session_id")?;
    let turn_id = id_field(&obj, "turn_id")?;
    let agent_id = id_field(&obj, "agent_id")?;

    let role = match string_field(&obj, "role")? {
        None => Role::User,
        Some(r) => Role::parse(r).ok_or_else(|| EnvelopeError::Invalid {
            field: "role",
            reason: format!(
                "{:?} is not one of user, assistant, tool, system",
                shorten(r)
            ),
        })?,
    };
    let source = match string_field(&obj, "source")? {
        None => role.default_source(),
        Some(s) => Source::parse(s).ok_or_else(|| EnvelopeError::Invalid {
            field: "source",
            reason: format!("{:?} is not one of user, agent, tool, external", shorten(s)),
        })?,
    };

    let content = string_field(&obj, "content")?.ok_or(EnvelopeError::Missing("content"))?;
    if content.len() > MAX_CONTENT_BYTES {
        return Err(EnvelopeError::Invalid {
            field: "content",
            reason: format!(
                "{} bytes, more than the {MAX_CONTENT_BYTES} allowed",
                content.len()
            ),
        });
    }
    if let Some((at, c)) = control_char(content) {
        return Err(EnvelopeError::Invalid {
            field: "content",
            reason: format!("control character U+{:04X} at character {at}", c as u32),
        });
    }

    let speaker = match string_field(&obj, "speaker")? {
        Some(s) => {
            let s = s.trim();
            if s.is_empty() || s.chars().count() > MAX_SPEAKER_CHARS {
                return Err(EnvelopeError::Invalid {
                    field: "speaker",
                    reason: format!("must be 1 to {MAX_SPEAKER_CHARS} characters"),
                });
            }
            if let Some((at, c)) = control_char(s) {
                return Err(EnvelopeError::Invalid {
                    field: "speaker",
                    reason: format!("control character U+{:04X} at character {at}", c as u32),
                });
            }
            s.to_string()
        }
        None => match role {
            Role::User => user_id.clone(),
            Role::Assistant | Role::Tool => agent_id
                .clone()
                .unwrap_or_else(|| role.as_str().to_string()),
            Role::System => "system".to_string(),
        },
    };

    let ts_given = string_field(&obj, "ts")?;
    let (ts, utc_offset_minutes) = match ts_given {
        None => (received_at, None),
        Some(ts) => {
            let parsed = DateTime::parse_from_rfc3339(ts).map_err(|e| EnvelopeError::Invalid {
                field: "ts",
                reason: format!("{:?} is not an RFC 3339 timestamp ({e})", shorten(ts)),
            })?;
            // `Z` says the time is UTC, not that the sender lives there; most
            // clients write it whatever their zone.
            let unknown = ts.ends_with(['Z', 'z']) || ts.ends_with("-00:00");
            // Past 18 hours no zone lies: such an offset is left unknown.
            let offset = (!unknown)
                .then(|| parsed.offset().local_minus_utc() / 60)
                .filter(|m| i64::from(*m).abs() <= MAX_UTC_OFFSET_MINUTES);
            (parsed.with_timezone(&Utc), offset)
        }
    };
    // Given apart (as the filter passes a turn on, with `ts` in UTC), it wins.
    let utc_offset_minutes = match obj.get("utc_offset_minutes") {
        None | Some(Value::Null) => utc_offset_minutes,
        Some(v) => Some(
            v.as_i64()
                .filter(|m| m.abs() <= MAX_UTC_OFFSET_MINUTES)
                .and_then(|m| i32::try_from(m).ok())
                .ok_or_else(|| EnvelopeError::Invalid {
                    field: "utc_offset_minutes",
                    reason: format!(
                        "expected whole minutes east of UTC, from -{MAX_UTC_OFFSET_MINUTES} to {MAX_UTC_OFFSET_MINUTES}; got {}",
                        shorten(&v.to_string())
                    ),
                })?,
        ),
    };

    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => {
            m.iter()
                .try_for_each(|(k, v)| {
                    if k.contains('\0') {
                        Err("a key contains a NUL character".to_string())
                    } else {
                        check_metadata(v, 2)
                    }
                })
                .map_err(|reason| EnvelopeError::Invalid {
                    field: "metadata",
                    reason,
                })?;
            m.clone()
        }
        Some(other) => {
            return Err(EnvelopeError::WrongType {
                field: "metadata",
                expected: "an object",
                got: kind(other),
            });
        }
    };

    // Without a turn id, the same words said in the same session at the same
    // (given) time are the same turn, so a client that retries a publish
    // cannot create two.
    let turn_id = turn_id.unwrap_or_else(|| {
        let ts_part = ts_given.unwrap_or("");
        format!(
            "h-{}",
            digest(
                &[
                    &tenant,
                    &session_id,
                    &user_id,
                    role.as_str(),
                    &speaker,
                    ts_part,
                    content
                ],
                24
            )
        )
    });

    Ok(Turn {
        tenant,
        turn_id,
        user_id,
        session_id,
        agent_id,
        speaker,
        role,
        source,
        content: content.to_string(),
        ts,
        utc_offset_minutes,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("valid")
    }

    fn parse(v: Value) -> Result<Turn, EnvelopeError> {
        parse_envelope(v.to_string().as_bytes(), "acme", now())
    }

    #[test]
    fn the_screen_score_is_the_recorded_one_even_below_0() {
        let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            screen_score(&flags(&["screen:-0.14", "poison:authority"])),
            -0.14
        );
        assert_eq!(screen_score(&flags(&["screen:0.40", "screen:1.20"])), 1.2);
        assert_eq!(screen_score(&flags(&["redacted:api_key"])), 0.0);
    }

    fn minimal() -> Value {
        json!({"tenant": "acme", "user_id": "u1", "session_id": "s1", "content": "I live in Beijing"})
    }

    #[test]
    fn defaults_are_applied() {
        let turn = parse(minimal()).expect("valid");
        assert_eq!(turn.role, Role::User);
        assert_eq!(turn.source, Source::User);
        assert_eq!(turn.speaker, "u1");
        assert_eq!(turn.ts, now());
        assert!(turn.turn_id.starts_with("h-"));
        assert_eq!(turn.source.trust(), Trust::High);
    }

    #[test]
    fn derived_turn_ids_are_stable_and_content_bound() {
        let a = parse(minimal()).expect("valid");
        let b = parse(minimal()).expect("valid");
        let mut other = minimal();
        other["content"] = json!("I live in Shanghai");
        let c = parse(other).expect("valid");
        assert_eq!(a.turn_id, b.turn_id);
        assert_ne!(a.turn_id, c.turn_id);
    }

    #[test]
    fn assistant_turns_are_attributed_to_the_agent() {
        let mut v = minimal();
        v["role"] = json!("assistant");
        v["agent_id"] = json!("helper");
        let turn = parse(v).expect("valid");
        assert_eq!(turn.speaker, "helper");
        assert_eq!(turn.source, Source::Agent);
        assert_eq!(turn.source.trust(), Trust::Medium);
    }

    #[test]
    fn timestamps_are_stored_as_utc() {
        let mut v = minimal();
        v["ts"] = json!("2026-01-02T11:04:05+08:00");
        let turn = parse(v.clone()).expect("valid");
        assert_eq!(turn.ts, now());
        assert_eq!(
            turn.utc_offset_minutes,
            Some(480),
            "the sender's offset is kept"
        );
        assert_eq!(turn.local_ts().to_rfc3339(), "2026-01-02T11:04:05+08:00");
        v["ts"] = json!("2026-01-02T03:04:05Z");
        assert_eq!(parse(v.clone()).expect("valid").utc_offset_minutes, None);
        v["ts"] = json!("2026-01-02T03:04:05+00:00");
        assert_eq!(parse(v.clone()).expect("valid").utc_offset_minutes, Some(0));
        // Given apart, as the filter passes a turn on.
        v["ts"] = json!("2026-01-02T03:04:05Z");
        v["utc_offset_minutes"] = json!(480);
        assert_eq!(
            parse(v.clone()).expect("valid").utc_offset_minutes,
            Some(480)
        );
        v["utc_offset_minutes"] = json!(100_000);
        assert!(parse(v.clone()).is_err());
        v["utc_offset_minutes"] = json!("+08:00");
        assert!(parse(v).is_err());
    }

    #[test]
    fn each_violation_names_its_field() {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"user_id": "u", "session_id": "s", "content": "x", "tenant": null}),
                "`tenant` is required",
            ),
            (
                json!({"tenant": "acme", "session_id": "s", "content": "x"}),
                "`user_id` is required",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "content": "x"}),
                "`session_id` is required",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s"}),
                "`content` is required",
            ),
            (
                json!({"tenant": "acme", "user_id": 5, "session_id": "s", "content": "x"}),
                "`user_id` must be a string, got a number",
            ),
            (
                json!({"tenant": "acme", "user_id": "u u", "session_id": "s", "content": "x"}),
                "`user_id` is invalid",
            ),
            (
                json!({"tenant": "acme", "user_id": "../etc", "session_id": "s';drop", "content": "x"}),
                "`session_id` is invalid",
            ),
            (
                json!({"tenant": "other", "user_id": "u", "session_id": "s", "content": "x"}),
                "does not match tenant",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "x", "role": "boss"}),
                "`role` is invalid",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "x", "source": "god"}),
                "`source` is invalid",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "x", "ts": "yesterday"}),
                "`ts` is invalid",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "x", "metadata": [1]}),
                "`metadata` must be an object",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "a\u{0007}b"}),
                "U+0007",
            ),
            (
                json!({"tenant": "acme", "user_id": "u", "session_id": "s", "content": "x".repeat(MAX_CONTENT_BYTES + 1)}),
                "`content` is invalid",
            ),
            (json!([1, 2]), "must be a JSON object, got an array"),
        ];
        for (value, expected) in cases {
            let err = parse(value.clone())
                .expect_err(&value.to_string())
                .to_string();
            assert!(err.contains(expected), "{value} → {err}");
        }
    }

    #[test]
    fn transport_level_violations() {
        let big = vec![b' '; MAX_ENVELOPE_BYTES + 1];
        assert!(matches!(
            parse_envelope(&big, "acme", now()),
            Err(EnvelopeError::TooLarge { .. })
        ));
        assert!(matches!(
            parse_envelope(b"{\"tenant\": \"\xff\"}", "acme", now()),
            Err(EnvelopeError::NotUtf8 { offset: 12 })
        ));
        assert!(matches!(
            parse_envelope(b"{not json", "acme", now()),
            Err(EnvelopeError::NotJson(_))
        ));
    }

    #[test]
    fn metadata_may_nest_sixteen_levels_not_seventeen() {
        let nested = |levels: usize| {
            let mut value = json!("leaf");
            for _ in 0..levels {
                value = json!({ "a": value });
            }
            let mut v = minimal();
            v["metadata"] = value;
            parse(v)
        };
        assert!(nested(16).is_ok(), "{:?}", nested(16));
        let err = nested(17).expect_err("17 levels").to_string();
        assert!(err.contains("nested deeper than 16 levels"), "{err}");
    }

    #[test]
    fn a_byte_order_mark_is_ignored() {
        let mut payload = "\u{feff}".as_bytes().to_vec();
        payload.extend_from_slice(minimal().to_string().as_bytes());
        let turn = parse_envelope(&payload, "acme", now()).expect("valid after the BOM");
        assert_eq!(turn.content, "I live in Beijing");
    }

    #[test]
    fn an_empty_envelope_says_so() {
        for payload in [&b""[..], b"  \n\t "] {
            assert_eq!(
                parse_envelope(payload, "acme", now()),
                Err(EnvelopeError::Empty)
            );
        }
    }

    #[test]
    fn a_field_named_twice_is_refused() {
        let text = r#"{"tenant":"acme","user_id":"u","session_id":"s","content":"I live in Oslo","content":"I live in Rome"}"#;
        let err = parse_envelope(text.as_bytes(), "acme", now())
            .expect_err("ambiguous")
            .to_string();
        assert!(
            err.contains("field `content` appears more than once"),
            "{err}"
        );
        // The same name at different levels is no duplicate.
        let text = r#"{"tenant":"acme","user_id":"u","session_id":"s","content":"I live in Oslo","metadata":{"content":1}}"#;
        assert!(parse_envelope(text.as_bytes(), "acme", now()).is_ok());
    }

    #[test]
    fn deep_metadata_is_refused() {
        let mut nested = json!("leaf");
        for _ in 0..20 {
            nested = json!({ "a": nested });
        }
        let mut v = minimal();
        v["metadata"] = nested;
        let err = parse(v).expect_err("too deep").to_string();
        assert!(err.contains("nested deeper"), "{err}");
    }
}
