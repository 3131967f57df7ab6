//! `hindsight-gateway`: recall over HTTP, NATS and MCP as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("gateway", async |ctx| {
        let index = if ctx.config.index.is_shared() {
            Some(hindsight_index::open(
                &ctx.config.index,
                &ctx.config.data_dir,
            )?)
        } else {
            None
        };
        hindsight_gateway::tasks(ctx, index).await
    })
    .await
}
