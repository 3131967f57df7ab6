//! `hindsight up` and `hindsight run STAGE`.

use hindsight_shared::{
    service::{self, Context},
    shutdown,
};

use crate::stages::{self, StageName};

async fn start(process: &'static str, names: &[StageName], announce: bool) -> anyhow::Result<()> {
    let config = super::setup_service()?;
    let _ = hindsight_shared::telemetry::prometheus();
    config.log_startup(process);
    let ctx = Context::boot(config).await?;
    let tasks = stages::tasks(names, &ctx).await?;
    let running = service::start(&ctx, tasks, shutdown::on_signal()).await?;
    let readiness = running.readiness.clone();
    let addr = running.http_addr;
    let stopped = running.shutdown.clone();
    tokio::select! {
        _ = readiness.wait() => {
            tracing::info!(http = %addr, "every stage is consuming");
            if announce {
                println!("ready: http://{addr}");
            }
        }
        _ = stopped.cancelled() => {}
    }
    running.wait().await?;
    Ok(())
}

pub async fn up() -> anyhow::Result<()> {
    start("up", stages::ALL, true).await
}

pub async fn run(stage: StageName) -> anyhow::Result<()> {
    start(stage.name(), &[stage], false).await
}
