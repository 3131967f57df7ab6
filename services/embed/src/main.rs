//! `hindsight-embed`: the embed stage as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("embed", async |ctx| Ok(hindsight_embed::tasks(ctx)?)).await
}
