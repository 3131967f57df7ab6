//! Relative dates ("yesterday", "last week", "两天前", "下个月") resolved against
//! the day of the turn on its sender's calendar ([`hindsight_core::zone`]) and written
//! into the text as absolute dates, so a fact still means the same thing when
//! it is recalled a year later.
//!
//! Weeks run Monday to Sunday. "This Friday" is the Friday of the current
//! week (already past on a Saturday); "next Friday" is the Friday of next
//! week and "last Friday" the Friday of last week, as 这周五, 下周五 and 上周五
//! say — so on Monday 4 May 2026 "next Friday" is 15 May, not 8 May.

mod chinese;
mod english;
#[cfg(test)]
mod tests;
mod until;

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};
use regex::{Captures, Regex};

use chinese::chinese_span;
use english::english_span;
pub use until::{at_midnight, last_valid_day};

/// A span of days a phrase refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: NaiveDate,
    /// Inclusive.
    pub end: NaiveDate,
}

impl Span {
    pub fn day(d: NaiveDate) -> Self {
        Self { start: d, end: d }
    }
}

/// The text with relative dates made absolute, and the first span found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub text: String,
    pub span: Option<Span>,
}

pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub fn english_day(d: NaiveDate) -> String {
    format!("{} {} {}", d.day(), MONTHS[d.month0() as usize], d.year())
}

fn english_month(d: NaiveDate) -> String {
    format!("{} {}", MONTHS[d.month0() as usize], d.year())
}

fn chinese_day(d: NaiveDate) -> String {
    format!("{}年{}月{}日", d.year(), d.month(), d.day())
}

// Date arithmetic is checked: "100000000 days ago" or "2147483648年以前" names
// no date chrono can hold (or overflows a year), and such a phrase is left as
// written. Both panicked the stage; fuzz/fuzz_targets/rules.rs found the second.

/// `d` moved by `days` (back when negative), if that is a date.
fn shift(d: NaiveDate, days: i64) -> Option<NaiveDate> {
    d.checked_add_signed(Duration::try_days(days)?)
}

fn shift_weeks(d: NaiveDate, weeks: i64) -> Option<NaiveDate> {
    shift(d, weeks.checked_mul(7)?)
}

fn week_start(d: NaiveDate) -> Option<NaiveDate> {
    shift(d, -(d.weekday().num_days_from_monday() as i64))
}

fn week_span(start: NaiveDate) -> Option<Span> {
    Some(Span {
        start,
        end: shift(start, 6)?,
    })
}

fn month_start(year: i32, month0: i64) -> Option<NaiveDate> {
    let y = i32::try_from(i64::from(year).checked_add(month0.div_euclid(12))?).ok()?;
    let m = month0.rem_euclid(12) as u32 + 1;
    NaiveDate::from_ymd_opt(y, m, 1)
}

fn month_span(d: NaiveDate, offset: i64) -> Option<Span> {
    let month0 = (d.month0() as i64).checked_add(offset)?;
    let start = month_start(d.year(), month0)?;
    let next = month_start(d.year(), month0 + 1)?;
    Some(Span {
        start,
        end: next.pred_opt()?,
    })
}

/// The year `offset` years from `d`'s, and its span.
fn year_span(d: NaiveDate, offset: i64) -> Option<(i32, Span)> {
    let year = i32::try_from(i64::from(d.year()).checked_add(offset)?).ok()?;
    let span = Span {
        start: NaiveDate::from_ymd_opt(year, 1, 1)?,
        end: NaiveDate::from_ymd_opt(year, 12, 31)?,
    };
    Some((year, span))
}

fn number(word: &str) -> Option<i64> {
    if let Ok(n) = word.parse::<i64>() {
        return Some(n);
    }
    Some(match word.to_ascii_lowercase().as_str() {
        "a" | "an" | "one" | "一" => 1,
        "two" | "a couple of" | "couple of" | "二" | "两" => 2,
        "three" | "a few" | "few" | "三" => 3,
        "four" | "四" => 4,
        "five" | "五" => 5,
        "six" | "六" => 6,
        "seven" | "七" => 7,
        "eight" | "八" => 8,
        "nine" | "九" => 9,
        "ten" | "十" => 10,
        _ => return None,
    })
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word.to_ascii_lowercase().as_str() {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:
            (?P<dby>the\ day\ before\ yesterday)
          | (?P<dat>the\ day\ after\ tomorrow)
          | (?P<yesterday>yesterday|last\ night)
          | (?P<today>today|tonight|this\ (?:morning|afternoon|evening))
          | (?P<tomorrow>tomorrow)
          | (?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\ few|a\ couple\ of)\s+(?P<unit>day|week|month|year)s?\ ago
          | (?P<rel>last|this|next)\s+(?P<what>week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)
        )\b",
    )
    .unwrap_or_else(|e| panic!("date pattern: {e}"))
});

