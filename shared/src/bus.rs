//! The connection to NATS and JetStream.

use std::time::Duration;

use async_nats::jetstream;

use crate::{config::Config, retry};

#[derive(Debug, thiserror::Error)]
#[error("cannot reach NATS at {url}: {reason}")]
pub struct BusError {
    pub url: String,
    pub reason: String,
}

/// A NATS client and its JetStream context.
#[derive(Clone)]
pub struct Bus {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
}

impl Bus {
    /// Connects, retrying for up to 30 s while the server is still starting.
    /// Once connected, the client reconnects by itself forever.
    pub async fn connect(config: &Config) -> Result<Self, BusError> {
        let url = config.nats_url.clone();
        let client = retry::with_backoff("nats", Duration::from_secs(30), || {
            async_nats::ConnectOptions::new()
                .name(format!("hindsight/{}", config.namespace))
                .retry_on_initial_connect()
                .connection_timeout(Duration::from_secs(5))
                .event_callback(|event| async move {
                    match event {
                        async_nats::Event::Connected | async_nats::Event::Closed => {
                            tracing::debug!(%event, "nats connection event")
                        }
                        _ => tracing::warn!(%event, "nats connection event"),
                    }
                })
                .connect(url.clone())
        })
        .await
        .map_err(|e| BusError {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        let js = jetstream::new(client.clone());
        Ok(Self { client, js })
    }
}
