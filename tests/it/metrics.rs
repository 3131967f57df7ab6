//! `/metrics` counts what the pipeline did, exactly: a known mix of turns —
//! kept, dropped by the filter for each of its reasons, refused to the DLQ —
//! then turns that merge, supersede and repeat what is remembered, each
//! reflected in the stage counters (received, emitted, dropped and rejected by
//! reason), the facts extracted and the dedupe outcomes.
//!
//! The recorder is process-wide: every count is a difference between two
//! scrapes, on a tenant no other test uses.

use std::time::Duration;

use hindsight_core::Topic;
use hindsight_tests::{
    Deployment, eventually,
    prometheus::{Scrape, scrape},
    stack::{Stack, drained},
};
use serde_json::json;
use uuid::Uuid;

const RECEIVED: &str = "hindsight_stage_received_total";
const EMITTED: &str = "hindsight_stage_emitted_total";
const DROPPED: &str = "hindsight_stage_dropped_total";
const REJECTED: &str = "hindsight_stage_rejected_total";
const RETRIED: &str = "hindsight_stage_retried_total";
const FACTS: &str = "hindsight_facts_extracted_total";
const WITHOUT_FACTS: &str = "hindsight_turns_without_facts_total";
const DEDUPE: &str = "hindsight_dedupe_total";
const STAGES: [&str; 4] = ["filter", "extract", "embed", "persist"];

/// A turn of user `li` (speaker Li) in `session`.
fn turn(tenant: &str, session: &str, turn_id: &str, content: &str) -> Vec<u8> {
    json!({
        "tenant": tenant, "user_id": "li", "session_id": session, "turn_id": turn_id,
        "speaker": "Li", "ts": "2024-03-01T10:00:00Z", "content": content,
    })
    .to_string()
    .into_bytes()
}

/// The change of every counter between two scrapes, on one tenant.
struct Delta<'a> {
    before: &'a Scrape,
    after: &'a Scrape,
    tenant: &'a str,
}

impl Delta<'_> {
    fn of(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut labels = labels.to_vec();
        labels.push(("tenant", self.tenant));
        self.after.sum(name, &labels) - self.before.sum(name, &labels)
    }

    /// Asserts the change of `name` for each value of `label` (stage, reason,
    /// outcome…), and that no other value of it changed.
    fn assert_by(&self, name: &str, fixed: &[(&str, &str)], label: &str, expected: &[(&str, f64)]) {
        let mut tenant = fixed.to_vec();
        tenant.push(("tenant", self.tenant));
        let mut seen = self.after.values(name, &tenant, label);
        seen.extend(self.before.values(name, &tenant, label));
        seen.extend(expected.iter().map(|(v, _)| v.to_string()));
        seen.sort();
        seen.dedup();
        let actual: Vec<(String, f64)> = seen
            .iter()
            .map(|v| {
                let mut labels = fixed.to_vec();
                labels.push((label, v));
                (v.clone(), self.of(name, &labels))
            })
            .filter(|(_, n)| *n != 0.0)
            .collect();
        let mut wanted: Vec<(String, f64)> = expected
            .iter()
            .filter(|(_, n)| *n != 0.0)
            .map(|(v, n)| (v.to_string(), *n))
            .collect();
        wanted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(actual, wanted, "{name} {fixed:?} by {label}");
    }
}

