//! `hindsight-persist`: the persist stage (with its index reconciler) as its own process.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hindsight_shared::service::main("persist", async |ctx| {
        let index = hindsight_index::open(&ctx.config.index, &ctx.config.data_dir)?;
        Ok(hindsight_persist::tasks(ctx, index))
    })
    .await
}
