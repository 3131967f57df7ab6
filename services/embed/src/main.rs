//! `hindsight-embed`: the embed stage as its own process.

use std::sync::Arc;

use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("embed", |ctx| {
        let embedder = hindsight_embed::embedder(&ctx.config.embed)?;
        Ok(vec![service::stage(Arc::new(
            hindsight_embed::EmbedStage::new(embedder, &ctx.config),
        ))])
    })
    .await
}
