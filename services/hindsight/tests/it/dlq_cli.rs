//! `hindsight dlq` as an operator uses it. The pipeline runs in this process
//! with an LLM extractor whose endpoint is down, and a deployment that never
//! falls back to the rules before the DLQ (`HINDSIGHT_LLM_FALLBACK_AFTER`
//! above `HINDSIGHT_MAX_DELIVER`): a turn's extraction exhausts its retries and
//! is dead-lettered. The CLI lists it (filtered by stage and tenant) with its
//! reason, shows its payload, purges another stage's letters, and — once the
//! endpoint is back — replays it: the turn is processed exactly once, and
//! replaying again doubles nothing.

use std::{
    process::Output,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use async_nats::{HeaderMap, jetstream};
use hindsight_shared::dlq::HEADER_REPLAY;
use hindsight_tests::{
    Deployment, eventually,
    fake_llm::{FakeLlm, Reply},
    prometheus::scrape,
    stack::{Stack, drained},
    succeeded,
};
use serde_json::{Value, json};
use uuid::Uuid;

const CONTENT: &str =
    "I live in Chaoyang, Beijing, have a cat called Mimi and I'm allergic to peanuts";

fn good_facts() -> String {
    json!({"facts": [
        {"content": "Li lives in Chaoyang, Beijing", "fact_type": "fact", "entities": ["Li", "Chaoyang", "Beijing"], "importance": 0.5, "confidence": 0.9, "occurred_at": null, "valid_until": null},
        {"content": "Li has a cat called Mimi", "fact_type": "entity", "entities": ["Li", "Mimi"], "importance": 0.4, "confidence": 0.9, "occurred_at": null, "valid_until": null},
        {"content": "Li is allergic to peanuts", "fact_type": "constraint", "entities": ["Li"], "importance": 0.9, "confidence": 0.95, "occurred_at": null, "valid_until": null}
    ]})
    .to_string()
}

async fn hindsight(d: &Deployment, args: &[&str]) -> Output {
    d.cli(env!("CARGO_BIN_EXE_hindsight"))
        .args(args)
        .output()
        .await
        .expect("hindsight runs")
}

/// `dlq list --json` with these filters: one JSON object per line.
async fn list(d: &Deployment, filters: &[&str]) -> Vec<Value> {
    let mut args = vec!["dlq", "list", "--json"];
    args.extend_from_slice(filters);
    succeeded(&hindsight(d, &args).await)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a JSON line ({e}): {l}")))
        .collect()
}

/// (memories, provenance rows, facts recorded) of one tenant.
async fn remembered(d: &Deployment, tenant: &str) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM memories WHERE tenant = $1),
                (SELECT count(*) FROM memory_sources WHERE tenant = $1),
                (SELECT coalesce(sum(jsonb_array_length(facts)), 0) FROM turns WHERE tenant = $1)::bigint",
    )
    .bind(tenant)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("counts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_is_listed_shown_and_replayed_once_its_cause_is_fixed() {
    let llm_up = Arc::new(AtomicBool::new(false));
    let llm = FakeLlm::start({
        let up = llm_up.clone();
        move |_, _| {
            if up.load(Ordering::SeqCst) {
                Reply::Content(good_facts())
            } else {
                Reply::Status(503, None)
            }
        }
    })
    .await;
    let base_url = llm.base_url();
    let d = Deployment::new("dlq-cli", |c| {
        c.llm.base_url = Some(base_url);
        c.llm.model = "fake-model".into();
        c.llm.timeout = Duration::from_millis(500);
        c.llm.retry_budget = Duration::from_millis(300);
        // Never the rules: an outage that outlasts the deliveries dead-letters the turn.
        c.llm.fallback_after = 10;
        c.max_deliver = Some(2);
    })
    .await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let short = &Uuid::new_v4().simple().to_string()[..8];
    let (tenant, other) = (format!("dlq-{short}"), format!("other-{short}"));
    let (t, o) = (tenant.as_str(), other.as_str());

    // A good turn while the LLM is down, and another tenant's broken one.
    let good = json!({
        "tenant": t, "user_id": "li", "session_id": "s-1", "turn_id": "t-1",
        "speaker": "Li", "ts": "2023-05-08T13:56:00Z", "content": CONTENT,
    });
    d.publish_raw(t, good.to_string().into_bytes()).await;
    let broken = json!({"tenant": o, "session_id": "s-1", "content": "no user id in this turn"});
    d.publish_raw(o, broken.to_string().into_bytes()).await;
    d.flush().await;
    eventually("both reach the DLQ", Duration::from_secs(30), || async {
        d.dead_letters().await.len() == 2
    })
    .await;
    d.settled(Duration::from_secs(30)).await;

    // list: every letter, then filtered by stage and tenant.
    assert_eq!(list(&d, &[]).await.len(), 2);
    let letters = list(&d, &["--stage", "extract", "--tenant", t]).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    let reason = letter["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("retries exhausted: after 2 deliveries: LLM unavailable"),
        "{reason}"
    );
    assert_eq!(
        (&letter["stage"], &letter["tenant"], &letter["deliveries"]),
        (&json!("extract"), &json!(t), &json!(2))
    );
    assert_eq!(
        letter["original_subject"],
        json!(d.config().namespace.subject(hindsight_core::Topic::Kept, t))
    );
    let seq = letter["seq"].as_u64().expect("seq");
    for filters in [
        ["--stage", "extract", "--tenant", o],
        ["--stage", "filter", "--tenant", t],
        ["--stage", "persist", "--tenant", t],
    ] {
        assert!(
            list(&d, &filters).await.is_empty(),
            "{filters:?} selects nothing"
        );
    }
    let theirs = list(&d, &["--stage", "filter"]).await;
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["tenant"], json!(o));
    assert!(
        theirs[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("invalid turn: ") && r.contains("user_id")),
        "{}",
        theirs[0]["reason"]
    );
    // The table, for people.
    let table = hindsight(&d, &["dlq", "list", "--tenant", t]).await;
    let text = succeeded(&table);
    assert!(text.starts_with("   SEQ  STAGE"), "{text}");
    assert!(
        text.lines().any(
            |l| l.trim_start().starts_with(&seq.to_string()) && l.contains("retries exhausted")
        ),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&table.stderr).contains("1 dead letter(s)"));

    // show: the whole payload, the kept turn as the filter passed it on.
    let shown: Value = serde_json::from_str(&succeeded(
        &hindsight(&d, &["dlq", "show", &seq.to_string()]).await,
    ))
    .expect("show prints JSON");
    assert_eq!(shown["seq"], json!(seq));
    assert_eq!(shown["reason"], json!(reason));
    let payload: Value =
        serde_json::from_str(shown["payload"].as_str().expect("payload")).expect("a kept turn");
    assert_eq!(
        (&payload["turn_id"], &payload["tenant"], &payload["content"]),
        (&json!("t-1"), &json!(t), &json!(CONTENT))
    );

    // Nothing of the turn is remembered yet; it is archived as kept, unextracted.
    assert_eq!(remembered(&d, t).await, (0, 0, 0));
    let outcome: Option<String> = sqlx::query_scalar(
        "SELECT extract_outcome FROM turns WHERE tenant = $1 AND turn_id = 't-1' AND fate = 'kept'",
    )
    .bind(t)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("the turn is archived as kept");
    assert_eq!(outcome, None);

    // purge: refused without --yes; with it, only the selected stage's letters go.
    let refused = hindsight(&d, &["dlq", "purge", "--stage", "filter"]).await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    assert_eq!(
        list(&d, &[]).await.len(),
        2,
        "a refused purge deletes nothing"
    );
    let purged = succeeded(&hindsight(&d, &["dlq", "purge", "--stage", "filter", "--yes"]).await);
    assert_eq!(purged.trim(), "purged 1 dead letter(s)");
    let left = list(&d, &[]).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["seq"], json!(seq), "the extract letter stays");

    // The cause is fixed outside the message: the endpoint is back. Replay.
    llm_up.store(true, Ordering::SeqCst);
    let calls_before = llm.calls();
    let replayed = succeeded(&hindsight(&d, &["dlq", "replay", &seq.to_string()]).await);
    assert_eq!(replayed.trim(), "replayed 1 dead letter(s)");
    drained(&d, 1).await;
    d.settled(Duration::from_secs(30)).await;
    assert_eq!(llm.calls() - calls_before, 1, "one LLM call for the replay");
    assert_eq!(
        remembered(&d, t).await,
        (3, 3, 3),
        "three facts, three memories, each with its provenance once"
    );
    let (outcome, extractor): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT extract_outcome, extractor FROM turns WHERE tenant = $1 AND turn_id = 't-1'",
    )
    .bind(t)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("turn");
    assert_eq!(
        (outcome.as_deref(), extractor.as_deref()),
        (Some("facts"), Some("llm:fake-model"))
    );
    let sources: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.content, s.fact_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id
         WHERE s.tenant = $1 AND s.turn_id = 't-1' ORDER BY s.fact_id",
    )
    .bind(t)
    .fetch_all(&d.ctx.store.pool)
    .await
    .expect("provenance");
    assert_eq!(
        sources,
        [
            (
                "Li lives in Chaoyang, Beijing".to_string(),
                "t-1#0".to_string()
            ),
            ("Li has a cat called Mimi".to_string(), "t-1#1".to_string()),
            ("Li is allergic to peanuts".to_string(), "t-1#2".to_string()),
        ]
    );
    assert!(list(&d, &[]).await.is_empty(), "the DLQ is empty");

    // Replaying again: the letter is gone, so the command fails and says which.
    let again = hindsight(&d, &["dlq", "replay", &seq.to_string()]).await;
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains(&format!("message {seq}")), "{stderr}");
    let all = succeeded(&hindsight(&d, &["dlq", "replay", "--all"]).await);
    assert_eq!(all.trim(), "replayed 0 dead letter(s)");
    // A copy of the letter replayed once more (an operator's saved payload,
    // outside JetStream's duplicate window): the recorded facts are re-emitted
    // under their ids, and nothing is extracted or remembered twice.
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_REPLAY, "copy");
    d.ctx
        .bus
        .js
        .send_publish(
            d.config().namespace.subject(hindsight_core::Topic::Kept, t),
            jetstream::message::PublishMessage::build()
                .payload(
                    shown["payload"]
                        .as_str()
                        .expect("payload")
                        .to_string()
                        .into(),
                )
                .headers(headers),
        )
        .await
        .expect("published")
        .await
        .expect("stored");
    d.settled(Duration::from_secs(30)).await;
    assert_eq!(llm.calls() - calls_before, 1, "no second LLM call");
    assert_eq!(remembered(&d, t).await, (3, 3, 3), "nothing doubled");
    assert!(list(&d, &[]).await.is_empty());

    // The metrics say the same.
    let metrics = scrape(&stack.base_url).await;
    let count = |name: &str, labels: &[(&str, &str)]| metrics.sum(name, labels);
    assert_eq!(
        count(
            "hindsight_stage_rejected_total",
            &[
                ("stage", "extract"),
                ("tenant", t),
                ("reason", "retries exhausted")
            ]
        ),
        1.0
    );
    assert_eq!(
        count(
            "hindsight_stage_retried_total",
            &[("stage", "extract"), ("tenant", t)]
        ),
        1.0,
        "one retry, then the DLQ on the second delivery"
    );
    assert_eq!(
        count(
            "hindsight_stage_rejected_total",
            &[
                ("stage", "filter"),
                ("tenant", o),
                ("reason", "invalid turn")
            ]
        ),
        1.0
    );
    // Extract saw the turn twice in the outage, then the replay and the copy;
    // downstream, each fact once.
    for (stage, n) in [("extract", 4.0), ("embed", 3.0), ("persist", 3.0)] {
        assert_eq!(
            count(
                "hindsight_stage_received_total",
                &[("stage", stage), ("tenant", t)]
            ),
            n,
            "{stage} received"
        );
    }
    assert_eq!(
        count(
            "hindsight_facts_extracted_total",
            &[("tenant", t), ("extractor", "llm")]
        ),
        3.0
    );
    assert_eq!(
        count(
            "hindsight_dedupe_total",
            &[("tenant", t), ("outcome", "created")]
        ),
        3.0
    );

    stack.stop().await;
    d.remove().await;
}
