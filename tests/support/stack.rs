//! The whole system in this process, as `hindsight up` runs it: every stage,
//! the reconciler and the gateway (HTTP, NATS, MCP over HTTP), on the
//! deployment's sandbox, with the HTTP server on a free port.

use std::{sync::Arc, time::Duration};

use hindsight_index::VectorIndex;
use hindsight_shared::service::{self, Running};
use tokio_util::sync::CancellationToken;

use crate::{Deployment, eventually};

pub struct Stack {
    pub running: Running,
    pub shutdown: CancellationToken,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
}

impl Stack {
    /// Starts everything on `index` and waits until every part is ready.
    pub async fn start(d: &Deployment, index: Arc<dyn VectorIndex>) -> Self {
        // As `hindsight up` does: the recorder is installed on first use, and
        // whatever is counted before then is lost to `/metrics`.
        let _ = hindsight_shared::telemetry::prometheus();
        let ctx = &d.ctx;
        // Each service's own tasks, as its binary and `hindsight up` start them.
        let mut tasks = hindsight_filter::tasks(ctx);
        tasks.extend(hindsight_extract::tasks(ctx).expect("extract"));
        tasks.extend(
            hindsight_embed::tasks(ctx).expect("the local model (./ops/setup.sh fetches it)"),
        );
        tasks.extend(hindsight_persist::tasks(ctx, index.clone()));
        tasks.extend(
            hindsight_gateway::tasks(ctx, Some(index))
                .await
                .expect("gateway"),
        );
        let shutdown = CancellationToken::new();
        let running = service::start(ctx, tasks, shutdown.clone())
            .await
            .expect("the stack starts");
        tokio::time::timeout(Duration::from_secs(60), running.readiness.wait())
            .await
            .expect("every part is ready within 60 s");
        let base_url = format!("http://{}", running.http_addr);
        Self {
            running,
            shutdown,
            base_url,
        }
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.running.wait().await;
    }
}

/// Waits until every published turn went through the filter, every kept turn
/// was extracted, every fact is in a memory and the index caught up.
pub async fn drained(d: &Deployment, turns: i64) {
    eventually("the pipeline drains", Duration::from_secs(120), || {
        let store = d.ctx.store.clone();
        async move {
            store
                .drained(usize::try_from(turns).unwrap_or(0))
                .await
                .unwrap_or(false)
        }
    })
    .await;
}
