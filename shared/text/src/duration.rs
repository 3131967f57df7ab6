//! Human durations ("500ms", "30s", "10m", "1h", "7d") as used in the stream
//! files and in environment variables.

use std::time::Duration;

/// Parses a duration written as a whole number followed by a unit.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("duration {text:?} has no unit (use ms, s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("duration {text:?} does not start with a whole number"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "duration {text:?} has unknown unit {other:?} (use ms, s, m, h or d)"
            ));
        }
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(7 * 86400)));
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(parse("30").is_err());
        assert!(parse("3w").is_err());
        assert!(parse("s").is_err());
    }
}
