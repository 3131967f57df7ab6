//! `hindsight-gateway`: recall over HTTP, NATS and MCP as its own process.

use hindsight_shared::{
    config::Config,
    service::{self, Context},
    shutdown, telemetry,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::from_env()?;
    telemetry::init_logs(&config);
    let _ = telemetry::prometheus();
    config.log_startup("gateway");
    let ctx = Context::boot(config).await?;
    // A Qdrant server can be shared; the embedded index belongs to persist.
    let index = match &ctx.config.index.qdrant_url {
        Some(_) => Some(hindsight_index::open(
            &ctx.config.index,
            &ctx.config.data_dir,
        )?),
        None => None,
    };
    let task = hindsight_gateway::task(&ctx, index).await?;
    let running = service::start(&ctx, vec![task], shutdown::on_signal()).await?;
    tracing::info!(http = %running.http_addr, "gateway started");
    running.wait().await?;
    Ok(())
}
