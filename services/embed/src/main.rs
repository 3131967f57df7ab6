//! `hindsight-embed`: the embed stage as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // First: it may execute the process again with the model threads' setting.
    hindsight_embedder::threads::share_cores();
    tokio::runtime::Runtime::new()?
        .block_on(hindsight_shared::service::main("embed", async |ctx| {
            Ok(hindsight_embed::tasks(ctx)?)
        }))
}
