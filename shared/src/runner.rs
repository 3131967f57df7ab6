//! The generic stage runner: everything about transport, once, for every stage.
//!
//! It pulls batches from the stage's durable consumer, decodes them, calls
//! [`Stage::handle`], publishes the outputs and acks each input only after
//! JetStream stored every output of it. Transient failures are nak'ed with an
//! exponential delay; an input that still fails on its last allowed delivery,
//! or that can never succeed, is copied to the DLQ and only then acked. When the
//! shutdown token fires it stops pulling, finishes the batch it holds, and returns.
//! Settling one batch overlaps with pulling and handling the next.

use std::{sync::Arc, time::Duration};

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use futures::{FutureExt, StreamExt, future::join_all};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use hindsight_core::{
    namespace::Namespace,
    retry,
    stage::{Delivery, Message, Outcome, Stage},
};

use crate::{
    bus::Bus,
    config::Config,
    dlq::{self, DeadLetter},
    events,
    streams::Topology,
};

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("no consumer named {0:?} in streams/: add it to the stream files")]
    NoConsumer(&'static str),
    #[error("{0}")]
    Streams(#[from] crate::streams::StreamsError),
    #[error("consumer {consumer} on stream {stream}: {reason} (run `hindsight streams apply`)")]
    Consumer {
        stream: String,
        consumer: &'static str,
        reason: String,
    },
}

/// How a runner paces itself.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    pub batch_size: usize,
    pub linger: Duration,
    pub max_deliver: u64,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// The consumer's ack wait: a batch handled for longer is kept in
    /// progress (see [`IN_PROGRESS_FOR_AT_MOST`]).
    pub ack_wait: Duration,
}

/// How many ack waits a batch may stay "in progress" while the stage handles
/// it. A slow but working stage (an LLM answering 256 turns 8 at a time)
/// is not redelivered behind its own back, which would call the LLM again
/// for turns being extracted and count deliveries that never failed; a stage
/// stuck for longer than this gets its messages redelivered as before.
pub const IN_PROGRESS_FOR_AT_MOST: u32 = 10;

/// Why waiting for the next batch gave no batch.
enum NoBatch {
    /// The pull failed once; waiting again.
    Interrupted,
    /// The pull stream ended: pull again.
    Reconnect,
    Shutdown,
}

/// A batch the stage has handled, waiting to be settled.
struct Handled<O> {
    inputs: Vec<Pulled>,
    outcomes: Vec<Outcome<O>>,
    size: usize,
    logic: Duration,
    started: std::time::Instant,
}

/// One pulled message, with what the runner needs to settle it.
struct Pulled {
    msg: jetstream::Message,
    tenant: String,
    stream_seq: u64,
    delivered: u64,
}

/// Runs a stage until `shutdown` fires. `ready` is cancelled once the stage is consuming.
pub async fn run<S: Stage>(
    stage: Arc<S>,
    bus: &Bus,
    config: &Config,
    shutdown: CancellationToken,
    ready: CancellationToken,
) -> Result<(), RunnerError> {
    let topology = Topology::load()?;
    let (stream_spec, consumer_spec) = topology
        .consumer(S::NAME)
        .ok_or(RunnerError::NoConsumer(S::NAME))?;
    let stream_name = config.namespace.stream_name(&stream_spec.name);
    let consumer_err = |reason: String| RunnerError::Consumer {
        stream: stream_name.clone(),
        consumer: S::NAME,
        reason,
    };
    let consumer: PullConsumer = bus
        .js
        .get_stream(&stream_name)
        .await
        .map_err(|e| consumer_err(e.to_string()))?
        .get_consumer(S::NAME)
        .await
        .map_err(|e| consumer_err(e.to_string()))?;
    let (batch_size, linger) = stage
        .batching()
        .unwrap_or((config.batch_size, config.linger));
    let options = RunnerOptions {
        batch_size,
        linger,
        max_deliver: config
            .max_deliver
            .unwrap_or(consumer_spec.max_deliver)
            .max(1) as u64,
        retry_initial: config.retry_initial,
        retry_max: config.retry_max,
        ack_wait: consumer.cached_info().config.ack_wait,
    };
    let runner = Runner {
        stage,
        js: bus.js.clone(),
        ns: config.namespace.clone(),
        options,
    };
    tracing::info!(stage = S::NAME, stream = %stream_name, "stage consuming");
    runner.consume(consumer, shutdown, ready).await;
    tracing::info!(stage = S::NAME, "stage stopped");
    Ok(())
}

