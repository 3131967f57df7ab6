//! The rules extractor (`hindsight_extract::rules::extract`) on every valid turn.
//!
//! The input is `speaker\nts\ncontent`; it becomes an envelope that the envelope
//! parser must accept (so the rules see only what the filter can pass on: content
//! without control characters, a speaker of at most 128 characters, an RFC 3339
//! time; an empty ts line means "now"). Inputs that are not such a turn are skipped.
//!
//! Properties, beyond "never panics":
//! - deterministic: the same turn twice gives the same facts;
//! - every fact has non-empty content (not just whitespace), bounded in length: a
//!   clause is cut at `MAX_FACT_CHARS` characters, and only date phrases and the
//!   speaker's name (replacing a pronoun, or in "<speaker> asked: ") lengthen it;
//! - no control characters (tab, newline, carriage return aside) in content or
//!   entities; the speaker, as a fact writes the name (`written_name`), is the
//!   first entity; no entity is empty;
//! - importance finite within 0–1; a fact's validity ends after it occurred;
//! - the facts survive the JSON round trip of the extract stage's archive.
#![no_main]

use chrono::{DateTime, TimeZone, Utc};
use hindsight_core::{
    fact::{ExtractedBy, Fact},
    turn::{KeptTurn, parse_envelope},
};
use hindsight_extract::{
    draft::finish,
    rules::{MAX_FACT_CHARS, extract, written_name},
};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0)
        .single()
        .expect("valid")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let (Some(speaker), Some(ts), Some(content)) = (lines.next(), lines.next(), lines.next())
    else {
        return;
    };
    let mut envelope = json!({
        "tenant": "acme", "user_id": "u1", "session_id": "s1",
        "speaker": speaker, "content": content,
    });
    if !ts.is_empty() {
        envelope["ts"] = json!(ts);
    }
    let Ok(turn) = parse_envelope(envelope.to_string().as_bytes(), "acme", now()) else {
        return;
    };
    let kept = KeptTurn {
        trust: turn.source.trust(),
        turn,
        quarantine: false,
        flags: vec![],
        context: None,
    };

    let drafts = extract(&kept);
    assert_eq!(drafts, extract(&kept.clone()), "not deterministic");

    let speaker = &kept.turn.speaker;
    let speaker_chars = speaker.chars().count();
    // Per character of a clause, a pronoun becomes at most the speaker's name (+ "'s",
    // a verb's ending) and a date phrase at most 7 characters ("今晚" → "2023年5月8日晚上").
    let bound = MAX_FACT_CHARS * (speaker_chars + 8) + speaker_chars + 8;
    for d in &drafts {
        assert!(!d.content.trim().is_empty(), "empty fact in {drafts:?}");
        let chars = d.content.chars().count();
        assert!(chars <= bound, "{chars} characters, more than {bound}");
        assert!(
            !d.content.chars().any(control),
            "control character in {:?}",
            d.content
        );
        assert_eq!(
            d.entities.first(),
            Some(&written_name(speaker)),
            "{:?}",
            d.entities
        );
        for e in &d.entities {
            assert!(!e.trim().is_empty(), "empty entity in {:?}", d.entities);
            assert!(!e.chars().any(control), "control character in entity {e:?}");
        }
        assert!(
            d.importance.is_finite() && (0.0..=1.0).contains(&d.importance),
            "importance {}",
            d.importance
        );
        assert_eq!(d.confidence, None);
        if let (Some(from), Some(until)) = (d.occurred_at, d.valid_until) {
            assert!(
                from < until,
                "valid until {until}, before it occurred on {from}"
            );
        }
    }

    let facts = finish(&kept, drafts, &ExtractedBy::Rules);
    let archived = serde_json::to_string(&facts).expect("facts serialise");
    let read: Vec<Fact> = serde_json::from_str(&archived).expect("the archive reads back");
    assert_eq!(read, facts, "{archived}");
});
