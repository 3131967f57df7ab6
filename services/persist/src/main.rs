//! `hindsight-persist`: the persist stage (with its index reconciler) as its own process.

use std::{sync::Arc, time::Duration};

use hindsight_persist::{PersistStage, reconcile};
use hindsight_shared::service;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service::main("persist", |ctx| {
        let index = hindsight_index::open(&ctx.config.index, &ctx.config.data_dir)?;
        let stage = PersistStage::new(
            ctx.store.clone(),
            index.clone(),
            ctx.config.namespace.clone(),
            ctx.config.dedupe_threshold,
        );
        let (store, ns) = (ctx.store.clone(), ctx.config.namespace.clone());
        Ok(vec![
            service::stage(Arc::new(stage)),
            service::background("reconciler", move |shutdown| {
                reconcile::run(store, index, ns, Duration::from_secs(2), shutdown)
            }),
        ])
    })
    .await
}
