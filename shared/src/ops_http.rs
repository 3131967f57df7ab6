//! The operator endpoints every hindsight process serves: `/healthz` (the
//! process is alive), `/readyz` (every stage it runs is consuming) and
//! `/metrics` (Prometheus).

use std::net::SocketAddr;

use axum::{Router, extract::State, http::StatusCode, routing::get};
use tokio_util::sync::CancellationToken;

/// Readiness: one token per stage, cancelled by the runner once it consumes.
#[derive(Clone, Default)]
pub struct Readiness {
    stages: Vec<(&'static str, CancellationToken)>,
}

impl Readiness {
    /// Registers a stage and returns the token its runner cancels when ready.
    pub fn stage(&mut self, name: &'static str) -> CancellationToken {
        let token = CancellationToken::new();
        self.stages.push((name, token.clone()));
        token
    }

    pub fn is_ready(&self) -> bool {
        self.stages.iter().all(|(_, t)| t.is_cancelled())
    }

    /// Waits until every registered stage is consuming.
    pub async fn wait(&self) {
        for (_, token) in &self.stages {
            token.cancelled().await;
        }
    }

    fn not_ready(&self) -> Vec<&'static str> {
        self.stages
            .iter()
            .filter(|(_, t)| !t.is_cancelled())
            .map(|(n, _)| *n)
            .collect()
    }
}

/// The operator routes, to be merged into a service's own router.
pub fn router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    if readiness.is_ready() {
        (StatusCode::OK, "ready\n".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", readiness.not_ready().join(", ")),
        )
    }
}

async fn metrics() -> String {
    let handle = crate::telemetry::prometheus();
    handle.run_upkeep();
    handle.render()
}

/// Binds `addr` and serves `router` until `shutdown` fires.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "http server failed");
        }
    });
    Ok(local)
}
