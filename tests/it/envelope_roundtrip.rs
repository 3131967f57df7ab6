//! An accepted turn, serialised as the filter publishes it, parses back as the
//! very same turn (a property of fuzz/fuzz_targets/envelope.rs; these inputs
//! once broke it).

use chrono::{TimeZone, Utc};
use hindsight_core::turn::{Turn, parse_envelope};

#[test]
fn metadata_numbers_read_back_unchanged() {
    let payload = br#"{"tenant":"acme","user_id":"u1","session_id":"s1","content":"x",
        "metadata":{"n":[299999999999999999999999,3e23,2.9999999999999997e23,0.1,5e-324,
        1.7976931348623157e308,-0.0,18446744073709551615,-9223372036854775808]}}"#;
    let at = Utc
        .with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .single()
        .expect("valid");
    let turn = parse_envelope(payload, "acme", at).expect("valid");
    let again = serde_json::to_vec(&turn).expect("serialises");
    assert_eq!(parse_envelope(&again, "acme", at), Ok(turn.clone()));
    let decoded: Turn = serde_json::from_slice(&again).expect("decodes");
    assert_eq!(decoded, turn);
}
