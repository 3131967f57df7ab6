//! What the integration tests share: a throw-away deployment on the real NATS
//! and Postgres of this machine (its own namespace and database, so tests run
//! in parallel), and helpers to run stages in-process, publish like any agent,
//! and read back what happened.

use std::{future::Future, sync::Arc, time::Duration};

use async_nats::jetstream::{self, stream::Stream};
use hindsight_core::{Stage, Topic};
use hindsight_shared::{
    Config,
    dlq::{self, Selection},
    ops_http::Readiness,
    runner,
    sandbox::Sandbox,
    service::Context,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Every stage's input stream (base name) and consumer, in pipeline order.
pub const STAGE_CONSUMERS: [(&str, &str); 4] = [
    ("TURNS", "filter"),
    ("KEPT", "extract"),
    ("FACTS", "embed"),
    ("EMBEDDED", "persist"),
];

/// Stdout of a command that must have succeeded (else its stderr, in the panic).
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An HTTP client for the gateway (built as every client in hindsight is, with its TLS provider).
pub fn http() -> reqwest::Client {
    hindsight_core::http_client::client().expect("an HTTP client")
}

pub mod canary;
pub mod fact;
pub mod fake_llm;
pub mod mcp;
pub mod prometheus;
pub mod seed;
pub mod stack;

pub use hindsight_shared;

/// A sandboxed deployment: namespace, database and data directory of its own.
pub struct Deployment {
    pub sandbox: Sandbox,
    pub ctx: Context,
}

/// A stage running in this process, stoppable gracefully or by abort.
pub struct RunningStage {
    pub shutdown: CancellationToken,
    pub handle: JoinHandle<()>,
}

impl RunningStage {
    /// Stops like SIGTERM: the batch in flight is finished first.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.handle.await;
    }

    /// Stops like `kill -9`: whatever was in flight is abandoned mid-way.
    pub async fn abort(self) {
        self.handle.abort();
        let _ = self.handle.await;
    }
}

impl Deployment {
    /// A fresh deployment. `adjust` may change the configuration (ack wait,
    /// batch size…) before streams and migrations are applied.
    pub async fn new(label: &str, adjust: impl FnOnce(&mut Config)) -> Self {
        let base = Config::from_env().expect("the environment holds a valid configuration");
        let mut sandbox = Sandbox::new(&base, label);
        sandbox.config.embed.model_dir = model_dir();
        sandbox.config.screen_model_dir = e5_dir();
        // The encoder model's first fit embeds some 3,000 examples: only the
        // tests about the screen turn it on (and warm it first).
        sandbox.config.screen_encoder = false;
        sandbox.config.retry_initial = Duration::from_millis(100);
        sandbox.config.retry_max = Duration::from_secs(1);
        adjust(&mut sandbox.config);
        let ctx = Context::boot(sandbox.config.clone())
            .await
            .expect("NATS and Postgres are reachable (see README: the test command starts them)");
        Self { sandbox, ctx }
    }

    pub fn config(&self) -> &Config {
        &self.ctx.config
    }

    /// Starts a stage and waits until it consumes.
    pub async fn start<S: Stage>(&self, stage: S) -> RunningStage {
        let shutdown = CancellationToken::new();
        let mut readiness = Readiness::default();
        let ready = readiness.stage(S::NAME);
        let (bus, config, token) = (
            self.ctx.bus.clone(),
            self.ctx.config.clone(),
            shutdown.clone(),
        );
        let handle = tokio::spawn(async move {
            if let Err(e) = runner::run(Arc::new(stage), &bus, &config, token, ready).await {
                panic!("stage {} failed: {e}", S::NAME);
            }
        });
        tokio::time::timeout(Duration::from_secs(30), readiness.wait())
            .await
            .expect("the stage starts consuming within 30 s");
        RunningStage { shutdown, handle }
    }

    /// Publishes raw bytes with a plain NATS publish, as any agent can.
    pub async fn publish_raw(&self, subject_tenant: &str, payload: Vec<u8>) {
        let subject = self
            .ctx
            .config
            .namespace
            .subject(Topic::Turns, subject_tenant);
        self.ctx
            .bus
            .client
            .publish(subject, payload.into())
            .await
            .expect("publish");
    }

