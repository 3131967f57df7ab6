//! `hindsight-filter`: the filter stage as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("filter", async |ctx| Ok(hindsight_filter::tasks(ctx))).await
}
