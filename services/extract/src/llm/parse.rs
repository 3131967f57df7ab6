//! Reading what an LLM returned: strict JSON when the server honoured the
//! schema, else the first JSON array (or object) found in free text. Every
//! field is validated and clamped; an item without usable content is skipped.

use chrono::{DateTime, NaiveDate, Utc};
use hindsight_core::fact::FactType;
use hindsight_llm::clean;
use serde_json::Value;

use crate::draft::Draft;

/// Most facts taken from one turn.
pub const MAX_FACTS: usize = 32;
/// Longest fact content kept, in characters.
pub const MAX_CONTENT_CHARS: usize = 1000;

/// Why a reply held no usable facts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the reply holds no JSON array or object")]
    NoJson,
    #[error("the reply's JSON has no list of facts")]
    NoFactList,
}

/// Finds the first balanced JSON value starting with `open` in free text.
fn first_balanced(text: &str, open: char, close: char) -> Option<&str> {
    let mut start = None;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if start.is_none() {
            if c == open {
                start = Some(i);
                depth = 1;
            }
            continue;
        }
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return start.map(|s| &text[s..i + c.len_utf8()]);
                }
            }
            _ => {}
        }
    }
    None
}

fn json_in(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return Some(v);
    }
    // Try each candidate array or object in order of appearance.
    let mut rest = text;
    while !rest.is_empty() {
        let array = first_balanced(rest, '[', ']');
        let object = first_balanced(rest, '{', '}');
        let candidate = match (array, object) {
            (Some(a), Some(o)) => {
                if a.as_ptr() < o.as_ptr() {
                    a
                } else {
                    o
                }
            }
            (Some(a), None) => a,
            (None, Some(o)) => o,
            (None, None) => return None,
        };
        if let Ok(v) = serde_json::from_str::<Value>(candidate) {
            return Some(v);
        }
        let offset = candidate.as_ptr() as usize - rest.as_ptr() as usize + 1;
        rest = rest.get(offset..).unwrap_or("");
    }
    None
}

/// The reply's `orders_assistant`, when it gave one.
pub fn orders_assistant(text: &str) -> Option<bool> {
    json_in(text)?.get("orders_assistant")?.as_bool()
}

/// The facts in an LLM reply.
pub fn parse_reply(text: &str) -> Result<Vec<Draft>, ParseError> {
    let value = json_in(text).ok_or(ParseError::NoJson)?;
    let items = match &value {
        Value::Array(items) => items.clone(),
        Value::Object(obj) => match obj.get("facts").or_else(|| obj.get("memories")) {
            Some(Value::Array(items)) => items.clone(),
            _ if obj.contains_key("content") => vec![value.clone()],
            _ => return Err(ParseError::NoFactList),
        },
        _ => return Err(ParseError::NoFactList),
    };
    Ok(items.iter().filter_map(draft).take(MAX_FACTS).collect())
}

fn draft(item: &Value) -> Option<Draft> {
    let obj = match item {
        Value::Object(o) => o,
        Value::String(s) => return plain(s),
        _ => return None,
    };
    let content = obj
        .get("content")
        .or_else(|| obj.get("fact"))
        .and_then(Value::as_str)?;
    let content = clean(content, MAX_CONTENT_CHARS);
    if content.is_empty() {
        return None;
    }
    let fact_type = obj
        .get("fact_type")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .and_then(FactType::parse)
        .unwrap_or(FactType::Fact);
    let entities = match obj.get("entities") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| clean(s, 100))
            .filter(|s| !s.is_empty())
            .take(16)
            .collect(),
        _ => Vec::new(),
    };
    let occurred_at = obj.get("occurred_at").and_then(time);
    Some(Draft {
        content,
        fact_type,
        entities,
        importance: obj
            .get("importance")
            .and_then(score)
            .unwrap_or_else(|| default_importance(fact_type)),
        confidence: obj.get("confidence").and_then(score),
        occurred_at,
        valid_until: crate::draft::validity(occurred_at, obj.get("valid_until").and_then(time)),
    })
}

