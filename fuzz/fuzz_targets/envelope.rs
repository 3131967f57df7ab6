//! The envelope parser (`hindsight_core::turn::parse_envelope`) on arbitrary bytes.
//!
//! Properties, beyond "never panics":
//! - every rejection carries a non-empty reason (it lands in the DLQ, where a person reads it),
//!   and a tenant mismatch names a tenant other than the subject's, which, given as the
//!   subject, gets past the tenant check;
//! - every accepted turn satisfies the turn contract (valid ids, the subject's tenant,
//!   content and speaker within limits and free of control characters, metadata
//!   without NUL and not too deep);
//! - parsing is deterministic, derived turn ids included;
//! - an accepted turn, serialised as the filter publishes it and parsed again, is the same turn.
#![no_main]

use chrono::{DateTime, TimeZone, Utc};
use hindsight_core::{
    ids::{is_valid_id, is_valid_tenant},
    turn::{
        EnvelopeError, MAX_CONTENT_BYTES, MAX_ENVELOPE_BYTES, MAX_METADATA_DEPTH,
        MAX_SPEAKER_CHARS, Turn, parse_envelope,
    },
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const SUBJECT: &str = "acme";

fn received_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .single()
        .expect("valid")
}

fn control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// Levels of objects and arrays.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn no_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.contains('\0'),
        Value::Array(items) => items.iter().all(no_nul),
        Value::Object(map) => map.iter().all(|(k, v)| !k.contains('\0') && no_nul(v)),
        _ => true,
    }
}

fn check_rejection(e: &EnvelopeError, payload: &[u8]) {
    let message = e.to_string();
    assert!(!message.trim().is_empty(), "empty reason for {e:?}");
    match e {
        EnvelopeError::Invalid { field, reason } => {
            assert!(!field.is_empty() && !reason.trim().is_empty(), "{e:?}");
        }
        EnvelopeError::WrongType { field, .. } | EnvelopeError::Missing(field) => {
            assert!(!field.is_empty(), "{e:?}");
        }
        EnvelopeError::NotJson(reason) => assert!(!reason.trim().is_empty(), "{e:?}"),
        EnvelopeError::TooLarge { size, max } => assert!(size > max, "{e:?}"),
        EnvelopeError::NotUtf8 { offset } => {
            assert!(std::str::from_utf8(&payload[..*offset]).is_ok(), "{e:?}");
        }
        EnvelopeError::TenantMismatch { envelope, subject } => {
            assert_eq!(subject, SUBJECT);
            assert_ne!(envelope, SUBJECT, "{e:?}");
            // On its own tenant's subject the same envelope passes the tenant check.
            if let Err(again) = parse_envelope(payload, envelope, received_at()) {
                assert!(
                    !matches!(again, EnvelopeError::TenantMismatch { .. }),
                    "{e:?} then {again:?}"
                );
            }
        }
        // The rest carry no free text beyond the message checked above.
        _ => {}
    }
}

fn check_turn(turn: &Turn, subject: &str) {
    assert_eq!(turn.tenant, subject);
    assert!(is_valid_tenant(&turn.tenant), "{turn:?}");
    for id in [&turn.turn_id, &turn.user_id, &turn.session_id] {
        assert!(is_valid_id(id), "{id:?}");
    }
    if let Some(agent) = &turn.agent_id {
        assert!(is_valid_id(agent), "{agent:?}");
    }
    assert!(turn.content.len() <= MAX_CONTENT_BYTES);
    assert!(!turn.content.chars().any(control), "{:?}", turn.content);
    let speaker_chars = turn.speaker.chars().count();
    assert!(
        (1..=MAX_SPEAKER_CHARS).contains(&speaker_chars),
        "{:?}",
        turn.speaker
    );
    assert_eq!(turn.speaker.trim(), turn.speaker);
    assert!(!turn.speaker.chars().any(control), "{:?}", turn.speaker);
    let metadata = Value::Object(turn.metadata.clone());
    assert!(no_nul(&metadata), "{metadata}");
    // The metadata object is level 1.
    assert!(depth(&metadata) <= MAX_METADATA_DEPTH, "{metadata}");
}

fuzz_target!(|payload: &[u8]| {
    let parsed = parse_envelope(payload, SUBJECT, received_at());
    assert_eq!(
        parsed,
        parse_envelope(payload, SUBJECT, received_at()),
        "not deterministic"
    );
    let turn = match parsed {
        Ok(turn) => turn,
        Err(e) => return check_rejection(&e, payload),
    };
    assert!(payload.len() <= MAX_ENVELOPE_BYTES);
    check_turn(&turn, SUBJECT);

    // The turn as the filter publishes it reads back as the same turn, whatever
    // the receive time (ts, turn id and speaker are explicit now).
    let again = serde_json::to_vec(&turn).expect("a turn serialises");
    if again.len() <= MAX_ENVELOPE_BYTES {
        let later = received_at() + chrono::Duration::days(1);
        match parse_envelope(&again, SUBJECT, later) {
            Ok(reparsed) => assert_eq!(reparsed, turn, "{}", String::from_utf8_lossy(&again)),
            Err(e) => panic!(
                "{e} for the re-serialised {}",
                String::from_utf8_lossy(&again)
            ),
        }
    }
    // And serde (how later stages decode it) agrees.
    let decoded: Turn = serde_json::from_slice(&again).expect("serde reads the turn back");
    assert_eq!(decoded, turn);
});
