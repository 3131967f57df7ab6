//! The embed stage's batching, without NATS: a window of facts is embedded in
//! micro-batches of `HINDSIGHT_EMBED_BATCH`, up to `HINDSIGHT_EMBED_PARALLEL`
//! of them at once, and every fact gets its own text's vector whatever order
//! the calls finish in.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use hindsight_core::{
    Delivery, Outcome, Stage,
    embedding::{Languages, ModelId},
};
use hindsight_embed::EmbedStage;
use hindsight_embedder::{EmbedError, Embedder};
use hindsight_shared::config::Config;
use hindsight_tests::fact;

/// A vector that names its text: its length and its first bytes.
fn vector_of(text: &str) -> Vec<f32> {
    let mut v = vec![text.len() as f32];
    v.extend(text.bytes().take(7).map(f32::from));
    v
}

/// Counts calls and how many run at once; each takes a while, shorter
/// texts longer, so that calls finish out of order. A text holding
/// `unembeddable` fails its whole call.
struct Slow {
    running: AtomicUsize,
    most_running: AtomicUsize,
    calls: Mutex<Vec<usize>>,
    model: ModelId,
    languages: Languages,
}

impl Slow {
    fn new() -> Arc<Self> {
        Arc::new(Slow {
            running: AtomicUsize::new(0),
            most_running: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            model: ModelId {
                name: "slow".into(),
                version: "1".into(),
                dimension: 8,
            },
            languages: Languages::default(),
        })
    }
}

#[async_trait]
impl Embedder for Slow {
    fn model(&self) -> &ModelId {
        &self.model
    }

    fn languages(&self) -> &Languages {
        &self.languages
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        self.calls.lock().expect("calls").push(texts.len());
        let shortest = texts.iter().map(String::len).min().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(60u64.saturating_sub(shortest as u64))).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        if texts.iter().any(|t| t.contains("unembeddable")) {
            return Err(EmbedError::Unavailable("the endpoint is down".into()));
        }
        Ok(texts.iter().map(|t| vector_of(t)).collect())
    }
}

fn delivery(i: usize, content: &str) -> Delivery<hindsight_core::fact::Fact> {
    Delivery {
        input: fact::plain("acme", "li", &format!("t{i}#0"), content),
        tenant: "acme".into(),
        stream_seq: i as u64 + 1,
        delivered: 1,
        replayed: false,
        published: chrono::Utc::now(),
    }
}

/// The stage over `embedder`, `batch` facts a call and `parallel` calls at once.
fn stage(embedder: Arc<Slow>, batch: usize, parallel: usize) -> EmbedStage {
    let config = Config::from_lookup(|k| match k {
        "HINDSIGHT_EMBED_BATCH" => Some(batch.to_string()),
        "HINDSIGHT_EMBED_PARALLEL" => Some(parallel.to_string()),
        "HINDSIGHT_SCREEN_NEARNESS" => Some("off".into()),
        _ => None,
    })
    .expect("valid configuration");
    EmbedStage::new(embedder, &config)
}

/// One delivery per text, in order.
fn deliveries<T: AsRef<str>>(contents: &[T]) -> Vec<Delivery<hindsight_core::fact::Fact>> {
    contents
        .iter()
        .enumerate()
        .map(|(i, c)| delivery(i, c.as_ref()))
        .collect()
}

#[tokio::test]
async fn micro_batches_run_side_by_side_and_each_fact_gets_its_own_vector() {
    let embedder = Slow::new();
    let stage = stage(embedder.clone(), 4, 3);
    // Lengths out of order, so that sorting by length reorders them.
    let contents: Vec<String> = (0..38)
        .map(|i| format!("fact {i} {}", "x".repeat((i * 7) % 23)))
        .collect();
    let batch = deliveries(&contents);

    let outcomes = stage.handle(&batch).await;

    assert_eq!(outcomes.len(), batch.len());
    for (outcome, content) in outcomes.iter().zip(&contents) {
        let Outcome::Emit(embedded) = outcome else {
            panic!("{content}: {outcome:?}");
        };
        assert_eq!(embedded.len(), 1);
        assert_eq!(embedded[0].fact.content, *content);
        assert_eq!(embedded[0].vector, vector_of(content), "{content}");
    }
    let calls = embedder.calls.lock().expect("calls").clone();
    assert_eq!(calls.iter().sum::<usize>(), contents.len());
    assert!(calls.iter().all(|&n| n <= 4), "{calls:?}");
    assert_eq!(embedder.most_running.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_failed_micro_batch_retries_its_own_facts_only() {
    let stage = stage(Slow::new(), 2, 2);
    // Sorted by length: [a, bb], [unembeddable, dddddddddddddd].
    let batch = deliveries(&["dddddddddddddd", "a", "unembeddable", "bb"]);

    let outcomes = stage.handle(&batch).await;

    assert!(matches!(&outcomes[0], Outcome::Retry(r) if r.contains("endpoint")));
    assert!(matches!(&outcomes[1], Outcome::Emit(_)));
    assert!(matches!(&outcomes[2], Outcome::Retry(r) if r.contains("endpoint")));
    assert!(matches!(&outcomes[3], Outcome::Emit(_)));
}
