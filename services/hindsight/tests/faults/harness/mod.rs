//! What the fault suites share: the pipeline as four `hindsight run STAGE`
//! processes with a deployment's environment (killed, restarted, and
//! supervised as compose's `restart: unless-stopped` would), a publisher that
//! retries unacknowledged publishes under the same message id, outages of the
//! machine's PostgreSQL and NATS, and the invariants checked afterwards.

mod invariants;
mod outages;
mod pipeline;
mod waiting;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
    time::{Duration, Instant},
};

use async_nats::jetstream;
use hindsight_core::Topic;
use hindsight_tests::{Deployment, STAGE_CONSUMERS};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{Child, Command},
};

pub use invariants::*;
pub use outages::*;
pub use pipeline::*;
pub use waiting::*;

/// The pipeline's stages, in order.
pub const STAGES: [&str; 4] = ["filter", "extract", "embed", "persist"];

/// The embedding model name the processes send to the fake endpoint.
pub const EMBED_MODEL: &str = "fake-bag-of-words";

// ---------------------------------------------------------------- turns

/// The turns of one suite: envelopes in publish order, and which turn ids
/// the filter must archive (valid) or dead-letter (invalid).
pub struct Turns {
    pub tenant: String,
    pub envelopes: Vec<Value>,
    pub valid: Vec<String>,
    pub invalid: Vec<String>,
}

fn locomo() -> &'static Vec<crate::locomo::Turn> {
    static TURNS: OnceLock<Vec<crate::locomo::Turn>> = OnceLock::new();
    TURNS.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval/locomo-dev.json");
        match crate::locomo::load(&path) {
            Ok(d) => d.turns,
            Err(e) => {
                eprintln!("LoCoMo not readable ({e}): synthetic turns instead");
                Vec::new()
            }
        }
    })
}

const CITIES: &[&str] = &["Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn"];
const PEOPLE: &[&str] = &["Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna"];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

/// `n` realistic turns of `tenant`: LoCoMo's conversations under new ids
/// (round `r` of the data gets ids and sessions prefixed `r<r>-`, so a
/// repeated conversation is the same user saying the same things again), or
/// synthetic ones when the data is missing. Every `invalid_every`-th turn
/// breaks the contract (its user id has a space), for the DLQ.
pub fn turns(tenant: &str, n: usize, offset: usize, invalid_every: usize) -> Turns {
    let data = locomo();
    let mut out = Turns {
        tenant: tenant.to_string(),
        envelopes: Vec::with_capacity(n),
        valid: Vec::new(),
        invalid: Vec::new(),
    };
    for i in 0..n {
        let k = i + offset;
        let mut v = if data.is_empty() {
            let content = TEMPLATES[k % TEMPLATES.len()]
                .replace("{city}", CITIES[(k / 7) % CITIES.len()])
                .replace("{person}", PEOPLE[(k / 3) % PEOPLE.len()])
                .replace("{n}", &(2 + k % 97).to_string());
            json!({
                "user_id": format!("user-{}", k % 20),
                "session_id": format!("session-{}", k % 100),
                "turn_id": format!("synthetic-{k}"),
                "content": format!("{content} (note {k})"),
            })
        } else {
            let t = &data[k % data.len()];
            let round = k / data.len();
            let mut v = t.envelope();
            v["turn_id"] = json!(format!("r{round}-{}-{}", t.user_id, t.turn_id));
            v["session_id"] = json!(format!("r{round}-{}", t.session_id));
            v
        };
        v["tenant"] = json!(tenant);
        let id = v["turn_id"].as_str().unwrap_or_default().to_string();
        if invalid_every > 0 && i % invalid_every == invalid_every - 1 {
            v["user_id"] = json!("not a valid id");
            out.invalid.push(id);
        } else {
            out.valid.push(id);
        }
        out.envelopes.push(v);
    }
    out
}

// ---------------------------------------------------------------- publishing

#[derive(Debug, Default, Clone)]
pub struct Published {
    /// Publishes that got no ack and were sent again (same message id).
    pub retried: usize,
    /// Acks that said "duplicate": a retried publish whose first attempt had
    /// been stored after all.
    pub duplicate_acks: usize,
    pub seconds: f64,
}

/// Publishes the envelopes with JetStream publish, message id
/// `<tenant>:<turn_id>`, at about `per_second`, 32 acks in flight; a publish
/// that gets no ack (error or timeout) is sent again with the same id until
/// acknowledged, so each turn is stored exactly once.
pub async fn publish(
    js: jetstream::Context,
    subject: String,
    tenant: String,
    envelopes: Vec<Value>,
    per_second: f64,
) -> Published {
    const WINDOW: usize = 32;
    let started = Instant::now();
    let mut report = Published::default();
    for (n, chunk) in envelopes.chunks(WINDOW).enumerate() {
        let mut pending: Vec<&Value> = chunk.iter().collect();
        let mut rounds = 0;
        while !pending.is_empty() {
            let mut acks = Vec::with_capacity(pending.len());
            for v in &pending {
                let id = format!("{tenant}:{}", v["turn_id"].as_str().unwrap_or_default());
                let msg = jetstream::message::PublishMessage::build()
                    .payload(v.to_string().into_bytes().into())
                    .message_id(id);
                acks.push(js.send_publish(subject.clone(), msg).await);
            }
            let mut failed = Vec::new();
            for (v, ack) in pending.iter().zip(acks) {
                let acked = match ack {
                    Ok(future) => match future.await {
                        Ok(ack) => {
                            report.duplicate_acks += usize::from(ack.duplicate);
                            true
                        }
                        Err(_) => false,
                    },
                    Err(_) => false,
                };
                if !acked {
                    failed.push(*v);
                }
            }
            if !failed.is_empty() {
                rounds += 1;
                assert!(
                    rounds < 400,
                    "publishes still unacknowledged after {rounds} tries"
                );
                report.retried += failed.len();
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            pending = failed;
        }
        let due = started + Duration::from_secs_f64(((n + 1) * WINDOW) as f64 / per_second);
        tokio::time::sleep_until(due.into()).await;
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// The subject turns of `tenant` are published to in this deployment.
pub fn subject(d: &Deployment, tenant: &str) -> String {
    d.config().namespace.subject(Topic::Turns, tenant)
}

// ---------------------------------------------------------------- misc

/// Mean and max of some durations, in ms.
pub fn mean_max(ds: &[Duration]) -> (u128, u128) {
    if ds.is_empty() {
        return (0, 0);
    }
    let total: u128 = ds.iter().map(Duration::as_millis).sum();
    (
        total / ds.len() as u128,
        ds.iter().map(Duration::as_millis).max().unwrap_or(0),
    )
}
