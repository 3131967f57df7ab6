//! The calendar a turn is read on: the sender's own UTC offset when the turn
//! gave one, else the deployment's time zone (`HINDSIGHT_TIME_ZONE`), or the
//! tenant's where one is configured (`HINDSIGHT_TENANT_TIME_ZONES`). "Yesterday"
//! at 07:30 in Shanghai is the day before in Shanghai, not in UTC.

use std::{collections::BTreeMap, fmt, str::FromStr};

use chrono::{DateTime, FixedOffset, Offset, Utc};
pub use chrono_tz::Tz;

/// The time zones of a deployment: one default and any per tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zones {
    default: Tz,
    tenants: BTreeMap<String, Tz>,
}

impl Default for Zones {
    fn default() -> Self {
        Self {
            default: Tz::UTC,
            tenants: BTreeMap::new(),
        }
    }
}

/// A zone name the IANA database does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IANA time zone name (such as `Europe/Berlin` or `Asia/Shanghai`)")]
pub struct UnknownZone(pub String);

/// An IANA name (`Asia/Shanghai`, `UTC`).
pub fn parse(name: &str) -> Result<Tz, UnknownZone> {
    Tz::from_str(name.trim()).map_err(|_| UnknownZone(name.trim().to_string()))
}

impl Zones {
    pub fn new(default: Tz, tenants: BTreeMap<String, Tz>) -> Self {
        Self { default, tenants }
    }

    /// `tenant=Zone` pairs separated by commas (`acme=Asia/Shanghai,beta=Europe/Berlin`).
    pub fn parse_tenants(list: &str) -> Result<BTreeMap<String, Tz>, String> {
        let mut tenants = BTreeMap::new();
        for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (tenant, zone) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not `tenant=Zone`"))?;
            let zone = parse(zone).map_err(|e| e.to_string())?;
            tenants.insert(tenant.trim().to_string(), zone);
        }
        Ok(tenants)
    }

    /// The zone of `tenant`.
    pub fn of(&self, tenant: &str) -> Tz {
        self.tenants.get(tenant).copied().unwrap_or(self.default)
    }

    /// The default zone.
    pub fn default_zone(&self) -> Tz {
        self.default
    }

    /// The tenants with their own zone.
    pub fn tenants(&self) -> &BTreeMap<String, Tz> {
        &self.tenants
    }

    /// `tenant`'s UTC offset at `at`, in minutes east of UTC (daylight saving
    /// time included).
    pub fn offset_minutes(&self, tenant: &str, at: DateTime<Utc>) -> i32 {
        at.with_timezone(&self.of(tenant))
            .offset()
            .fix()
            .local_minus_utc()
            / 60
    }

    /// `at` on `tenant`'s calendar.
    pub fn local(&self, tenant: &str, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        at.with_timezone(&self.of(tenant)).fixed_offset()
    }
}

impl fmt::Display for Zones {
    /// As configured: the default, then `tenant=Zone` pairs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.default.name())?;
        for (tenant, zone) in &self.tenants {
            write!(f, ", {tenant}={}", zone.name())?;
        }
        Ok(())
    }
}

/// `at` at a UTC offset of `minutes` (UTC when the offset is out of range).
pub fn at_offset(at: DateTime<Utc>, minutes: i32) -> DateTime<FixedOffset> {
    let offset = minutes
        .checked_mul(60)
        .and_then(FixedOffset::east_opt)
        .unwrap_or_else(|| Utc.fix());
    at.with_timezone(&offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .expect("valid")
    }

    #[test]
    fn a_tenant_may_have_its_own_zone_and_daylight_saving_counts() {
        let tenants = Zones::parse_tenants("acme=Asia/Shanghai, beta = Europe/Berlin").expect("ok");
        let zones = Zones::new(parse("America/New_York").expect("zone"), tenants);
        assert_eq!(
            zones.offset_minutes("acme", at("2026-01-15T12:00:00Z")),
            480
        );
        assert_eq!(zones.offset_minutes("beta", at("2026-01-15T12:00:00Z")), 60);
        assert_eq!(
            zones.offset_minutes("beta", at("2026-07-15T12:00:00Z")),
            120
        );
        assert_eq!(
            zones.offset_minutes("other", at("2026-01-15T12:00:00Z")),
            -300
        );
        assert_eq!(
            zones.to_string(),
            "America/New_York, acme=Asia/Shanghai, beta=Europe/Berlin"
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_reason() {
        assert!(parse("Mars/Olympus").is_err());
        let e = Zones::parse_tenants("acme").expect_err("no zone");
        assert!(e.contains("tenant=Zone"), "{e}");
        let e = Zones::parse_tenants("acme=Nowhere").expect_err("unknown");
        assert!(e.contains("IANA"), "{e}");
    }

    #[test]
    fn an_offset_gives_the_local_calendar() {
        let local = at_offset(at("2026-05-07T23:30:00Z"), 480);
        assert_eq!(local.date_naive().to_string(), "2026-05-08");
        assert_eq!(
            at_offset(at("2026-05-07T23:30:00Z"), 100_000),
            at("2026-05-07T23:30:00Z")
        );
    }
}
