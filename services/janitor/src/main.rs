//! `hindsight-janitor`: the scheduled maintenance of memory as its own process.

use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("janitor", |ctx| Ok(vec![hindsight_janitor::task(ctx)?])).await
}
