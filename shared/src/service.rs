//! Booting a hindsight process: configuration, logs, NATS, streams, Postgres,
//! the operator HTTP server, and the stages it runs — the same path for a
//! single-stage service and for `hindsight up`.

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use hindsight_core::stage::Stage;
use hindsight_store::{Store, StoreError};

use crate::{
    bus::{Bus, BusError},
    config::Config,
    ops_http::{self, Readiness},
    runner::{self, RunnerError},
    shutdown,
    streams::{self, StreamsError},
    telemetry,
};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    Streams(#[from] StreamsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot serve HTTP on {addr}: {reason}")]
    Http { addr: SocketAddr, reason: String },
    #[error("stage {stage}: {source}")]
    Stage {
        stage: &'static str,
        source: RunnerError,
    },
    #[error("{task}: {reason}")]
    Task { task: &'static str, reason: String },
}

/// What every stage of a process shares.
#[derive(Clone)]
pub struct Context {
    pub config: Config,
    pub bus: Bus,
    pub store: Store,
}

impl Context {
    /// Connects to NATS and Postgres, applies the stream files and the migrations.
    pub async fn boot(config: Config) -> Result<Self, ServiceError> {
        let bus = Bus::connect(&config).await?;
        streams::apply(&bus.js, &config).await?;
        let store = Store::connect(&config.database_url, config.db_pool).await?;
        Ok(Self { config, bus, store })
    }
}

type StageFuture = Pin<Box<dyn Future<Output = Result<(), ServiceError>> + Send>>;

/// A stage ready to be started by [`start`].
pub struct StageTask {
    pub name: &'static str,
    run: Box<dyn FnOnce(Context, CancellationToken, CancellationToken) -> StageFuture + Send>,
    /// HTTP routes the task serves beside the operator ones (the gateway's API).
    routes: Option<axum::Router>,
}

/// Wraps a stage so that [`start`] can run it next to others.
pub fn stage<S: Stage>(stage: Arc<S>) -> StageTask {
    StageTask {
        name: S::NAME,
        run: Box::new(move |ctx, shutdown, ready| {
            Box::pin(async move {
                runner::run(stage, &ctx.bus, &ctx.config, shutdown, ready)
                    .await
                    .map_err(|source| ServiceError::Stage {
                        stage: S::NAME,
                        source,
                    })
            })
        }),
        routes: None,
    }
}

/// A background task that runs beside the stages (a reconciler, a scheduler)
/// until `shutdown` fires; it counts as ready at once.
pub fn background<F, Fut>(name: &'static str, run: F) -> StageTask
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    StageTask {
        name,
        run: Box::new(move |_ctx, shutdown, ready| {
            Box::pin(async move {
                ready.cancel();
                run(shutdown).await;
                Ok(())
            })
        }),
        routes: None,
    }
}

/// A task that serves HTTP routes on the process' server and runs `run`
/// (which cancels `ready` once it serves) until `shutdown` fires; an error
/// stops the process.
pub fn serving<F, Fut>(name: &'static str, routes: axum::Router, run: F) -> StageTask
where
    F: FnOnce(CancellationToken, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    StageTask {
        name,
        run: Box::new(move |_ctx, shutdown, ready| {
            Box::pin(async move {
                run(ready, shutdown).await.map_err(|e| ServiceError::Task {
                    task: name,
                    reason: format!("{e:#}"),
                })
            })
        }),
        routes: Some(routes),
    }
}

/// A process with its stages and its HTTP server running.
pub struct Running {
    pub http_addr: SocketAddr,
    pub readiness: Readiness,
    pub shutdown: CancellationToken,
    tasks: JoinSet<Result<(), ServiceError>>,
}

impl Running {
    /// Waits for every stage to stop (after `shutdown` fires, or on a fatal
    /// error, which stops the others too).
    pub async fn wait(mut self) -> Result<(), ServiceError> {
        let mut first_error = None;
        while let Some(joined) = self.tasks.join_next().await {
            let result = match joined {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "a stage task failed");
                    Ok(())
                }
            };
            if let Err(e) = result {
                tracing::error!(error = %e, "stage stopped with an error; stopping the process");
                self.shutdown.cancel();
                first_error.get_or_insert(e);
            }
        }
        self.shutdown.cancel();
        first_error.map_or(Ok(()), Err)
    }
}

/// Starts the stages and the operator HTTP server.
pub async fn start(
    ctx: &Context,
    stages: Vec<StageTask>,
    shutdown: CancellationToken,
) -> Result<Running, ServiceError> {
    let mut readiness = Readiness::default();
    let mut tasks = JoinSet::new();
    let mut router = axum::Router::new();
    for task in stages {
        if let Some(routes) = task.routes {
            router = router.merge(routes);
        }
        let ready = readiness.stage(task.name);
        tasks.spawn((task.run)(ctx.clone(), shutdown.clone(), ready));
    }
    let addr = ctx.config.http_addr;
    let http_addr = ops_http::serve(
        addr,
        router.merge(ops_http::router(readiness.clone())),
        shutdown.clone(),
    )
    .await
    .map_err(|e| ServiceError::Http {
        addr,
        reason: e.to_string(),
    })?;
    Ok(Running {
        http_addr,
        readiness,
        shutdown,
        tasks,
    })
}

/// The whole `main` of a service binary: `build` makes its tasks (the same
/// function `hindsight up` calls for that service).
pub async fn main(
    process: &'static str,
    build: impl AsyncFnOnce(&Context) -> anyhow::Result<Vec<StageTask>>,
) -> anyhow::Result<()> {
    let config = Config::from_env()?;
    telemetry::init_logs(&config);
    let _ = telemetry::prometheus();
    config.log_startup(process);
    let ctx = Context::boot(config).await?;
    let stages = build(&ctx).await?;
    let running = start(&ctx, stages, shutdown::on_signal()).await?;
    tracing::info!(process, http = %running.http_addr, "started");
    running.wait().await?;
    Ok(())
}
