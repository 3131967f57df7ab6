//! `hindsight-gateway`: recall over HTTP, NATS and MCP as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // First: it may execute the process again with the model threads' setting.
    hindsight_embedder::threads::share_cores();
    tokio::runtime::Runtime::new()?.block_on(hindsight_shared::service::main(
        "gateway",
        async |ctx| {
            let index = if ctx.config.index.is_shared() {
                Some(hindsight_index::open(
                    &ctx.config.index,
                    &ctx.config.data_dir,
                )?)
            } else {
                None
            };
            hindsight_gateway::tasks(ctx, index).await
        },
    ))
}
