//! `hindsight-filter`: the filter stage as its own process.

use std::sync::Arc;

use hindsight_filter::FilterStage;
use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("filter", |ctx| {
        let stage = Arc::new(
            FilterStage::new(ctx.store.clone()).quarantining_at(ctx.config.screen_threshold),
        );
        Ok(vec![service::stage(stage)])
    })
    .await
}
