//! Reading a raw envelope into a [`Turn`]: each refusal names the field and
//! what was wrong with it.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::*;
use crate::ids::{is_valid_id, is_valid_tenant};

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