struct Runner<S: Stage> {
    stage: Arc<S>,
    js: jetstream::Context,
    ns: Namespace,
    options: RunnerOptions,
}

impl<S: Stage> Runner<S> {
    /// Pulls, handles and settles batches until shutdown. Settling a batch
    /// (publishing its outputs, acking its inputs) overlaps with pulling and
    /// handling the next one, so a stage waits on NATS and on its own
    /// dependencies (Postgres, the embedder) at the same time rather than in
    /// turn. At most one batch is being settled: outputs are published in the
    /// order the batches were taken, and a batch's handling starts only after
    /// the previous batch's handling ended (the filter reads what the batch
    /// before it archived).
    async fn consume(
        &self,
        consumer: PullConsumer,
        shutdown: CancellationToken,
        ready: CancellationToken,
    ) {
        let mut handled: Option<Handled<S::Output>> = None;
        'reconnect: while !shutdown.is_cancelled() {
            let mut messages = match consumer
                .stream()
                .max_messages_per_batch(self.options.batch_size)
                .heartbeat(Duration::from_secs(5))
                .expires(Duration::from_secs(30))
                .messages()
                .await
            {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(stage = S::NAME, error = %e, "cannot pull; retrying in 1s");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            ready.cancel();
            loop {
                let previous = handled.take();
                let (_, next) = tokio::join!(
                    async {
                        if let Some(previous) = previous {
                            self.settle(previous).await;
                        }
                    },
                    async {
                        let batch = self.next_batch(&mut messages, &shutdown).await?;
                        Ok::<_, NoBatch>(self.process(batch).await)
                    },
                );
                match next {
                    Ok(batch) => handled = batch,
                    Err(NoBatch::Interrupted) => {}
                    Err(NoBatch::Shutdown) => {
                        release_prefetched(&mut messages).await;
                        break 'reconnect;
                    }
                    Err(NoBatch::Reconnect) => continue 'reconnect,
                }
            }
        }
        // Not raced against shutdown: a batch once taken is finished.
        if let Some(last) = handled {
            self.settle(last).await;
        }
    }