/// Dead letters of `tenant`, as (stage, reason code).
async fn dead_letters(d: &Deployment, tenant: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = d
        .dead_letters()
        .await
        .into_iter()
        .filter(|e| e.tenant == tenant)
        .map(|e| {
            let code = e.reason.split(':').next().unwrap_or("").to_string();
            (e.stage, code)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_every_turn_by_stage_reason_and_outcome() {
    let d = Deployment::new("metrics", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let tenant = format!("metrics-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let t = tenant.as_str();

    // Phase 1: five turns kept (one fact each), six dropped by the filter,
    // three refused by it, one message the extract stage cannot decode.
    let before = scrape(&stack.base_url).await;
    let peanuts = turn(t, "s1", "k-peanuts", "I am allergic to peanuts");
    let phase1: Vec<Vec<u8>> = vec![
        turn(t, "s1", "k-beijing", "I live in Beijing"),
        turn(t, "s1", "k-red", "My favourite colour is red"),
        peanuts.clone(),
        turn(t, "s1", "k-cats", "I like cats"),
        turn(t, "s1", "d-thanks", "Thank you so much!!"), // pleasantry
        turn(t, "s1", "d-zh", "好的好的，没问题"),        // pleasantry
        turn(t, "s1", "d-ok", "ok"),                      // too_short
        turn(t, "s1", "d-hi", "hi there"),                // too_short
        turn(t, "s2", "k-cello", "I play the cello every Sunday"),
        turn(t, "s2", "d-repeat", "I play the cello every Sunday"), // repeat
        peanuts,                                                    // duplicate: published again
        b"this is not JSON".to_vec(),                               // invalid turn
        json!({"tenant": t, "session_id": "s1", "content": "I have no user id at all"})
            .to_string()
            .into_bytes(), // invalid turn: user_id missing
        turn(
            "someone-else",
            "s1",
            "r-tenant",
            "I belong to another tenant",
        ), // invalid turn: tenant mismatch
    ];
    for payload in phase1 {
        d.publish_raw(t, payload).await;
    }
    // A kept turn that is not one, straight onto `kept`.
    d.ctx
        .bus
        .client
        .publish(
            d.config().namespace.subject(Topic::Kept, t),
            b"{\"not\": \"a kept turn\"}".to_vec().into(),
        )
        .await
        .expect("publish");
    d.flush().await;

    // 10 turns archived (5 kept, 5 dropped as noise or repeat); the duplicate
    // is recorded on its first publish's row.
    drained(&d, 10).await;
    eventually(
        "the refused messages are in the DLQ",
        Duration::from_secs(30),
        || async { dead_letters(&d, t).await.len() == 4 },
    )
    .await;
    d.settled(Duration::from_secs(60)).await;
    let duplicates: Vec<i64> = sqlx::query_scalar(
        "SELECT duplicate_seqs FROM turns WHERE tenant = $1 AND turn_id = 'k-peanuts'",
    )
    .bind(t)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("the archived turn");
    assert_eq!(duplicates.len(), 1, "the second publish is recorded once");
    assert_eq!(
        dead_letters(&d, t).await,
        [
            ("extract".to_string(), "undecodable".to_string()),
            ("filter".to_string(), "invalid turn".to_string()),
            ("filter".to_string(), "invalid turn".to_string()),
            ("filter".to_string(), "invalid turn".to_string()),
        ]
    );

    let after = scrape(&stack.base_url).await;
    let delta = Delta {
        before: &before,
        after: &after,
        tenant: t,
    };
    delta.assert_by(
        RECEIVED,
        &[],
        "stage",
        &[
            ("filter", 14.0),
            ("extract", 6.0),
            ("embed", 5.0),
            ("persist", 5.0),
        ],
    );
    // Persist publishes nothing: its counter moves by 0.
    delta.assert_by(
        EMITTED,
        &[],
        "stage",
        &[("filter", 5.0), ("extract", 5.0), ("embed", 5.0)],
    );
    delta.assert_by(
        DROPPED,
        &[("stage", "filter")],
        "reason",
        &[
            ("pleasantry", 2.0),
            ("too_short", 2.0),
            ("repeat", 1.0),
            ("duplicate", 1.0),
        ],
    );
    for stage in ["extract", "embed", "persist"] {
        delta.assert_by(DROPPED, &[("stage", stage)], "reason", &[]);
    }
    delta.assert_by(
        REJECTED,
        &[("stage", "filter")],
        "reason",
        &[("invalid turn", 3.0)],
    );
    delta.assert_by(
        REJECTED,
        &[("stage", "extract")],
        "reason",
        &[("undecodable", 1.0)],
    );
    for stage in ["embed", "persist"] {
        delta.assert_by(REJECTED, &[("stage", stage)], "reason", &[]);
    }
    for stage in STAGES {
        assert_eq!(
            delta.of(RETRIED, &[("stage", stage)]),
            0.0,
            "{stage} retried nothing"
        );
    }
    delta.assert_by(FACTS, &[], "extractor", &[("rules", 5.0)]);
    assert_eq!(delta.of(WITHOUT_FACTS, &[]), 0.0);
    delta.assert_by(DEDUPE, &[], "outcome", &[("created", 5.0)]);

    // What the counters say is what the store holds.
    let (facts, memories): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT coalesce(sum(jsonb_array_length(facts)), 0) FROM turns WHERE tenant = $1)::bigint,
                (SELECT count(*) FROM memories WHERE tenant = $1)",
    )
    .bind(t)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("counts");
    assert_eq!((facts, memories), (5, 5));

    // Phase 2, once phase 1 is remembered: a paraphrase (merged), a changed
    // value (superseded), the same words in another session (exact), and
    // another value of a frame that holds several (created).
    let before = after;
    for payload in [
        turn(t, "s3", "p-based", "I'm based in Beijing"),
        turn(t, "s3", "p-blue", "My favourite colour is blue now"),
        turn(t, "s4", "p-peanuts", "I am allergic to peanuts"),
        turn(t, "s3", "p-dogs", "I like dogs"),
    ] {
        d.publish_raw(t, payload).await;
    }
    d.flush().await;
    drained(&d, 14).await;
    d.settled(Duration::from_secs(60)).await;
    let after = scrape(&stack.base_url).await;
    let delta = Delta {
        before: &before,
        after: &after,
        tenant: t,
    };
    delta.assert_by(
        RECEIVED,
        &[],
        "stage",
        &[
            ("filter", 4.0),
            ("extract", 4.0),
            ("embed", 4.0),
            ("persist", 4.0),
        ],
    );
    delta.assert_by(
        EMITTED,
        &[],
        "stage",
        &[("filter", 4.0), ("extract", 4.0), ("embed", 4.0)],
    );
    for stage in STAGES {
        delta.assert_by(DROPPED, &[("stage", stage)], "reason", &[]);
        delta.assert_by(REJECTED, &[("stage", stage)], "reason", &[]);
        assert_eq!(
            delta.of(RETRIED, &[("stage", stage)]),
            0.0,
            "{stage} retried nothing"
        );
    }
    delta.assert_by(FACTS, &[], "extractor", &[("rules", 4.0)]);
    delta.assert_by(
        DEDUPE,
        &[],
        "outcome",
        &[
            ("merged", 1.0),
            ("superseded", 1.0),
            ("exact", 1.0),
            ("created", 1.0),
        ],
    );
    let statuses: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, count(*) FROM memories WHERE tenant = $1 GROUP BY status ORDER BY status",
    )
    .bind(t)
    .fetch_all(&d.ctx.store.pool)
    .await
    .expect("statuses");
    assert_eq!(
        statuses,
        [("active".to_string(), 6), ("superseded".to_string(), 1)],
        "5 + 2 new memories (blue, dogs), red superseded"
    );
    assert_eq!(dead_letters(&d, t).await.len(), 4, "nothing new in the DLQ");

    stack.stop().await;
    d.remove().await;
}

/// The test helper that reads a scrape: samples summed over a subset of their labels.
#[test]
fn a_scrape_sums_samples_over_a_subset_of_their_labels() {
    let scrape = hindsight_tests::prometheus::Scrape::parse(
        "# HELP x_total Things.\n# TYPE x_total counter\n\
         x_total{stage=\"filter\",tenant=\"a\",reason=\"invalid turn\"} 3\n\
         x_total{stage=\"filter\",tenant=\"a\",reason=\"say \\\"hi\\\", \\\\ ok\"} 2\n\
         x_total{stage=\"extract\",tenant=\"a\",reason=\"undecodable\"} 1 1700000000000\n\
         x_total{stage=\"filter\",tenant=\"b\",reason=\"invalid turn\"} 7\n\
         y 4.5\n\
         h_bucket{le=\"+Inf\"} 9\n",
    );
    assert_eq!(scrape.sum("x_total", &[("tenant", "a")]), 6.0);
    assert_eq!(
        scrape.sum("x_total", &[("stage", "filter"), ("tenant", "a")]),
        5.0
    );
    assert_eq!(
        scrape.sum("x_total", &[("reason", "say \"hi\", \\ ok")]),
        2.0
    );
    assert_eq!(scrape.sum("x_total", &[("tenant", "c")]), 0.0);
    assert_eq!(scrape.sum("y", &[]), 4.5);
    assert_eq!(scrape.sum("h_bucket", &[("le", "+Inf")]), 9.0);
    assert_eq!(
        scrape.values("x_total", &[("tenant", "a")], "stage"),
        ["extract", "filter"]
    );
}
