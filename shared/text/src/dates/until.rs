//! The end a text gives to what it says: "until Friday", 到周五为止.

use super::{chinese::chinese_weekday, *};

static UNTIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:until|till|through)\s+(?P<rest>[^,;.!?]{1,40})
          | \bfor\s+the\s+next\s+(?P<n>\d+|two|three|four|five|six|seven|eight|nine|ten|a\ few|a\ couple\ of)\s+(?P<unit>day|week)s?\b",
    )
    .unwrap_or_else(|e| panic!("until pattern: {e}"))
});

static CHINESE_UNTIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"到(?P<x>[^，。,；;！？]{1,10}?)(?:为止|之前|以前)")
        .unwrap_or_else(|e| panic!("until pattern: {e}"))
});

static BARE_WEEKDAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:this\s+)?(?P<en>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|^(?:周|星期|礼拜)(?P<zh>[一二三四五六日天])$",
    )
    .unwrap_or_else(|e| panic!("weekday pattern: {e}"))
});

/// The last day `text`, said on `today`, says something holds: "until
/// Friday" (the coming one, today if it is Friday), "till next Monday",
/// "for the next two days", 到周五为止, 到明天之前. `None` when it names no end.
pub fn last_valid_day(text: &str, today: NaiveDate) -> Option<NaiveDate> {
    let end = |phrase: &str| -> Option<NaiveDate> {
        let phrase = phrase.trim();
        if let Some(c) = BARE_WEEKDAY.captures(phrase) {
            let target = match (c.name("en"), c.name("zh")) {
                (Some(en), _) => weekday(en.as_str())?,
                (_, Some(zh)) => chinese_weekday(zh.as_str())?,
                _ => return None,
            };
            let ahead = (target.num_days_from_monday() as i64
                - today.weekday().num_days_from_monday() as i64)
                .rem_euclid(7);
            return shift(today, ahead);
        }
        resolve_all(phrase, today).1.first().map(|s| s.end)
    };
    if let Some(c) = UNTIL.captures(text) {
        if let Some(rest) = c.name("rest") {
            return end(rest.as_str());
        }
        let n = number(c.name("n")?.as_str())?;
        let days = match c.name("unit")?.as_str().to_ascii_lowercase().as_str() {
            "week" => n.checked_mul(7)?,
            _ => n,
        };
        return shift(today, days);
    }
    CHINESE_UNTIL
        .captures(text)
        .and_then(|c| end(c.name("x")?.as_str()))
}

/// Midnight UTC of a day.
pub fn at_midnight(d: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
}