static CHINESE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<zdby>前天)|(?P<zdat>后天)|(?P<zyesterday>昨天|昨晚)|(?P<ztoday>今天|今晚|今早)|(?P<ztomorrow>明天)|(?P<zn>\d+|[一二两三四五六七八九十])(?:个)?(?P<zunit>天|周|星期|月|年)(?:前|以前|之前)|(?P<zrel>上|这|本|下)(?:个)?(?:(?P<zwhat>周|星期|礼拜)(?P<zday>[一二三四五六日天])?|(?P<zmonth>月))|(?P<zyear>去年|今年|明年)",
    )
    .unwrap_or_else(|e| panic!("date pattern: {e}"))
});

/// Resolves relative dates in `text` as said on `today`.
pub fn resolve(text: &str, today: NaiveDate) -> Resolved {
    let (text, spans) = resolve_all(text, today);
    Resolved {
        text,
        span: spans.first().copied(),
    }
}

/// The spans of every relative date in `text` as said on `today`, in order.
pub fn relative_spans(text: &str, today: NaiveDate) -> Vec<Span> {
    resolve_all(text, today).1
}

fn resolve_all(text: &str, today: NaiveDate) -> (String, Vec<Span>) {
    let mut spans: Vec<Span> = Vec::new();
    let english = ENGLISH.replace_all(text, |c: &Captures<'_>| {
        let whole = c.get(0).map(|m| m.as_str()).unwrap_or_default();
        let start = c.get(0).map_or(0, |m| m.start());
        match english_span(c, today) {
            Some((span, words)) => {
                spans.push(span);
                after_preposition(&text[..start], words)
            }
            None => whole.to_string(),
        }
    });
    let chinese = CHINESE.replace_all(&english, |c: &Captures<'_>| {
        let whole = c.get(0).map(|m| m.as_str()).unwrap_or_default();
        let end = c.get(0).map_or(0, |m| m.end());
        // 下周一起 is "next week, together" (一起), not "next Monday, …".
        if let Some(one) = c.name("zday").filter(|d| d.as_str() == "一")
            && english[end..].starts_with('起')
        {
            let week = &whole[..one.start() - c.get(0).map_or(0, |m| m.start())];
            return match CHINESE.captures(week).and_then(|w| chinese_span(&w, today)) {
                Some((span, words)) => {
                    spans.push(span);
                    format!("{words}一")
                }
                None => whole.to_string(),
            };
        }
        match chinese_span(c, today) {
            Some((span, words)) => {
                spans.push(span);
                words
            }
            None => whole.to_string(),
        }
    });
    (chinese.into_owned(), spans)
}

/// Prepositions after which "on 7 May 2023" reads "from 7 May 2023".
const PREPOSITIONS: &[&str] = &[
    "from", "since", "until", "till", "by", "of", "before", "after", "during", "on", "in", "for",
];

/// The absolute words without their own "on"/"in" when the text before
/// already ends in a preposition ("from last weekend" → "from the weekend of…").
fn after_preposition(before: &str, words: String) -> String {
    let previous = before
        .trim_end()
        .rsplit(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if PREPOSITIONS.contains(&previous.as_str()) {
        for lead in ["on ", "in "] {
            if let Some(rest) = words.strip_prefix(lead) {
                return rest.to_string();
            }
        }
    }
    words
}

/// `target` in the week `offset` weeks from `today`'s.
fn weekday_of_week(today: NaiveDate, offset: i64, target: Weekday) -> Option<NaiveDate> {
    shift(
        shift_weeks(week_start(today)?, offset)?,
        target.num_days_from_monday() as i64,
    )
}

/// English weekday names, Monday first.
const MONTH_DAY_NAME: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
