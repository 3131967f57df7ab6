//! Parsers of setting values: each returns the reason a value is refused.

use std::time::Duration;

use hindsight_core::{closed_set::names, signal::Signal};
use hindsight_text::duration;

use super::{ConfigError, default_of};

/// A number from `low` to 1.
pub(super) fn unit_interval(v: &str, low: f32) -> Result<f32, String> {
    match v.parse::<f32>() {
        Ok(x) if (low..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("expected a number from {low} to 1")),
    }
}

pub(super) fn parse_with<T>(
    (env, value): (&'static str, String),
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, ConfigError> {
    parse(value.trim()).map_err(|reason| ConfigError { env, value, reason })
}

pub(super) fn optional<T>(
    v: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    if v.is_empty() {
        Ok(None)
    } else {
        parse(v).map(Some)
    }
}

/// Four non-negative numbers, comma-separated, not all zero.
pub(super) fn weights(v: &str) -> Result<[f64; 4], String> {
    let parts: Vec<f64> = v
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| "expected four numbers, e.g. `0.5,0.2,0.2,0.1`".to_string())?;
    match parts[..] {
        [a, b, c, d] if parts.iter().all(|w| *w >= 0.0) && a + b + c + d > 0.0 => Ok([a, b, c, d]),
        _ => Err("expected four non-negative numbers, not all zero (relevance,recency,importance,access)".into()),
    }
}

/// `on` or `off` (also true/false, yes/no, 1/0).
pub(super) fn on_off(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("expected `on` or `off`".into()),
    }
}

pub(super) fn non_negative(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() => Ok(n),
        _ => Err("expected a number of at least 0".into()),
    }
}

/// `name=weight` for some of [`Signal::WEIGHTED`], comma-separated; the others keep their default.
pub(super) fn signal_weights(v: &str) -> Result<[f64; 4], String> {
    let mut out = [0.0; 4];
    set_signal_weights(default_of("HINDSIGHT_RECALL_SIGNAL_WEIGHTS"), &mut out)?;
    set_signal_weights(v, &mut out)?;
    if out.iter().all(|w| *w == 0.0) {
        return Err("at least one signal needs a weight above 0".into());
    }
    Ok(out)
}

pub(super) fn set_signal_weights(v: &str, out: &mut [f64; 4]) -> Result<(), String> {
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected name=weight, e.g. `dense=0.4`"))?;
        let i = Signal::WEIGHTED
            .iter()
            .position(|s| s.as_str() == name.trim())
            .ok_or_else(|| {
                format!(
                    "unknown signal {:?}: expected one of {}",
                    name.trim(),
                    names(&Signal::WEIGHTED).join(", ")
                )
            })?;
        out[i] = non_negative(weight.trim()).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// A whole number, 0 included.
pub(super) fn whole(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .map_err(|_| "expected a whole number (0 or more)".into())
}

pub(super) fn positive<T: std::str::FromStr + PartialOrd + Default>(v: &str) -> Result<T, String> {
    match v.parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err("expected a whole number greater than zero".into()),
    }
}

/// A positive number, or `cores`: the cores this process may run on.
pub(super) fn cores(v: &str) -> Result<usize, String> {
    if v == "cores" {
        return Ok(std::thread::available_parallelism().map_or(1, usize::from));
    }
    positive(v).map_err(|e| format!("{e}, or `cores`"))
}

/// A duration of at least one second (JetStream and pollers work in seconds).
pub(super) fn at_least_a_second(v: &str) -> Result<Duration, String> {
    duration::parse(v).and_then(|d| {
        if d >= Duration::from_secs(1) {
            Ok(d)
        } else {
            Err("must be at least 1s".into())
        }
    })
}
