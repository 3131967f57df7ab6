//! The stage contract: a stage is plain logic over a batch of decoded inputs.
//! Everything about transport (pulling, acking, retry delays, the DLQ, metrics)
//! belongs to the [runner](crate::runner), so a stage can be tested by calling
//! [`Stage::handle`] directly, without NATS.

use async_trait::async_trait;
use serde::Serialize;

use crate::namespace::Topic;

/// One input message as the stage sees it.
#[derive(Debug, Clone)]
pub struct Delivery<I> {
    pub input: I,
    /// Tenant of the subject the message arrived on (what follows `<ns>.<topic>.`).
    pub tenant: String,
    /// Sequence of the message in its stream: stable across redeliveries.
    pub stream_seq: u64,
    /// How many times this message has been delivered, this time included.
    pub delivered: u64,
    /// Set when an operator replayed the message from the DLQ.
    pub replayed: bool,
    /// When JetStream stored the message.
    pub published: chrono::DateTime<chrono::Utc>,
}

/// What became of one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<O> {
    /// Publish these outputs (possibly none); ack once JetStream stored them all.
    Emit(Vec<O>),
    /// Nothing to pass on, for a reason worth counting (noise, duplicate).
    Drop(String),
    /// A transient failure: deliver again later, with backoff.
    Retry(String),
    /// The input can never succeed: move it to the DLQ with this reason.
    Reject(String),
}

/// A message a stage emits: it knows its tenant and its JetStream message id,
/// which must be deterministic so that a re-emitted output is dropped as a duplicate.
pub trait Message: Serialize + Send + Sync + 'static {
    fn tenant(&self) -> &str;
    fn msg_id(&self) -> String;
}

/// The output of a stage that emits nothing (the last one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum NoOutput {}

impl Message for NoOutput {
    fn tenant(&self) -> &str {
        match *self {}
    }

    fn msg_id(&self) -> String {
        match *self {}
    }
}

#[async_trait]
pub trait Stage: Send + Sync + 'static {
    type Input: Send + Sync + 'static;
    type Output: Message;

    /// The stage's name: its durable consumer, its DLQ subject token, its metric label.
    const NAME: &'static str;
    /// The topic it consumes.
    const INPUT: Topic;
    /// The topic it emits to, if any.
    const OUTPUT: Option<Topic>;

    /// Batch size and linger of this stage when they differ from the
    /// process-wide `HINDSIGHT_BATCH_SIZE` and `HINDSIGHT_LINGER`.
    fn batching(&self) -> Option<(usize, std::time::Duration)> {
        None
    }

    /// Turns a payload into an input; an error rejects the message to the DLQ.
    fn decode(&self, payload: &[u8]) -> Result<Self::Input, String>;

    /// Returns exactly one outcome per delivery, in order.
    async fn handle(&self, batch: &[Delivery<Self::Input>]) -> Vec<Outcome<Self::Output>>;
}
