//! Retry timing in one place (crate `backoff`, which is unmaintained: keeping it
//! behind this module means a switch touches one file).

use std::time::Duration;

use backoff::{ExponentialBackoff, backoff::Backoff};

/// Exponential backoff starting at `initial`, doubling, capped at `max`, with ±20 % jitter.
pub fn policy(
    initial: Duration,
    max: Duration,
    max_elapsed: Option<Duration>,
) -> ExponentialBackoff {
    ExponentialBackoff {
        initial_interval: initial,
        current_interval: initial,
        randomization_factor: 0.2,
        multiplier: 2.0,
        max_interval: max,
        max_elapsed_time: max_elapsed,
        ..ExponentialBackoff::default()
    }
}

/// The delay before the next delivery of a message already delivered `delivered` times.
pub fn redelivery_delay(initial: Duration, max: Duration, delivered: u64) -> Duration {
    let mut backoff = policy(initial, max, None);
    let mut delay = initial;
    for _ in 0..delivered.clamp(1, 32) {
        delay = backoff.next_backoff().unwrap_or(max);
    }
    delay.min(max)
}

/// Retries `op` until it succeeds or `max_elapsed` passes; used to reach NATS and
/// Postgres at start-up, when a dependency may still be booting.
pub async fn with_backoff<T, E, F, Fut>(
    what: &str,
    max_elapsed: Duration,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let policy = policy(
        Duration::from_millis(200),
        Duration::from_secs(5),
        Some(max_elapsed),
    );
    backoff::future::retry(policy, || {
        let fut = op();
        async move {
            fut.await.map_err(|e| {
                tracing::warn!(what, error = %e, "not reachable yet, retrying");
                backoff::Error::transient(e)
            })
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_are_capped() {
        let initial = Duration::from_secs(1);
        let max = Duration::from_secs(60);
        let first = redelivery_delay(initial, max, 1);
        let fourth = redelivery_delay(initial, max, 4);
        assert!(first <= Duration::from_millis(1200), "{first:?}");
        assert!(fourth >= Duration::from_secs(6), "{fourth:?}");
        assert!(redelivery_delay(initial, max, 30) <= max);
    }
}
