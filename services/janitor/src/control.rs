//! Asking the running janitor over NATS: `hindsight maintenance run` and
//! `restore` send a request to `<ns>.maintenance.run` / `.restore` (queue
//! group `janitor`); with no janitor up they run in-process instead.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use hindsight_core::Namespace;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    janitor::Janitor,
    request::{Outcome, RunRequest, Trigger},
    restore::RestoreReport,
};

/// A run asked for over NATS.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAsk {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub tenant: Option<String>,
    /// The run's clock (tests); default now.
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreAsk {
    pub run: Uuid,
    /// Also write back the memories the run purged, from its export.
    #[serde(default)]
    pub purged: bool,
}

/// A janitor's answer: the outcome, or why there is none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply<T> {
    Ok { ok: T },
    Error { error: String },
}

pub fn run_subject(ns: &Namespace) -> String {
    ns.absolute("maintenance.run")
}

pub fn restore_subject(ns: &Namespace) -> String {
    ns.absolute("maintenance.restore")
}

/// Answers run and restore requests until `shutdown`.
pub async fn serve(
    janitor: Janitor,
    client: async_nats::Client,
    ns: Namespace,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut runs = client
        .queue_subscribe(run_subject(&ns), "janitor".into())
        .await
        .map_err(|e| anyhow::anyhow!("cannot subscribe to {}: {e}", run_subject(&ns)))?;
    let mut restores = client
        .queue_subscribe(restore_subject(&ns), "janitor".into())
        .await
        .map_err(|e| anyhow::anyhow!("cannot subscribe to {}: {e}", restore_subject(&ns)))?;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            Some(msg) = runs.next() => {
                let (janitor, client) = (janitor.clone(), client.clone());
                tokio::spawn(async move {
                    let reply = match serde_json::from_slice::<RunAsk>(&msg.payload) {
                        Err(e) => Reply::Error { error: format!("invalid run request: {e}") },
                        Ok(ask) => match janitor.run(RunRequest {
                            dry_run: ask.dry_run,
                            tenant: ask.tenant,
                            as_of: ask.as_of,
                            trigger: Trigger::Manual,
                            scheduled_for: None,
                        }).await {
                            Ok(outcome) => Reply::Ok { ok: outcome },
                            Err(e) => Reply::Error { error: e.to_string() },
                        },
                    };
                    respond(&client, msg.reply, &reply).await;
                });
            }
            Some(msg) = restores.next() => {
                let (janitor, client) = (janitor.clone(), client.clone());
                tokio::spawn(async move {
                    let reply = match serde_json::from_slice::<RestoreAsk>(&msg.payload) {
                        Err(e) => Reply::Error { error: format!("invalid restore request: {e}") },
                        Ok(ask) => match janitor.restore(ask.run, ask.purged).await {
                            Ok(report) => Reply::Ok { ok: report },
                            Err(e) => Reply::Error { error: e.to_string() },
                        },
                    };
                    respond(&client, msg.reply, &reply).await;
                });
            }
            else => return Ok(()),
        }
    }
}

async fn respond<T: Serialize>(
    client: &async_nats::Client,
    to: Option<async_nats::Subject>,
    reply: &Reply<T>,
) {
    let Some(to) = to else { return };
    match serde_json::to_vec(reply) {
        Ok(body) => {
            if let Err(e) = client.publish(to, body.into()).await {
                tracing::warn!(error = %e, "cannot answer a maintenance request");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot encode a maintenance reply"),
    }
}

/// Asks the running janitor. `Ok(None)`: no janitor is listening.
pub async fn ask<Q: Serialize, T: for<'de> Deserialize<'de>>(
    client: &async_nats::Client,
    subject: String,
    question: &Q,
    timeout: Duration,
) -> Result<Option<Result<T, String>>, String> {
    let body = serde_json::to_vec(question).map_err(|e| e.to_string())?;
    let request = async_nats::Request::new()
        .payload(body.into())
        .timeout(Some(timeout));
    match client.send_request(subject, request).await {
        Ok(msg) => match serde_json::from_slice::<Reply<T>>(&msg.payload) {
            Ok(Reply::Ok { ok }) => Ok(Some(Ok(ok))),
            Ok(Reply::Error { error }) => Ok(Some(Err(error))),
            Err(e) => Err(format!("unreadable janitor reply: {e}")),
        },
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => Ok(None),
        Err(e) => Err(format!("asking the janitor: {e}")),
    }
}

/// [`ask`] for a run.
pub async fn ask_run(
    client: &async_nats::Client,
    ns: &Namespace,
    ask_for: &RunAsk,
    timeout: Duration,
) -> Result<Option<Result<Outcome, String>>, String> {
    ask(client, run_subject(ns), ask_for, timeout).await
}

/// [`ask`] for a restore.
pub async fn ask_restore(
    client: &async_nats::Client,
    ns: &Namespace,
    restore: &RestoreAsk,
    timeout: Duration,
) -> Result<Option<Result<RestoreReport, String>>, String> {
    ask(client, restore_subject(ns), restore, timeout).await
}
