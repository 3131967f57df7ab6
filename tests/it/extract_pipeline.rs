//! The extract stage through real NATS and Postgres, against a local fake
//! OpenAI-compatible endpoint that answers well, badly, slowly or not at all.
//! In every case: no turn lost, no duplicate fact, the right outcome recorded.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use hindsight_core::fact::Fact;
use hindsight_extract::ExtractStage;
use hindsight_filter::FilterStage;
use hindsight_shared::Config;
use hindsight_tests::{
    Deployment, RunningStage, eventually,
    fake_llm::{FakeLlm, Reply},
};
use serde_json::{Value, json};

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

struct Run {
    deployment: Deployment,
    llm: FakeLlm,
    stages: Vec<RunningStage>,
}

impl Run {
    async fn start(
        script: impl FnMut(usize, &Value) -> Reply + Send + 'static,
        adjust: impl FnOnce(&mut Config),
    ) -> Self {
        let llm = FakeLlm::start(script).await;
        let base_url = llm.base_url();
        let deployment = Deployment::new("test", |c| {
            c.llm.base_url = Some(base_url);
            c.llm.model = "fake-model".into();
            c.llm.timeout = Duration::from_millis(500);
            c.llm.retry_budget = Duration::from_secs(3);
            c.llm.fallback_after = 3;
            c.max_deliver = Some(5);
            adjust(c);
        })
        .await;
        let filter = deployment
            .start(FilterStage::new(deployment.ctx.store.clone()))
            .await;
        let extract =
            hindsight_extract::from_config(deployment.config(), deployment.ctx.store.clone())
                .expect("stage");
        let extract = deployment.start(extract).await;
        Self {
            deployment,
            llm,
            stages: vec![filter, extract],
        }
    }

    async fn publish(&self, turn_id: &str) {
        self.publish_content(turn_id, CONTENT).await;
    }

    async fn publish_content(&self, turn_id: &str, content: &str) {
        let turn = json!({
            "tenant": "acme", "user_id": "li", "session_id": format!("s-{turn_id}"), "turn_id": turn_id,
            "speaker": "Li", "ts": "2023-05-08T13:56:00Z", "content": content,
        });
        self.deployment
            .publish_raw("acme", turn.to_string().into_bytes())
            .await;
    }

    /// Waits until the turn's extraction is recorded and nothing is left in flight.
    async fn outcome(
        &self,
        turn_id: &str,
        within: Duration,
    ) -> (String, Option<String>, Option<String>) {
        let pool = self.deployment.ctx.store.pool.clone();
        let query = || {
            let pool = pool.clone();
            async move {
                sqlx::query_as::<_, (Option<String>, Option<String>, Option<String>)>(
                    "SELECT extract_outcome, extract_reason, extractor FROM turns WHERE tenant = 'acme' AND turn_id = $1",
                )
                .bind(turn_id)
                .fetch_optional(&pool)
                .await
                .expect("query")
            }
        };
        eventually("the extraction is recorded", within, || async {
            matches!(query().await, Some((Some(_), _, _)))
                && self.deployment.backlog("KEPT", "extract").await == 0
        })
        .await;
        let (outcome, reason, extractor) = query().await.expect("row");
        (outcome.unwrap_or_default(), reason, extractor)
    }

