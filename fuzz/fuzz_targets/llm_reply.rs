//! The LLM-output parser (`hindsight_extract::llm::parse::parse_reply`) on arbitrary text.
//!
//! Properties, beyond "never panics":
//! - at most `MAX_FACTS` facts, each with non-empty content that starts with no
//!   whitespace and holds at most `MAX_CONTENT_CHARS` characters and no control
//!   characters (tab, newline and carriage return aside: the turn contract's rule;
//!   a NUL cannot be stored in the `jsonb` archive of extractions);
//! - a valid type (its name reads back as the same type), importance and confidence
//!   finite within 0–1, at most 16 entities of 1 to 100 characters, free of control
//!   characters;
//! - the facts made of them survive the JSON round trip the extract stage's archive
//!   relies on (serialised when recorded, read back when emitted);
//! - deterministic.
#![no_main]

use chrono::{TimeZone, Utc};
use hindsight_core::{
    closed_set::VariantArray,
    fact::{ExtractedBy, Fact, FactType},
    turn::{KeptTurn, Role, Source, Trust, Turn},
};
use hindsight_extract::{
    draft::{Draft, finish},
    llm::parse::{MAX_CONTENT_CHARS, MAX_FACTS, parse_reply},
};
use libfuzzer_sys::fuzz_target;

fn control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

fn score(x: f32) -> bool {
    x.is_finite() && (0.0..=1.0).contains(&x)
}

fn check(d: &Draft) {
    let chars = d.content.chars().count();
    assert!(
        (1..=MAX_CONTENT_CHARS).contains(&chars),
        "{chars} characters"
    );
    assert!(
        !d.content.starts_with(char::is_whitespace),
        "{:?}",
        d.content
    );
    assert!(
        !d.content.chars().any(control),
        "control character in {:?}",
        d.content
    );
    assert!(FactType::VARIANTS.contains(&d.fact_type));
    assert_eq!(FactType::parse(d.fact_type.as_str()), Some(d.fact_type));
    assert!(score(d.importance), "importance {}", d.importance);
    if let Some(c) = d.confidence {
        assert!(score(c), "confidence {c}");
    }
    assert!(d.entities.len() <= 16, "{} entities", d.entities.len());
    for e in &d.entities {
        assert!((1..=100).contains(&e.chars().count()), "entity {e:?}");
        assert!(!e.chars().any(control), "control character in entity {e:?}");
    }
}

fn kept() -> KeptTurn {
    KeptTurn {
        turn: Turn {
            tenant: "acme".into(),
            turn_id: "t1".into(),
            user_id: "u1".into(),
            session_id: "s1".into(),
            agent_id: None,
            speaker: "Li".into(),
            role: Role::User,
            source: Source::User,
            content: "…".into(),
            ts: Utc
                .with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
                .single()
                .expect("valid"),
            utc_offset_minutes: None,
            metadata: Default::default(),
        },
        trust: Trust::High,
        quarantine: false,
        flags: vec![],
        context: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_reply(text);
    assert_eq!(parsed, parse_reply(text), "not deterministic");
    let Ok(drafts) = parsed else {
        return;
    };
    assert!(drafts.len() <= MAX_FACTS, "{} facts", drafts.len());
    drafts.iter().for_each(check);

    let extractor = ExtractedBy::Llm {
        model: "fuzz".into(),
    };
    let facts = finish(&kept(), drafts, &extractor);
    let archived = serde_json::to_string(&facts).expect("facts serialise");
    let read: Vec<Fact> = serde_json::from_str(&archived).expect("the archive reads back");
    assert_eq!(read, facts, "{archived}");
});
