//! `hindsight-extract`: the extract stage as its own process.

use std::sync::Arc;

use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("extract", |ctx| {
        let stage = hindsight_extract::from_config(&ctx.config, ctx.store.clone())?;
        Ok(vec![service::stage(Arc::new(stage))])
    })
    .await
}
