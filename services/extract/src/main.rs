//! `hindsight-extract`: the extract stage as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("extract", async |ctx| Ok(hindsight_extract::tasks(ctx)?)).await
}
