//! The janitor: one database's maintenance, with what a run needs (the
//! policy, where purge exports go, the bus for summaries, the LLM for
//! consolidation, the embedder for repairs). Runs are in [`run`](crate::run), their steps in
//! [`exec`](crate::exec).

use std::{path::PathBuf, sync::Arc};

use hindsight_core::{Namespace, settings::EmbedConfig};
use hindsight_embedder::Embedder;
use hindsight_store::Store;
use tokio::sync::OnceCell;

use crate::policy::Policy;

/// Rows read and written per chunk (one transaction each in a real run).
pub const CHUNK: i64 = 5000;

/// Runs maintenance against one database.
#[derive(Clone)]
pub struct Janitor {
    pub(crate) store: Store,
    pub(crate) policy: Policy,
    pub(crate) exports: PathBuf,
    pub(crate) host: String,
    pub(crate) chunk: i64,
    pub(crate) bus: Option<(
        async_nats::Client,
        async_nats::jetstream::Context,
        Namespace,
    )>,
    pub(crate) working_ttl: std::time::Duration,
    pub(crate) llm: Option<std::sync::Arc<hindsight_llm::LlmClient>>,
    /// The embedder for the parts of a wrongly merged memory, loaded from
    /// `embed` when the repair step first needs it.
    embed: Option<EmbedConfig>,
    embedder: Arc<OnceCell<Option<Arc<dyn Embedder>>>>,
    pub(crate) crash_after_chunks: Option<usize>,
}

impl Janitor {
    /// A janitor writing purge exports under `data_dir/exports`.
    pub fn new(store: Store, policy: Policy, data_dir: &std::path::Path) -> Self {
        Self {
            store,
            policy,
            exports: hindsight_shared::exports::dir(data_dir),
            host: std::env::var("HOSTNAME")
                .unwrap_or_else(|_| format!("pid-{}", std::process::id())),
            chunk: CHUNK,
            bus: None,
            working_ttl: std::time::Duration::from_secs(3600),
            llm: None,
            embed: None,
            embedder: Arc::new(OnceCell::new()),
            crash_after_chunks: None,
        }
    }

    /// Publishes run summaries on `<ns>.events.maintenance` and counts
    /// expired working-memory keys through this connection.
    pub fn with_bus(
        mut self,
        client: async_nats::Client,
        js: async_nats::jetstream::Context,
        ns: Namespace,
        working_ttl: std::time::Duration,
    ) -> Self {
        self.bus = Some((client, js, ns));
        self.working_ttl = working_ttl;
        self
    }

    /// Writes consolidated summaries with this LLM (rules when it cannot answer).
    pub fn with_llm(mut self, llm: std::sync::Arc<hindsight_llm::LlmClient>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Embeds the parts of wrongly merged memories it splits with the
    /// embedder this configures, loaded when first needed.
    pub fn with_embed_config(mut self, config: EmbedConfig) -> Self {
        self.embed = Some(config);
        self
    }

    /// Embeds the parts of wrongly merged memories it splits with `embedder`.
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Arc::new(OnceCell::new_with(Some(Some(embedder))));
        self
    }

    /// The embedder for splits, if one is configured and loads.
    pub(crate) async fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        let config = self.embed.clone();
        self.embedder
            .get_or_init(|| async move {
                let config = config?;
                let loaded =
                    tokio::task::spawn_blocking(move || hindsight_embedder::from_config(&config))
                        .await;
                match loaded {
                    Ok(Ok(embedder)) => Some(embedder),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "no embedder: wrongly merged memories stay whole");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "loading the embedder failed");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// The name recorded on its runs (default: `HOSTNAME`, else the process id).
    pub fn with_host(mut self, host: &str) -> Self {
        self.host = host.to_string();
        self
    }

    /// Rows per chunk (tests use small chunks to stop a run midway).
    pub fn with_chunk(mut self, rows: i64) -> Self {
        self.chunk = rows.max(1);
        self
    }

    /// Test hook: stop (as if killed) right after this many chunks committed.
    pub fn crash_after_chunks(mut self, chunks: usize) -> Self {
        self.crash_after_chunks = Some(chunks);
        self
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}
