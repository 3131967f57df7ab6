//! `hindsight-gateway`: recall over HTTP, NATS and MCP as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("gateway", async |ctx| {
        // A Qdrant server can be shared; the embedded index belongs to persist.
        let index = match &ctx.config.index.qdrant_url {
            Some(_) => Some(hindsight_index::open(
                &ctx.config.index,
                &ctx.config.data_dir,
            )?),
            None => None,
        };
        hindsight_gateway::tasks(ctx, index).await
    })
    .await
}
