//! `hindsight-filter`: the filter stage as its own process.

use std::sync::Arc;

use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("filter", |ctx| {
        let stage = Arc::new(hindsight_filter::from_config(
            &ctx.config,
            ctx.store.clone(),
        ));
        Ok(vec![service::stage(stage)])
    })
    .await
}
