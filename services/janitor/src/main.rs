//! `hindsight-janitor`: the scheduled maintenance of memory as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("janitor", async |ctx| hindsight_janitor::tasks(ctx)).await
}
