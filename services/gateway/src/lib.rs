//! The gateway: recall and memory administration for agents and operators,
//! over HTTP ([`http`]), NATS request-reply ([`nats`]) and MCP ([`mcp`]). The
//! operations live once, in [`api`]. [`ops`] is the operators' status page
//! and the gauges it polls.

pub mod api;
pub mod error;
pub mod http;
pub mod mcp;
pub mod nats;
pub mod ops;
pub mod remote;

use std::{sync::Arc, time::Duration};

use hindsight_index::VectorIndex;
use hindsight_recall::{Recaller, WorkingMemory};
use hindsight_shared::service::{self, Context, StageTask};

/// How long `hindsight mcp` waits for the running gateway before recalling in-process.
pub const REMOTE_RECALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The recaller of a process: the given index (shared with persist in one
/// process) or none, the configured embedder, working memory.
pub async fn recaller(
    ctx: &Context,
    index: Option<Arc<dyn VectorIndex>>,
) -> anyhow::Result<Recaller> {
    let embedder = hindsight_embedder::from_config(&ctx.config.embed)?;
    let working = WorkingMemory::open(&ctx.bus.js, &ctx.config.namespace).await?;
    Ok(Recaller::new(
        ctx.store.clone(),
        index,
        Some(embedder),
        ctx.config.namespace.clone(),
        &ctx.config.recall,
    )
    .with_working_memory(working))
}

/// The gateway's tasks, in its own process and in `hindsight up` alike: the
/// HTTP API and `/mcp` on the process' server, and the NATS recall and erase
/// responder.
pub async fn tasks(
    ctx: &Context,
    index: Option<Arc<dyn VectorIndex>>,
) -> anyhow::Result<Vec<StageTask>> {
    if index.is_none() {
        tracing::warn!(
            "the gateway has no vector index (the embedded index belongs to the persist process; set QDRANT_URL to share one): recall answers from keyword search, degraded"
        );
    }
    let gateway = api::Gateway::new(
        recaller(ctx, index).await?,
        ctx.bus.clone(),
        ctx.config.namespace.clone(),
    )
    .zoned(ctx.config.time_zones.clone())
    .screening(hindsight_screen::screen::Settings::from_config(&ctx.config))
    .erasing(
        hindsight_erase::Eraser::open(
            ctx.store.clone(),
            ctx.bus.js.clone(),
            ctx.config.namespace.clone(),
            &ctx.config.data_dir,
        )
        .await?,
        ctx.config.operator_key.as_deref(),
    );
    let mcp = mcp::router(gateway.clone(), &ctx.config.mcp_allowed_hosts);
    let observer = ops::Observer::new(
        ctx.bus.js.clone(),
        ctx.config.namespace.clone(),
        ctx.store.clone(),
    );
    let poll_every = ctx.config.ops_poll;
    // `/ops` is for operators, like `/metrics`: outside the key authentication.
    let routes =
        http::router(gateway.clone(), Some(mcp)).merge(ops::router(observer.clone(), poll_every));
    Ok(vec![service::serving(
        "gateway",
        routes,
        move |ready, shutdown| {
            tokio::spawn(ops::poll(observer, poll_every, shutdown.clone()));
            nats::serve(gateway, ready, shutdown)
        },
    )])
}
