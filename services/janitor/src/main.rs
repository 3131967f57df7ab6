//! `hindsight-janitor`: the scheduled maintenance of memory as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // First: it may execute the process again with the model threads' setting.
    hindsight_embedder::threads::share_cores();
    tokio::runtime::Runtime::new()?
        .block_on(hindsight_shared::service::main("janitor", async |ctx| {
            hindsight_janitor::tasks(ctx)
        }))
}
