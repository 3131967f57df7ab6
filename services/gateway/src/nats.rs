//! Recall by NATS request-reply on `<ns>.recall.<tenant>`: the request is a
//! [`RecallRequest`] as JSON, the reply a [`RecallResponse`] or
//! `{"error": {"kind", "message"}}`. The tenant is the subject's last token, so
//! a NATS account's subject permissions decide who may ask for which tenant.
//! Replicas share the queue group `gateway`.

use futures::StreamExt;
use hindsight_core::{Namespace, ids::is_valid_tenant};
use hindsight_recall::RecallRequest;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{api::Gateway, error::ApiError};

/// Serves recall requests until `shutdown`.
pub async fn serve(
    gateway: Gateway,
    ready: CancellationToken,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let ns = gateway.namespace().clone();
    let subject = format!("{}.recall.*", ns);
    let mut requests = gateway
        .bus()
        .client
        .queue_subscribe(subject.clone(), "gateway".into())
        .await
        .map_err(|e| anyhow::anyhow!("cannot subscribe to {subject}: {e}"))?;
    tracing::info!(%subject, "answering recall requests over NATS");
    ready.cancel();
    loop {
        let msg = tokio::select! {
            m = requests.next() => match m { Some(m) => m, None => break },
            _ = shutdown.cancelled() => break,
        };
        let Some(reply) = msg.reply.clone() else {
            tracing::debug!(subject = %msg.subject, "recall request without a reply subject ignored");
            continue;
        };
        let gateway = gateway.clone();
        let ns = ns.clone();
        tokio::spawn(async move {
            let body = answer(&gateway, &ns, msg.subject.as_str(), &msg.payload).await;
            if let Err(e) = gateway.bus().client.publish(reply, body.into()).await {
                tracing::warn!(error = %e, "could not send a recall reply");
            }
        });
    }
    let _ = requests.unsubscribe().await;
    Ok(())
}

async fn answer(gateway: &Gateway, ns: &Namespace, subject: &str, payload: &[u8]) -> Vec<u8> {
    let result = async {
        let tenant = ns
            .tenant_of(subject)
            .filter(|t| is_valid_tenant(t))
            .ok_or_else(|| ApiError::BadRequest(format!("no valid tenant in subject {subject}")))?;
        let req: RecallRequest = serde_json::from_slice(payload)
            .map_err(|e| ApiError::BadRequest(format!("invalid recall request: {e}")))?;
        gateway.recall(tenant, &req).await
    }
    .await;
    match result {
        Ok(resp) => serde_json::to_vec(&resp).unwrap_or_default(),
        Err(e) => serde_json::to_vec(&error_body(&e)).unwrap_or_default(),
    }
}

fn error_body(e: &ApiError) -> serde_json::Value {
    json!({"error": {"kind": e.kind(), "message": e.to_string()}})
}