    pub async fn flush(&self) {
        self.ctx.bus.client.flush().await.expect("flush");
    }

    pub async fn stream(&self, base: &str) -> Stream {
        self.ctx
            .bus
            .js
            .get_stream(self.ctx.config.namespace.stream_name(base))
            .await
            .expect("stream exists")
    }

    /// Messages a stream holds now.
    pub async fn stream_messages(&self, base: &str) -> u64 {
        self.stream(base)
            .await
            .info()
            .await
            .expect("stream info")
            .state
            .messages
    }

    /// Every message a stream holds, read by sequence (work-queue streams
    /// refuse a second consumer, and reading by sequence changes nothing).
    pub async fn read_stream(&self, base: &str) -> Vec<jetstream::message::StreamMessage> {
        let mut stream = self.stream(base).await;
        let state = stream.info().await.expect("stream info").state.clone();
        let mut out = Vec::new();
        if state.messages == 0 {
            return out;
        }
        for seq in state.first_sequence..=state.last_sequence {
            if let Ok(msg) = stream.get_raw_message(seq).await {
                out.push(msg);
            }
        }
        out
    }

    /// Every dead letter.
    pub async fn dead_letters(&self) -> Vec<dlq::Entry> {
        dlq::list(
            &self.ctx.bus.js,
            &self.ctx.config.namespace,
            &Selection::default(),
        )
        .await
        .expect("DLQ readable")
    }

    /// Pending plus unacknowledged messages of a stage's consumer.
    pub async fn backlog(&self, stream: &str, consumer: &str) -> u64 {
        let stream = self.stream(stream).await;
        let info = stream.consumer_info(consumer).await.expect("consumer info");
        info.num_pending + info.num_ack_pending as u64
    }

    /// Waits until every stage's consumer has settled everything (within
    /// `within`): counters are recorded before the ack, so counts are final then.
    pub async fn settled(&self, within: Duration) {
        eventually("every consumer is settled", within, || async {
            let mut backlog = 0;
            for (stream, consumer) in STAGE_CONSUMERS {
                backlog += self.backlog(stream, consumer).await;
            }
            backlog == 0
        })
        .await;
    }

    /// The environment that points a `hindsight` process at this deployment.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let config = self.config();
        vec![
            ("HINDSIGHT_NAMESPACE", config.namespace.to_string()),
            ("HINDSIGHT_DATABASE_URL", config.database_url.clone()),
            ("HINDSIGHT_NATS_URL", config.nats_url.clone()),
            (
                "HINDSIGHT_DATA_DIR",
                config.data_dir.to_string_lossy().into_owned(),
            ),
            (
                "HINDSIGHT_SCREEN_ENCODER",
                if config.screen_encoder { "on" } else { "off" }.into(),
            ),
            (
                "HINDSIGHT_SCREEN_MODEL_DIR",
                config.screen_model_dir.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// The `hindsight` CLI at `bin` (a test's `CARGO_BIN_EXE_hindsight`),
    /// pointed at this deployment.
    pub fn cli(&self, bin: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(bin);
        command.envs(self.env());
        command
    }

    /// Removes the namespace's streams, the database and the data directory.
    pub async fn remove(self) {
        self.sandbox
            .remove(&self.ctx.bus)
            .await
            .expect("sandbox removed");
    }
}

/// The local embedding model (`./ops/setup.sh` fetches it), unless
/// `HINDSIGHT_EMBED_MODEL_DIR` names another.
pub fn model_dir() -> std::path::PathBuf {
    std::env::var_os("HINDSIGHT_EMBED_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2")
        })
}

/// Where `./ops/setup.sh` puts multilingual-e5-small, the screen's encoder
/// model; `HINDSIGHT_SCREEN_MODEL_DIR` names another.
pub fn e5_dir() -> std::path::PathBuf {
    std::env::var_os("HINDSIGHT_SCREEN_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../models/multilingual-e5-small")
        })
}

/// Polls `check` until it returns true, or panics with `what` after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
