//! Recall by NATS request-reply on `<ns>.recall.<tenant>`: the request is a
//! [`RecallRequest`] as JSON, the reply a [`RecallResponse`] or
//! `{"error": {"kind", "message"}}`. The tenant is the subject's last token, so
//! a NATS account's subject permissions decide who may ask for which tenant.
//! Replicas share the queue group `gateway`.

use std::time::Duration;

use futures::StreamExt;
use hindsight_core::{Namespace, ids::is_valid_tenant};
use hindsight_recall::{RecallRequest, RecallResponse};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::api::{ApiError, Gateway};

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
    let kind = match e {
        ApiError::BadRequest(_) => "bad_request",
        ApiError::NotFound(_) => "not_found",
        ApiError::Unavailable(_) => "unavailable",
        ApiError::Internal(_) => "internal",
    };
    json!({"error": {"kind": kind, "message": e.to_string()}})
}

/// Asks the running gateway. The outer error means nobody answered (no
/// responders, timeout); the inner one is the gateway's own answer.
pub async fn request(
    client: &async_nats::Client,
    ns: &Namespace,
    tenant: &str,
    req: &RecallRequest,
    timeout: Duration,
) -> Result<Result<RecallResponse, ApiError>, String> {
    let payload = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    let reply = tokio::time::timeout(
        timeout,
        client.request(ns.recall_subject(tenant), payload.into()),
    )
    .await
    .map_err(|_| format!("no recall reply within {} ms", timeout.as_millis()))?
    .map_err(|e| e.to_string())?;
    Ok(parse_reply(&reply.payload))
}

/// A reply as sent by [`serve`].
pub fn parse_reply(payload: &[u8]) -> Result<RecallResponse, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| ApiError::Internal(format!("unreadable recall reply: {e}")))?;
    if let Some(err) = value.get("error") {
        let message = err["message"]
            .as_str()
            .unwrap_or("recall failed")
            .to_string();
        return Err(match err["kind"].as_str() {
            Some("bad_request") => ApiError::BadRequest(message),
            Some("not_found") => ApiError::NotFound(message),
            Some("unavailable") => ApiError::Unavailable(message),
            _ => ApiError::Internal(message),
        });
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::Internal(format!("unreadable recall reply: {e}")))
}
