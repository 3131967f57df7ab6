//! The generic runner with stand-in stages: retries with backoff, the DLQ after
//! `max_deliver`, panics contained, a dead letter replayed once its cause
//! is fixed, and batches handled one at a time with their outputs in order
//! while settling overlaps the next batch.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use hindsight_core::{Delivery, Outcome, Stage, Topic, stage::Message};
use hindsight_shared::dlq;
use hindsight_tests::{Deployment, eventually};
use serde::Serialize;

#[derive(Serialize)]
struct Echo {
    tenant: String,
    id: String,
}

impl Message for Echo {
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn msg_id(&self) -> String {
        format!("echo:{}", self.id)
    }
}

/// Fails every message while `broken` is set (as if a dependency were down),
/// and panics on the payload `boom`. Takes `pause` over every batch, and
/// notes each delivery it sees.
struct Flaky {
    broken: Arc<AtomicBool>,
    handled: Arc<AtomicUsize>,
    pause: Duration,
    seen: Arc<Mutex<Vec<(String, u64)>>>,
    /// Calls of `handle` running now, and the most ever at once.
    running: Arc<AtomicUsize>,
    most_running: Arc<AtomicUsize>,
}

#[async_trait]
impl Stage for Flaky {
    type Input = String;
    type Output = Echo;
    const NAME: &'static str = "filter";
    const INPUT: Topic = Topic::Turns;
    const OUTPUT: Option<Topic> = Some(Topic::Kept);

    fn decode(&self, payload: &[u8]) -> Result<String, String> {
        String::from_utf8(payload.to_vec()).map_err(|e| e.to_string())
    }

    async fn handle(&self, batch: &[Delivery<String>]) -> Vec<Outcome<Echo>> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.extend(batch.iter().map(|d| (d.input.clone(), d.delivered)));
        }
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.pause).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        if batch.iter().any(|d| d.input == "boom") {
            panic!("boom");
        }
        batch
            .iter()
            .map(|d| {
                if self.broken.load(Ordering::SeqCst) {
                    Outcome::Retry("dependency unavailable".into())
                } else {
                    self.handled.fetch_add(1, Ordering::SeqCst);
                    Outcome::Emit(vec![Echo {
                        tenant: d.tenant.clone(),
                        id: d.input.clone(),
                    }])
                }
            })
            .collect()
    }
}

fn flaky(broken: bool) -> (Flaky, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let (b, h) = (
        Arc::new(AtomicBool::new(broken)),
        Arc::new(AtomicUsize::new(0)),
    );
    (
        Flaky {
            broken: b.clone(),
            handled: h.clone(),
            pause: Duration::ZERO,
            seen: Arc::default(),
            running: Arc::default(),
            most_running: Arc::default(),
        },
        b,
        h,
    )
}

