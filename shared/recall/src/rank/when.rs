//! The times a query names ("in May 2023", "on 7 July, 2023", "last summer",
//! "2023年5月", "上个月"), as periods that recall boosts memories dated within
//! (when they happened, else when they were said). Relative expressions are
//! read as of the moment of the query. A month without a year ("in June",
//! "6月") is that month of any year.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use regex::{Captures, Regex};

use hindsight_text::dates::{self, MONTHS, Span};

/// A period a query names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// These days, inclusive.
    Days(Span),
    /// This month (1–12) of any year.
    Month(u32),
}

impl Period {
    /// Whether a memory dated `at` falls in the period. A single day reaches
    /// one day either side: a date said in one time zone is stored in UTC.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        let day = at.date_naive();
        match self {
            Period::Days(span) => {
                let (start, end) = if span.start == span.end {
                    (span.start - Duration::days(1), span.end + Duration::days(1))
                } else {
                    (span.start, span.end)
                };
                start <= day && day <= end
            }
            Period::Month(m) => day.month() == *m,
        }
    }
}

const MONTH_NAMES: &str = "january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec";

static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"(?ix)\b(?:
            (?:(?:in|on|during|of)\s+)?(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{MONTH_NAMES})\.?,?\s+(?P<y1>\d{{4}})
          | (?:(?:in|on|during|of)\s+)?(?P<m2>{MONTH_NAMES})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})
          | (?:(?:in|on|during|of)\s+)?(?P<m3>{MONTH_NAMES})\.?,?\s+(?:of\s+)?(?P<y3>\d{{4}})
          | (?P<season>spring|summer|autumn|fall|winter)\s+(?:of\s+)?(?P<sy>\d{{4}})
          | (?P<rel>last|this|next)\s+(?P<rseason>spring|summer|autumn|fall|winter)
          | (?:in|during|since|of|by|before|after)\s+(?P<y4>(?:19|20)\d{{2}})
          | (?:in|during)\s+(?P<m4>january|february|march|april|may|june|july|august|september|october|november|december)
        )\b"
    );
    Regex::new(&pattern).unwrap_or_else(|e| panic!("period pattern: {e}"))
});

static CHINESE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<y>\d{4})年(?:(?P<m>\d{1,2})月(?:(?P<d>\d{1,2})[日号])?)?|(?P<m2>\d{1,2})月(?:(?P<d2>\d{1,2})[日号]|份)",
    )
    .unwrap_or_else(|e| panic!("period pattern: {e}"))
});

fn month_number(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let prefix = lower.get(..3)?;
    MONTHS
        .iter()
        .position(|m| m.to_ascii_lowercase().starts_with(prefix))
        .map(|i| i as u32 + 1)
}

fn month_span(year: i32, month: u32) -> Option<Span> {
    let start = NaiveDate::from_ymd_opt(year, month, 1)?;
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    Some(Span {
        start,
        end: next.pred_opt()?,
    })
}

/// The months of a season of `year` (northern hemisphere; winter starts in
/// that year's December).
fn season_span(season: &str, year: i32) -> Option<Span> {
    let (first, last) = match season.to_ascii_lowercase().as_str() {
        "spring" => ((year, 3), (year, 5)),
        "summer" => ((year, 6), (year, 8)),
        "autumn" | "fall" => ((year, 9), (year, 11)),
        _ => ((year, 12), (year.checked_add(1)?, 2)),
    };
    Some(Span {
        start: month_span(first.0, first.1)?.start,
        end: month_span(last.0, last.1)?.end,
    })
}

fn number<T: std::str::FromStr>(c: &Captures<'_>, name: &str) -> Option<T> {
    c.name(name)?.as_str().parse().ok()
}

fn english(c: &Captures<'_>, today: NaiveDate) -> Option<Period> {
    let day = |y: i32, m: u32, d: u32| NaiveDate::from_ymd_opt(y, m, d).map(Span::day);
    if let Some(m) = c.name("m1") {
        return day(
            number(c, "y1")?,
            month_number(m.as_str())?,
            number(c, "d1")?,
        )
        .map(Period::Days);
    }
    if let Some(m) = c.name("m2") {
        return day(
            number(c, "y2")?,
            month_number(m.as_str())?,
            number(c, "d2")?,
        )
        .map(Period::Days);
    }
    if let Some(m) = c.name("m3") {
        return month_span(number(c, "y3")?, month_number(m.as_str())?).map(Period::Days);
    }
    if let Some(s) = c.name("season") {
        return season_span(s.as_str(), number(c, "sy")?).map(Period::Days);
    }
    if let (Some(rel), Some(s)) = (c.name("rel"), c.name("rseason")) {
        // "last summer" is the latest one that has ended; "next", the first to come.
        let this = season_span(s.as_str(), today.year())?;
        let year = match rel.as_str().to_ascii_lowercase().as_str() {
            "last" if this.end < today => today.year(),
            "last" => today.year() - 1,
            "next" if this.start > today => today.year(),
            "next" => today.year() + 1,
            _ => today.year(),
        };
        return season_span(s.as_str(), year).map(Period::Days);
    }
    if c.name("y4").is_some() {
        let year: i32 = number(c, "y4")?;
        return Some(Period::Days(Span {
            start: NaiveDate::from_ymd_opt(year, 1, 1)?,
            end: NaiveDate::from_ymd_opt(year, 12, 31)?,
        }));
    }
    let m = month_number(c.name("m4")?.as_str())?;
    Some(Period::Month(m))
}