    async fn facts(&self) -> Vec<Fact> {
        self.deployment
            .read_stream("FACTS")
            .await
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).expect("facts are JSON"))
            .collect()
    }

    async fn finish(self) {
        let facts = self.facts().await;
        let ids: HashSet<&str> = facts.iter().map(|f| f.fact_id.as_str()).collect();
        assert_eq!(ids.len(), facts.len(), "no fact is emitted twice");
        assert!(
            self.deployment.dead_letters().await.is_empty(),
            "no turn went to the DLQ"
        );
        for stage in self.stages {
            stage.stop().await;
        }
        self.deployment.remove().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_json_becomes_typed_facts() {
    let run = Run::start(|_, _| Reply::Content(good_facts()), |_| {}).await;
    run.publish("t1").await;
    let (outcome, _, extractor) = run.outcome("t1", Duration::from_secs(20)).await;
    assert_eq!(
        (outcome.as_str(), extractor.as_deref()),
        ("facts", Some("llm:fake-model"))
    );
    let facts = run.facts().await;
    assert_eq!(facts.len(), 3);
    assert_eq!(facts[2].fact_id, "t1#2");
    assert_eq!(facts[2].fact_type.as_str(), "constraint");
    assert!(
        facts
            .iter()
            .all(|f| f.turn_id == "t1" && f.speaker == "Li" && !f.quarantine)
    );
    let request = &run.llm.requests()[0];
    assert_eq!(
        request["response_format"]["type"], "json_schema",
        "structured output is asked for first"
    );
    assert!(
        request["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Chaoyang")
    );
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_decides_borderline_turns_but_not_clean_ones() {
    // The model says "orders the assistant" of everything; it counts only
    // where the screen saw a cue without quarantining.
    let run = Run::start(
        |_, _| {
            let mut reply: Value = serde_json::from_str(&good_facts()).expect("JSON");
            reply["orders_assistant"] = json!(true);
            Reply::Content(reply.to_string())
        },
        |_| {},
    )
    .await;
    run.publish_content("borderline", "Our IT admin approved my new laptop")
        .await;
    run.publish("clean").await;
    run.outcome("borderline", Duration::from_secs(20)).await;
    run.outcome("clean", Duration::from_secs(20)).await;
    let facts = run.facts().await;
    let of = |turn: &'static str| facts.iter().filter(move |f| f.turn_id == turn);
    assert!(of("borderline").count() > 0 && of("clean").count() > 0);
    assert!(
        of("borderline").all(|f| f.quarantine && f.flags.iter().any(|x| x == "poison:llm")),
        "{facts:?}"
    );
    assert!(of("clean").all(|f| !f.quarantine), "{facts:?}");
    let request = &run.llm.requests()[0];
    assert_eq!(
        request["response_format"]["json_schema"]["schema"]["required"],
        json!(["facts", "orders_assistant"])
    );
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_inside_prose_is_found() {
    let run = Run::start(
        |_, _| {
            Reply::Content(format!(
                "Here you go:\n```json\n{}\n```\nAnything else?",
                good_facts()
            ))
        },
        |_| {},
    )
    .await;
    run.publish("t1").await;
    assert_eq!(run.outcome("t1", Duration::from_secs(20)).await.0, "facts");
    assert_eq!(run.facts().await.len(), 3);
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_recorded_as_no_facts_without_a_retry_loop() {
    let run = Run::start(
        |_, _| Reply::Content("{\"facts\": [{\"content\": \"Li lives in".into()),
        |_| {},
    )
    .await;
    run.publish("t1").await;
    let (outcome, reason, _) = run.outcome("t1", Duration::from_secs(20)).await;
    assert_eq!(outcome, "no_facts");
    assert!(reason.unwrap_or_default().contains("unusable model output"));
    assert!(run.facts().await.is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        run.llm.calls(),
        1,
        "a bad answer is not asked again and again"
    );
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_missing_fields_get_defaults_and_those_without_content_are_skipped() {
    let reply = json!([{"content": "Li has a cat called Mimi"}, {"fact_type": "event"}, {"content": "Li is allergic to peanuts", "fact_type": "constraint"}]);
    let run = Run::start(move |_, _| Reply::Content(reply.to_string()), |_| {}).await;
    run.publish("t1").await;
    assert_eq!(run.outcome("t1", Duration::from_secs(20)).await.0, "facts");
    let facts = run.facts().await;
    assert_eq!(facts.len(), 2);
    assert_eq!(facts[0].fact_type.as_str(), "fact");
    assert!(facts[0].entities.is_empty());
    assert!((0.0..=1.0).contains(&facts[0].importance));
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_range_importance_is_brought_into_range() {
    let reply = json!({"facts": [{"content": "Li is allergic to peanuts", "fact_type": "constraint", "entities": [], "importance": 7, "confidence": 1.4, "occurred_at": null, "valid_until": null}]});
    let run = Run::start(move |_, _| Reply::Content(reply.to_string()), |_| {}).await;
    run.publish("t1").await;
    run.outcome("t1", Duration::from_secs(20)).await;
    let facts = run.facts().await;
    assert!(
        (facts[0].importance - 0.7).abs() < 1e-6,
        "7 on a 0–10 scale is 0.7"
    );
    assert!((0.0..=1.0).contains(&facts[0].confidence));
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_after_the_time_the_server_asks_for() {
    let run = Run::start(
        |i, _| {
            if i == 0 {
                Reply::Status(429, Some(1))
            } else {
                Reply::Content(good_facts())
            }
        },
        |_| {},
    )
    .await;
    let started = Instant::now();
    run.publish("t1").await;
    assert_eq!(run.outcome("t1", Duration::from_secs(20)).await.0, "facts");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was honoured"
    );
    assert_eq!(run.llm.calls(), 2);
    assert_eq!(run.facts().await.len(), 3);
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_is_retried_with_backoff() {
    let run = Run::start(
        |i, _| {
            if i < 2 {
                Reply::Status(500, None)
            } else {
                Reply::Content(good_facts())
            }
        },
        |_| {},
    )
    .await;
    run.publish("t1").await;
    assert_eq!(run.outcome("t1", Duration::from_secs(20)).await.0, "facts");
    assert_eq!(run.llm.calls(), 3);
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_slower_than_the_timeout_is_abandoned_and_retried() {
    let run = Run::start(
        |i, _| {
            if i == 0 {
                Reply::Slow(Duration::from_secs(3), good_facts())
            } else {
                Reply::Content(good_facts())
            }
        },
        |_| {},
    )
    .await;
    run.publish("t1").await;
    assert_eq!(run.outcome("t1", Duration::from_secs(20)).await.0, "facts");
    assert_eq!(run.llm.calls(), 2);
    assert_eq!(
        run.facts().await.len(),
        3,
        "the slow answer never adds facts of its own"
    );
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_stays_down_hands_the_turn_to_the_rules() {
    let run = Run::start(
        |_, _| Reply::Status(503, None),
        |c| {
            c.llm.retry_budget = Duration::from_millis(600);
            c.llm.fallback_after = 2;
        },
    )
    .await;
    run.publish("t1").await;
    let (outcome, _, extractor) = run.outcome("t1", Duration::from_secs(30)).await;
    assert_eq!(
        (outcome.as_str(), extractor.as_deref()),
        ("facts", Some("rules-fallback"))
    );
    let facts = run.facts().await;
    assert_eq!(
        facts.len(),
        3,
        "the rules split the compound statement: {facts:?}"
    );
    assert!(
        facts
            .iter()
            .any(|f| f.content == "Li is allergic to peanuts" && f.importance >= 0.8)
    );
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_structured_output_is_asked_in_json_mode() {
    let run = Run::start(
        |_, request| {
            if request["response_format"]["type"] == "json_schema" {
                Reply::Status(400, None)
            } else {
                Reply::Content(good_facts())
            }
        },
        |_| {},
    )
    .await;
    run.publish("t1").await;
    let (outcome, _, extractor) = run.outcome("t1", Duration::from_secs(30)).await;
    assert_eq!(
        (outcome.as_str(), extractor.as_deref()),
        ("facts", Some("llm:fake-model"))
    );
    let requests = run.llm.requests();
    assert_eq!(requests[1]["response_format"]["type"], "json_object");
    run.publish("t2").await;
    run.outcome("t2", Duration::from_secs(30)).await;
    assert_eq!(
        run.llm.calls(),
        3,
        "the refusal is remembered: the next turn is asked in JSON mode at once"
    );
    run.finish().await;
}

#[tokio::test]
async fn a_redelivered_turn_yields_the_very_same_facts() {
    // A model that answers differently every time must still give a turn one set of facts.
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = counter.clone();
    let llm = FakeLlm::start(move |i, _| {
        c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::Content(json!([{"content": format!("answer number {i}")}]).to_string())
    })
    .await;
    let base_url = llm.base_url();
    let deployment = Deployment::new("test", |c| {
        c.llm.base_url = Some(base_url);
        c.llm.model = "fake-model".into();
    })
    .await;
    let store = deployment.ctx.store.clone();
    let filter = FilterStage::new(store.clone());
    let turn = json!({"tenant": "acme", "user_id": "li", "session_id": "s1", "turn_id": "t9", "content": CONTENT});
    let raw = hindsight_core::Delivery {
        input: bytes::Bytes::from(turn.to_string()),
        tenant: "acme".into(),
        stream_seq: 1,
        delivered: 1,
        replayed: false,
        published: chrono::Utc::now(),
    };
    use hindsight_core::{Outcome, Stage};
    let Outcome::Emit(kept) = filter.handle(std::slice::from_ref(&raw)).await.remove(0) else {
        panic!("kept")
    };
    let extract: ExtractStage =
        hindsight_extract::from_config(deployment.config(), store).expect("stage");
    let delivery = |delivered| hindsight_core::Delivery {
        input: kept[0].clone(),
        tenant: "acme".into(),
        stream_seq: 1,
        delivered,
        replayed: false,
        published: raw.published,
    };
    let first = extract.handle(&[delivery(1)]).await;
    let second = extract.handle(&[delivery(2)]).await;
    assert_eq!(first, second);
    assert_eq!(
        counter.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the model is asked once"
    );
    deployment.remove().await;
}
