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