async fn quick() -> Deployment {
    Deployment::new("test", |c| {
        c.max_deliver = Some(3);
        c.retry_initial = Duration::from_millis(50);
        c.retry_max = Duration::from_millis(200);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_keeps_failing_is_dead_lettered_after_max_deliver() {
    let deployment = quick().await;
    let (stage, _, _) = flaky(true);
    let running = deployment.start(stage).await;
    deployment.publish_raw("acme", b"m1".to_vec()).await;
    eventually(
        "the message reaches the DLQ",
        Duration::from_secs(20),
        || async { deployment.dead_letters().await.len() == 1 },
    )
    .await;
    let letter = &deployment.dead_letters().await[0];
    assert_eq!(
        letter.reason,
        "retries exhausted: after 3 deliveries: dependency unavailable"
    );
    assert_eq!(
        (
            letter.deliveries,
            letter.stage.as_str(),
            letter.tenant.as_str()
        ),
        (3, "filter", "acme")
    );
    assert_eq!(letter.payload.as_ref(), b"m1");
    eventually(
        "nothing is left pending",
        Duration::from_secs(10),
        || async { deployment.backlog("TURNS", "filter").await == 0 },
    )
    .await;
    running.stop().await;
    deployment.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_stage_costs_retries_not_the_process() {
    let deployment = quick().await;
    let (stage, _, handled) = flaky(false);
    let running = deployment.start(stage).await;
    deployment.publish_raw("acme", b"boom".to_vec()).await;
    eventually(
        "the poison message reaches the DLQ",
        Duration::from_secs(20),
        || async { deployment.dead_letters().await.len() == 1 },
    )
    .await;
    assert!(
        deployment.dead_letters().await[0]
            .reason
            .contains("panicked")
    );
    deployment.publish_raw("acme", b"fine".to_vec()).await;
    eventually("the stage still works", Duration::from_secs(10), || async {
        handled.load(Ordering::SeqCst) == 1
    })
    .await;
    running.stop().await;
    deployment.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_replayed_after_its_cause_is_fixed_is_processed_once() {
    let deployment = quick().await;
    let (stage, broken, handled) = flaky(true);
    let running = deployment.start(stage).await;
    deployment.publish_raw("acme", b"m1".to_vec()).await;
    eventually(
        "the message reaches the DLQ",
        Duration::from_secs(20),
        || async { deployment.dead_letters().await.len() == 1 },
    )
    .await;

    broken.store(false, Ordering::SeqCst);
    let (js, ns) = (&deployment.ctx.bus.js, &deployment.ctx.config.namespace);
    let letter = deployment.dead_letters().await.remove(0);
    dlq::replay(js, ns, &letter).await.expect("replayed");
    // A second replay of the same letter (say, a retried command) changes nothing.
    let _ = dlq::replay(js, ns, &letter).await;
    eventually(
        "the replayed message is processed",
        Duration::from_secs(10),
        || async { deployment.stream_messages("KEPT").await == 1 },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(handled.load(Ordering::SeqCst), 1, "processed once");
    assert_eq!(deployment.stream_messages("KEPT").await, 1);
    assert!(
        deployment.dead_letters().await.is_empty(),
        "the replayed letter left the DLQ"
    );
    running.stop().await;
    deployment.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_handled_for_longer_than_the_ack_wait_is_not_redelivered() {
    let deployment = Deployment::new("test", |c| {
        c.ack_wait = Some(Duration::from_secs(1));
        c.max_deliver = Some(3);
    })
    .await;
    let (mut stage, _, _) = flaky(false);
    stage.pause = Duration::from_secs(4);
    let seen = stage.seen.clone();
    let running = deployment.start(stage).await;
    for m in ["m1", "m2", "m3"] {
        deployment.publish_raw("acme", m.as_bytes().to_vec()).await;
    }
    eventually(
        "every message is settled",
        Duration::from_secs(30),
        || async { deployment.backlog("TURNS", "filter").await == 0 },
    )
    .await;
    // Four ack waits of handling, yet each message was seen once, first time.
    let mut seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    seen.sort();
    assert_eq!(
        seen,
        [("m1".into(), 1), ("m2".into(), 1), ("m3".into(), 1)],
        "in-progress acks keep JetStream from redelivering"
    );
    assert!(deployment.dead_letters().await.is_empty());
    running.stop().await;
    deployment.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_handled_one_at_a_time_and_their_outputs_keep_the_input_order() {
    let deployment = Deployment::new("test", |c| {
        c.batch_size = 8;
        c.linger = Duration::from_millis(2);
    })
    .await;
    let (mut stage, _, handled) = flaky(false);
    stage.pause = Duration::from_millis(3);
    let most_running = stage.most_running.clone();
    let running = deployment.start(stage).await;
    let ids: Vec<String> = (0..200).map(|i| format!("m{i:03}")).collect();
    for id in &ids {
        deployment.publish_raw("acme", id.as_bytes().to_vec()).await;
    }
    eventually(
        "every message is settled",
        Duration::from_secs(30),
        || async { deployment.backlog("TURNS", "filter").await == 0 },
    )
    .await;
    assert_eq!(handled.load(Ordering::SeqCst), ids.len());
    assert_eq!(
        most_running.load(Ordering::SeqCst),
        1,
        "a batch is handled only after the one before it"
    );
    let published: Vec<String> = deployment
        .read_stream("KEPT")
        .await
        .iter()
        .map(|m| {
            let echo: serde_json::Value = serde_json::from_slice(&m.payload).expect("json");
            echo["id"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(published, ids, "outputs are published in the order taken");
    running.stop().await;
    deployment.remove().await;
}
