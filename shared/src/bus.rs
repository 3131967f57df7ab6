//! The connection to NATS and JetStream.

use std::time::Duration;

use async_nats::jetstream;

use hindsight_core::retry;

use crate::config::{Config, mask_url};

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
        let login = credentials(&url);
        let client = retry::with_backoff("nats", Duration::from_secs(30), || {
            let options = match &login {
                Some((user, password)) => async_nats::ConnectOptions::with_user_and_password(
                    user.clone(),
                    password.clone(),
                ),
                None => async_nats::ConnectOptions::new(),
            };
            options
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
            url: mask_url(&url),
            reason: e.to_string(),
        })?;
        let js = jetstream::new(client.clone());
        Ok(Self { client, js })
    }
}

/// The user and password in `nats://user:password@host:port`, percent-decoded.
/// async-nats takes a login only from its options, not from the URL.
fn credentials(url: &str) -> Option<(String, String)> {
    let addr: async_nats::ServerAddr = url.split(',').next()?.trim().parse().ok()?;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    Some((decode(addr.username()?), decode(addr.password()?)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_login_comes_from_the_url() {
        assert_eq!(
            super::credentials("nats://hindsight:p%40ss@nats:4222"),
            Some(("hindsight".into(), "p@ss".into()))
        );
        assert_eq!(super::credentials("nats://127.0.0.1:4222"), None);
    }
}