fn plain(s: &str) -> Option<Draft> {
    let content = clean(s, MAX_CONTENT_CHARS);
    (!content.is_empty()).then(|| Draft {
        content,
        fact_type: FactType::Fact,
        entities: Vec::new(),
        importance: default_importance(FactType::Fact),
        confidence: None,
        occurred_at: None,
        valid_until: None,
    })
}

/// A 0–1 score. Models sometimes answer on a 0–10 (or 0–100) scale: such
/// values are rescaled, then everything is clamped to 0–1.
fn score(v: &Value) -> Option<f32> {
    let x = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().trim_end_matches('%').parse::<f64>().ok()?,
        _ => return None,
    };
    if !x.is_finite() {
        return None;
    }
    let scaled = if x > 10.0 {
        x / 100.0
    } else if x > 1.0 {
        x / 10.0
    } else {
        x
    };
    Some(scaled.clamp(0.0, 1.0) as f32)
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    let s = v.as_str()?.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

fn default_importance(t: FactType) -> f32 {
    match t {
        FactType::Constraint => 0.8,
        FactType::Preference | FactType::Plan => 0.6,
        FactType::Event | FactType::Relation => 0.5,
        FactType::Entity => 0.4,
        FactType::Fact => 0.3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_json() {
        let facts = parse_reply(
            r#"{"facts":[{"content":"Li is allergic to peanuts","fact_type":"constraint","entities":["Li"],"importance":0.9,"confidence":0.95,"occurred_at":null,"valid_until":null}]}"#,
        )
        .expect("parsed");
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].fact_type, FactType::Constraint);
        assert_eq!(facts[0].importance, 0.9);
    }

    #[test]
    fn an_end_before_the_occurrence_is_no_end() {
        let facts = parse_reply(
            r#"[{"content":"Li moved to Berlin","occurred_at":"2023-05-08","valid_until":"2023-01-01"},
                {"content":"Li is in Tokyo","occurred_at":"2023-05-08","valid_until":"2023-05-12"}]"#,
        )
        .expect("parsed");
        assert!(facts[0].occurred_at.is_some());
        assert_eq!(facts[0].valid_until, None);
        assert!(facts[1].valid_until > facts[1].occurred_at);
    }

    #[test]
    fn json_inside_prose() {
        let text = "Sure! Here are the facts:\n```json\n[{\"content\": \"Li lives in Beijing\", \"type\": \"fact\"}]\n```\nHope this helps [1].";
        let facts = parse_reply(text).expect("parsed");
        assert_eq!(facts[0].content, "Li lives in Beijing");
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        assert_eq!(
            parse_reply("{\"facts\": [{\"content\": \"Li"),
            Err(ParseError::NoJson)
        );
        assert_eq!(parse_reply("no json here"), Err(ParseError::NoJson));
        assert_eq!(parse_reply("{\"answer\": 42}"), Err(ParseError::NoFactList));
    }

    #[test]
    fn control_characters_become_spaces() {
        // Found by fuzz/fuzz_targets/llm_reply.rs: a NUL reached the jsonb archive.
        let facts = parse_reply(
            r#"[{"content":"\u0000Li is allergic to p\u0000nuts\u001b","entities":["\u0000","L\u0007i"]}, "\u0000"]"#,
        )
        .expect("parsed");
        assert_eq!(facts.len(), 1, "{facts:?}");
        assert_eq!(facts[0].content, "Li is allergic to p nuts");
        assert_eq!(facts[0].entities, ["L i"]);
    }

    #[test]
    fn fields_are_validated_and_clamped() {
        let facts = parse_reply(
            r#"[{"content":"A","importance":7,"confidence":"85%"},{"content":"  "},{"fact_type":"event"},{"content":"B","importance":-3,"fact_type":"nonsense","occurred_at":"2023-05-07"}]"#,
        )
        .expect("parsed");
        assert_eq!(facts.len(), 2, "items without content are skipped");
        assert!((facts[0].importance - 0.7).abs() < 1e-6, "7 of 10 is 0.7");
        assert!((facts[0].confidence.unwrap_or_default() - 0.85).abs() < 1e-6);
        assert_eq!(facts[1].importance, 0.0);
        assert_eq!(facts[1].fact_type, FactType::Fact);
        assert!(facts[1].occurred_at.is_some());
    }
}
