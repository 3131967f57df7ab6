//! Asking a running gateway for recall over NATS (`hindsight recall`, and
//! `hindsight mcp` when a gateway runs): the client's half of [`nats`](crate::nats).

use std::time::Duration;

use hindsight_core::Namespace;
use hindsight_recall::{RecallRequest, RecallResponse};

use crate::error::ApiError;

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
        return Err(ApiError::from_kind(err["kind"].as_str(), message));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::Internal(format!("unreadable recall reply: {e}")))
}