fn chinese(c: &Captures<'_>) -> Option<Period> {
    if let Some(y) = c.name("y") {
        let year: i32 = y.as_str().parse().ok()?;
        let Some(month) = number::<u32>(c, "m") else {
            return Some(Period::Days(Span {
                start: NaiveDate::from_ymd_opt(year, 1, 1)?,
                end: NaiveDate::from_ymd_opt(year, 12, 31)?,
            }));
        };
        return match number::<u32>(c, "d") {
            Some(d) => NaiveDate::from_ymd_opt(year, month, d).map(|d| Period::Days(Span::day(d))),
            None => month_span(year, month).map(Period::Days),
        };
    }
    let month: u32 = number(c, "m2")?;
    (1..=12).contains(&month).then_some(Period::Month(month))
}

/// Every period `query` names, as of `now`.
pub fn periods(query: &str, now: DateTime<Utc>) -> Vec<Period> {
    let today = now.date_naive();
    let mut out: Vec<Period> = ENGLISH
        .captures_iter(query)
        .filter_map(|c| english(&c, today))
        .collect();
    out.extend(CHINESE.captures_iter(query).filter_map(|c| chinese(&c)));
    out.extend(
        dates::relative_spans(query, today)
            .into_iter()
            .map(Period::Days),
    );
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        // Tuesday 1 December 2026.
        DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("valid")
    }

    fn days(a: (i32, u32, u32), b: (i32, u32, u32)) -> Period {
        let d = |(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).expect("date");
        Period::Days(Span {
            start: d(a),
            end: d(b),
        })
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .expect("valid")
    }

    #[test]
    fn english_dates_months_years_and_seasons() {
        for q in [
            "What did Maria do on 7 July, 2023?",
            "what happened on July 7th 2023",
            "what happened in July 7, 2023",
            "as mentioned on 7th of July 2023",
        ] {
            assert_eq!(periods(q, now()), [days((2023, 7, 7), (2023, 7, 7))], "{q}");
        }
        assert_eq!(
            periods("What did John attend in March 2023?", now()),
            [days((2023, 3, 1), (2023, 3, 31))]
        );
        assert_eq!(
            periods("Which state did she visit in summer 2021?", now()),
            [days((2021, 6, 1), (2021, 8, 31))]
        );
        assert_eq!(
            periods("How many times did he go to the beach in 2023?", now()),
            [days((2023, 1, 1), (2023, 12, 31))]
        );
        assert_eq!(
            periods("When did Melanie go camping in June?", now()),
            [Period::Month(6)]
        );
    }

    #[test]
    fn relative_times_are_read_as_of_the_query() {
        assert_eq!(
            periods("where did we go last summer", now()),
            [days((2026, 6, 1), (2026, 8, 31))]
        );
        assert_eq!(
            periods("what did I buy last month?", now()),
            [days((2026, 11, 1), (2026, 11, 30))]
        );
        assert_eq!(
            periods("what did I eat yesterday", now()),
            [days((2026, 11, 30), (2026, 11, 30))]
        );
    }

    #[test]
    fn chinese_dates_and_relative_times() {
        assert_eq!(
            periods("我2023年5月7日做了什么", now()),
            [days((2023, 5, 7), (2023, 5, 7))]
        );
        assert_eq!(
            periods("2023年5月去了哪里", now()),
            [days((2023, 5, 1), (2023, 5, 31))]
        );
        assert_eq!(periods("6月份做了什么", now()), [Period::Month(6)]);
        assert_eq!(
            periods("上个月我买了什么", now()),
            [days((2026, 11, 1), (2026, 11, 30))]
        );
        assert_eq!(
            periods("我去年去了哪里", now()),
            [days((2025, 1, 1), (2025, 12, 31))]
        );
    }

    #[test]
    fn words_that_are_not_times_name_no_period() {
        for q in [
            "What did Caroline research?",
            "May I ask what she likes?",
            "Where does he march with his band?",
            "Who won 2 of the 3 games?",
            "What is her phone number 2023 4455?",
        ] {
            assert!(periods(q, now()).is_empty(), "{q}: {:?}", periods(q, now()));
        }
    }

    #[test]
    fn a_day_reaches_one_day_either_side_a_month_any_year() {
        let day = days((2023, 7, 7), (2023, 7, 7));
        assert!(day.contains(at("2023-07-07T23:00:00Z")));
        assert!(day.contains(at("2023-07-06T10:00:00Z")));
        assert!(!day.contains(at("2023-07-09T00:00:00Z")));
        assert!(Period::Month(6).contains(at("2019-06-30T00:00:00Z")));
        assert!(!Period::Month(6).contains(at("2019-07-01T00:00:00Z")));
    }
}
