//! The HTTP layer under async-openai: one reqwest client with the call timeout,
//! and failures that keep what the retry policy needs (status, `Retry-After`),
//! which the client's own error type drops.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use async_openai::{error::OpenAIError, middleware::HttpRequestFactory};

/// A non-success HTTP answer.
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {body}")]
pub struct HttpFailure {
    pub status: u16,
    pub retry_after: Option<Duration>,
    pub body: String,
}

/// `Retry-After` as seconds (HTTP dates are rare from LLM servers and ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// A tower service executing async-openai's requests.
#[derive(Clone)]
pub struct Transport {
    client: reqwest::Client,
}

impl Transport {
    pub fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = hindsight_core::http_client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Self { client })
    }

    /// The client requests go out on.
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let client = self.client.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = client
                .execute(request)
                .await
                .map_err(OpenAIError::Reqwest)?;
            if response.status().is_success() {
                return Ok(response);
            }
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let body: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(500)
                .collect();
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status,
                retry_after,
                body,
            })))
        })
    }
}
