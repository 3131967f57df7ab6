//! Recall and erase by NATS request-reply. Recall on `<ns>.recall.<tenant>`:
//! the request is a [`RecallRequest`] as JSON, the reply a [`RecallResponse`].
//! Erase on `<ns>.erase.<tenant>`: the request is
//! `{"user_id": "...", "dry_run": false}`, the reply the erase's report. An
//! error replies `{"error": {"kind", "message"}}`. The tenant is the subject's
//! last token, so a NATS account's subject permissions decide who may ask for
//! which tenant. Replicas share the queue group `gateway`.
//!
//! [`RecallResponse`]: hindsight_recall::RecallResponse

use futures::StreamExt;
use hindsight_core::{Namespace, ids::is_valid_tenant};
use hindsight_recall::RecallRequest;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{api::Gateway, error::ApiError};

/// What a request asks for, by its subject.
#[derive(Debug, Clone, Copy)]
enum Ask {
    Recall,
    Erase,
}

/// An erase request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EraseRequest {
    user_id: String,
    #[serde(default)]
    dry_run: bool,
}

/// Serves recall and erase requests until `shutdown`.
pub async fn serve(
    gateway: Gateway,
    ready: CancellationToken,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let ns = gateway.namespace().clone();
    let client = gateway.bus().client.clone();
    let subscribe = async |subject: String| {
        client
            .queue_subscribe(subject.clone(), "gateway".into())
            .await
            .map_err(|e| anyhow::anyhow!("cannot subscribe to {subject}: {e}"))
    };
    let mut recalls = subscribe(format!("{ns}.recall.*")).await?;
    let mut erases = subscribe(format!("{ns}.erase.*")).await?;
    tracing::info!(namespace = %ns, "answering recall and erase requests over NATS");
    ready.cancel();
    loop {
        let (ask, msg) = tokio::select! {
            m = recalls.next() => match m { Some(m) => (Ask::Recall, m), None => break },
            m = erases.next() => match m { Some(m) => (Ask::Erase, m), None => break },
            _ = shutdown.cancelled() => break,
        };
        let Some(reply) = msg.reply.clone() else {
            tracing::debug!(subject = %msg.subject, "request without a reply subject ignored");
            continue;
        };
        let gateway = gateway.clone();
        let ns = ns.clone();
        tokio::spawn(async move {
            let body = answer(&gateway, &ns, ask, msg.subject.as_str(), &msg.payload).await;
            if let Err(e) = gateway.bus().client.publish(reply, body.into()).await {
                tracing::warn!(error = %e, "could not send a reply");
            }
        });
    }
    let _ = recalls.unsubscribe().await;
    let _ = erases.unsubscribe().await;
    Ok(())
}

async fn answer(
    gateway: &Gateway,
    ns: &Namespace,
    ask: Ask,
    subject: &str,
    payload: &[u8],
) -> Vec<u8> {
    let tenant = ns
        .tenant_of(subject)
        .filter(|t| is_valid_tenant(t))
        .ok_or_else(|| ApiError::BadRequest(format!("no valid tenant in subject {subject}")));
    let result = match (tenant, ask) {
        (Err(e), _) => Err(e),
        (Ok(tenant), Ask::Recall) => match serde_json::from_slice::<RecallRequest>(payload) {
            Ok(req) => gateway
                .recall(tenant, &req)
                .await
                .map(|r| serde_json::to_vec(&r).unwrap_or_default()),
            Err(e) => Err(ApiError::BadRequest(format!("invalid recall request: {e}"))),
        },
        (Ok(tenant), Ask::Erase) => match serde_json::from_slice::<EraseRequest>(payload) {
            Ok(req) => gateway
                .erase_user(tenant, &req.user_id, "nats", req.dry_run)
                .await
                .map(|r| serde_json::to_vec(&r).unwrap_or_default()),
            Err(e) => Err(ApiError::BadRequest(format!(
                "invalid erase request (expected {{\"user_id\": \"…\", \"dry_run\": false}}): {e}"
            ))),
        },
    };
    match result {
        Ok(body) => body,
        Err(e) => serde_json::to_vec(&error_body(&e)).unwrap_or_default(),
    }
}

fn error_body(e: &ApiError) -> serde_json::Value {
    json!({"error": {"kind": e.kind(), "message": e.to_string()}})
}