    /// Waits for the next batch: its first message, then more until the batch
    /// is full or the linger ends.
    async fn next_batch(
        &self,
        messages: &mut async_nats::jetstream::consumer::pull::Stream,
        shutdown: &CancellationToken,
    ) -> Result<Vec<jetstream::Message>, NoBatch> {
        let first = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return Err(NoBatch::Shutdown),
            next = messages.next() => next,
        };
        let mut batch = match first {
            Some(Ok(msg)) => vec![msg],
            Some(Err(e)) => {
                tracing::warn!(stage = S::NAME, error = %e, "pull interrupted");
                return Err(NoBatch::Interrupted);
            }
            None => return Err(NoBatch::Reconnect),
        };
        let deadline = Instant::now() + self.options.linger;
        while batch.len() < self.options.batch_size {
            let next = if self.options.linger.is_zero() {
                messages.next().now_or_never().flatten()
            } else {
                tokio::time::timeout_at(deadline, messages.next())
                    .await
                    .ok()
                    .flatten()
            };
            match next {
                Some(Ok(msg)) => batch.push(msg),
                Some(Err(e)) => {
                    tracing::warn!(stage = S::NAME, error = %e, "pull interrupted");
                    break;
                }
                None => break,
            }
        }
        Ok(batch)
    }

    /// Decodes a batch and has the stage handle it; what is left to do is
    /// settling it. `None` when nothing in it reached the stage.
    async fn process(&self, batch: Vec<jetstream::Message>) -> Option<Handled<S::Output>> {
        let started = std::time::Instant::now();
        let size = batch.len();
        let mut inputs = Vec::with_capacity(size);
        let mut deliveries = Vec::with_capacity(size);
        for msg in batch {
            let (stream_seq, delivered, published) = match msg.info() {
                Ok(info) => (
                    info.stream_sequence,
                    info.delivered.max(1) as u64,
                    chrono::DateTime::from_timestamp_nanos(
                        info.published.unix_timestamp_nanos() as i64
                    ),
                ),
                Err(e) => {
                    tracing::warn!(stage = S::NAME, error = %e, subject = %msg.subject, "not a JetStream message; ignored");
                    continue;
                }
            };
            let tenant = self
                .ns
                .tenant_of(msg.subject.as_str())
                .unwrap_or("unknown")
                .to_string();
            events::Received {
                stage: S::NAME,
                tenant: &tenant,
            }
            .emit();
            let pulled = Pulled {
                msg,
                tenant,
                stream_seq,
                delivered,
            };
            if delivered > self.options.max_deliver {
                let reason = format!(
                    "delivered {delivered} times without being settled (the stage crashed or timed out while handling it)"
                );
                self.dead_letter(&pulled, &reason).await;
                continue;
            }
            match self.stage.decode(&pulled.msg.payload) {
                Ok(input) => {
                    let replayed = pulled
                        .msg
                        .headers
                        .as_ref()
                        .is_some_and(|h| h.get(dlq::HEADER_REPLAY).is_some());
                    deliveries.push(Delivery {
                        input,
                        tenant: pulled.tenant.clone(),
                        stream_seq,
                        delivered,
                        replayed,
                        published,
                    });
                    inputs.push(pulled);
                }
                Err(reason) => {
                    self.dead_letter(&pulled, &format!("undecodable: {reason}"))
                        .await
                }
            }
        }
        let handled = if deliveries.is_empty() {
            None
        } else {
            let logic_started = std::time::Instant::now();
            let outcomes = self.handle_in_progress(deliveries, &inputs).await;
            Some((outcomes, logic_started.elapsed()))
        };
        match handled {
            Some((outcomes, logic)) => Some(Handled {
                inputs,
                outcomes,
                size,
                logic,
                started,
            }),
            None => {
                events::BatchHandled {
                    stage: S::NAME,
                    size,
                    logic: Duration::ZERO,
                    elapsed: started.elapsed(),
                }
                .emit();
                None
            }
        }
    }

    /// [`Self::handle`], telling JetStream every third of the ack wait that
    /// the batch is still being worked on, for at most
    /// [`IN_PROGRESS_FOR_AT_MOST`] ack waits.
    async fn handle_in_progress(
        &self,
        deliveries: Vec<Delivery<S::Input>>,
        inputs: &[Pulled],
    ) -> Vec<Outcome<S::Output>> {
        let ack_wait = self.options.ack_wait;
        let handling = self.handle(deliveries);
        if ack_wait.is_zero() {
            return handling.await;
        }
        tokio::pin!(handling);
        let until = Instant::now() + ack_wait * IN_PROGRESS_FOR_AT_MOST;
        let every = ack_wait / 3;
        let mut next = Instant::now() + every;
        loop {
            tokio::select! {
                outcomes = &mut handling => return outcomes,
                _ = tokio::time::sleep_until(next), if next < until => {
                    for input in inputs {
                        if let Err(e) = input.msg.ack_with(AckKind::Progress).await {
                            tracing::debug!(stage = S::NAME, error = %e, "in-progress ack failed");
                        }
                    }
                    next += every;
                }
            }
        }
    }

    /// Calls the stage in its own task so that a panic costs one retry of the
    /// batch, not the process.
    async fn handle(&self, deliveries: Vec<Delivery<S::Input>>) -> Vec<Outcome<S::Output>> {
        let count = deliveries.len();
        let stage = self.stage.clone();
        let outcomes = tokio::spawn(async move { stage.handle(&deliveries).await }).await;
        match outcomes {
            Ok(outcomes) if outcomes.len() == count => outcomes,
            Ok(outcomes) => {
                let reason = format!(
                    "stage returned {} outcomes for {count} inputs",
                    outcomes.len()
                );
                tracing::error!(stage = S::NAME, %reason, "stage broke its contract");
                retry_all(&reason, count)
            }
            Err(e) => {
                let reason = format!("stage failed: {e}");
                tracing::error!(stage = S::NAME, %reason, "stage panicked");
                retry_all(&reason, count)
            }
        }
    }

    /// Publishes a handled batch's outputs and settles each input.
    async fn settle(&self, handled: Handled<S::Output>) {
        let Handled {
            inputs,
            outcomes,
            size,
            logic,
            started,
        } = handled;
        // Publish every output of the batch at once, then wait for all acks.
        let mut pending = Vec::new();
        let mut owners = Vec::new();
        for (index, outcome) in outcomes.iter().enumerate() {
            if let Outcome::Emit(outputs) = outcome {
                for output in outputs {
                    owners.push(index);
                    pending.push(self.publish_output(output));
                }
            }
        }
        let mut failed: Vec<Option<String>> = vec![None; inputs.len()];
        for (index, result) in owners.into_iter().zip(join_all(pending).await) {
            if let Err(reason) = result {
                failed[index].get_or_insert(reason);
            }
        }

        for ((input, outcome), publish_failure) in inputs.iter().zip(outcomes).zip(failed) {
            let tenant = input.tenant.as_str();
            match (outcome, publish_failure) {
                (Outcome::Emit(_), Some(reason)) => {
                    self.retry(input, &format!("publishing output: {reason}"))
                        .await
                }
                (Outcome::Emit(outputs), None) => {
                    events::Emitted {
                        stage: S::NAME,
                        tenant,
                        count: outputs.len(),
                    }
                    .emit();
                    ack(input).await;
                }
                (Outcome::Drop(reason), _) => {
                    events::Dropped {
                        stage: S::NAME,
                        tenant,
                        reason: &reason,
                    }
                    .emit();
                    ack(input).await;
                }
                (Outcome::Retry(reason), _) => self.retry(input, &reason).await,
                (Outcome::Reject(reason), _) => self.dead_letter(input, &reason).await,
            }
        }
        events::BatchHandled {
            stage: S::NAME,
            size,
            logic,
            elapsed: started.elapsed(),
        }
        .emit();
    }

    async fn publish_output(&self, output: &S::Output) -> Result<(), String> {
        let Some(topic) = S::OUTPUT else {
            return Err(format!("stage {} has no output topic", S::NAME));
        };
        let payload = serde_json::to_vec(output).map_err(|e| e.to_string())?;
        let msg = jetstream::message::PublishMessage::build()
            .payload(payload.into())
            .message_id(output.msg_id());
        let subject = self.ns.subject(topic, output.tenant());
        self.js
            .send_publish(subject, msg)
            .await
            .map_err(|e| e.to_string())?
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn retry(&self, input: &Pulled, reason: &str) {
        if input.delivered >= self.options.max_deliver {
            let reason = format!(
                "retries exhausted: after {} deliveries: {reason}",
                input.delivered
            );
            self.dead_letter(input, &reason).await;
            return;
        }
        let delay = retry::redelivery_delay(
            self.options.retry_initial,
            self.options.retry_max,
            input.delivered,
        );
        events::Retried {
            stage: S::NAME,
            tenant: &input.tenant,
            reason,
            delay,
            deliveries: input.delivered,
        }
        .emit();
        if let Err(e) = input.msg.ack_with(AckKind::Nak(Some(delay))).await {
            tracing::warn!(stage = S::NAME, error = %e, "nak failed; JetStream redelivers after ack_wait");
        }
    }

    /// Copies the input to the DLQ, then acks it. If the DLQ cannot be written
    /// the input is nak'ed instead: it is never acked without a trace.
    async fn dead_letter(&self, input: &Pulled, reason: &str) {
        let original_msg_id = input
            .msg
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.as_str().to_string());
        let letter = DeadLetter {
            stage: S::NAME,
            tenant: &input.tenant,
            reason,
            deliveries: input.delivered,
            original_subject: input.msg.subject.as_str(),
            stream_seq: input.stream_seq,
            original_msg_id: original_msg_id.as_deref(),
            payload: input.msg.payload.clone(),
        };
        match dlq::publish(&self.js, &self.ns, letter).await {
            Ok(()) => {
                events::Rejected {
                    stage: S::NAME,
                    tenant: &input.tenant,
                    reason,
                    deliveries: input.delivered,
                    stream_seq: input.stream_seq,
                }
                .emit();
                ack(input).await;
            }
            Err(e) => {
                tracing::error!(stage = S::NAME, error = %e, "cannot write the DLQ; will retry the input");
                let delay = retry::redelivery_delay(
                    self.options.retry_initial,
                    self.options.retry_max,
                    input.delivered,
                );
                if let Err(e) = input.msg.ack_with(AckKind::Nak(Some(delay))).await {
                    tracing::warn!(stage = S::NAME, error = %e, "nak failed; JetStream redelivers after ack_wait");
                }
            }
        }
    }
}

/// Hands back messages the client pulled ahead but the stage never saw, so
/// another replica gets them now instead of after `ack_wait`.
async fn release_prefetched(messages: &mut async_nats::jetstream::consumer::pull::Stream) {
    while let Some(Some(Ok(msg))) = messages.next().now_or_never() {
        let _ = msg.ack_with(AckKind::Nak(None)).await;
    }
}

fn retry_all<O>(reason: &str, count: usize) -> Vec<Outcome<O>> {
    (0..count)
        .map(|_| Outcome::Retry(reason.to_string()))
        .collect()
}

async fn ack(input: &Pulled) {
    if let Err(e) = input.msg.ack().await {
        // The effect is idempotent: a lost ack means one harmless redelivery.
        tracing::warn!(error = %e, stream_seq = input.stream_seq, "ack failed");
    }
}
