//! Relative dates ("yesterday", "last week", "两天前", "下个月") resolved against
//! the day of the turn on its sender's calendar ([`hindsight_core::zone`]) and written
//! into the text as absolute dates, so a fact still means the same thing when
//! it is recalled a year later.
//!
//! Weeks run Monday to Sunday. "This Friday" is the Friday of the current
//! week (already past on a Saturday); "next Friday" is the Friday of next
//! week and "last Friday" the Friday of last week, as 这周五, 下周五 and 上周五
//! say — so on Monday 4 May 2026 "next Friday" is 15 May, not 8 May.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};
use regex::{Captures, Regex};

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

fn english_span(c: &Captures<'_>, today: NaiveDate) -> Option<(Span, String)> {
    let day = |d: NaiveDate| (Span::day(d), format!("on {}", english_day(d)));
    if c.name("dby").is_some() {
        return Some(day(shift(today, -2)?));
    }
    if c.name("dat").is_some() {
        return Some(day(shift(today, 2)?));
    }
    if let Some(m) = c.name("yesterday") {
        let d = shift(today, -1)?;
        let words = if m.as_str().eq_ignore_ascii_case("last night") {
            format!("on the night of {}", english_day(d))
        } else {
            format!("on {}", english_day(d))
        };
        return Some((Span::day(d), words));
    }
    if c.name("today").is_some() {
        return Some(day(today));
    }
    if c.name("tomorrow").is_some() {
        return Some(day(shift(today, 1)?));
    }
    if let (Some(n), Some(unit)) = (c.name("n"), c.name("unit")) {
        let back = number(n.as_str())?.checked_neg()?;
        return Some(match unit.as_str().to_ascii_lowercase().as_str() {
            "day" => day(shift(today, back)?),
            "week" => {
                let start = week_start(shift_weeks(today, back)?)?;
                (
                    week_span(start)?,
                    format!("in the week of {}", english_day(start)),
                )
            }
            "month" => {
                let span = month_span(today, back)?;
                (span, format!("in {}", english_month(span.start)))
            }
            _ => {
                let (year, span) = year_span(today, back)?;
                (span, format!("in {year}"))
            }
        });
    }
    let (rel, what) = (
        c.name("rel")?.as_str().to_ascii_lowercase(),
        c.name("what")?.as_str().to_ascii_lowercase(),
    );
    let offset: i64 = match rel.as_str() {
        "last" => -1,
        "next" => 1,
        _ => 0,
    };
    Some(match what.as_str() {
        "week" => {
            let start = shift_weeks(week_start(today)?, offset)?;
            (
                week_span(start)?,
                format!("in the week of {}", english_day(start)),
            )
        }
        "weekend" => {
            let saturday = shift(shift_weeks(week_start(today)?, offset)?, 5)?;
            (
                Span {
                    start: saturday,
                    end: shift(saturday, 1)?,
                },
                format!("on the weekend of {}", english_day(saturday)),
            )
        }
        "month" => {
            let span = month_span(today, offset)?;
            (span, format!("in {}", english_month(span.start)))
        }
        "year" => {
            let (year, span) = year_span(today, offset)?;
            (span, format!("in {year}"))
        }
        name => {
            let target = weekday(name)?;
            let d = weekday_of_week(today, offset, target)?;
            (
                Span::day(d),
                format!(
                    "on {} {}",
                    MONTH_DAY_NAME[target.num_days_from_monday() as usize],
                    english_day(d)
                ),
            )
        }
    })
}

/// `target` in the week `offset` weeks from `today`'s.
fn weekday_of_week(today: NaiveDate, offset: i64, target: Weekday) -> Option<NaiveDate> {
    shift(
        shift_weeks(week_start(today)?, offset)?,
        target.num_days_from_monday() as i64,
    )
}

fn chinese_weekday(c: &str) -> Option<Weekday> {
    Some(match c {
        "一" => Weekday::Mon,
        "二" => Weekday::Tue,
        "三" => Weekday::Wed,
        "四" => Weekday::Thu,
        "五" => Weekday::Fri,
        "六" => Weekday::Sat,
        "日" | "天" => Weekday::Sun,
        _ => return None,
    })
}

const MONTH_DAY_NAME: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

fn chinese_span(c: &Captures<'_>, today: NaiveDate) -> Option<(Span, String)> {
    let day = |d: NaiveDate| (Span::day(d), chinese_day(d));
    if c.name("zdby").is_some() {
        return Some(day(shift(today, -2)?));
    }
    if c.name("zdat").is_some() {
        return Some(day(shift(today, 2)?));
    }
    if let Some(m) = c.name("zyesterday") {
        let d = shift(today, -1)?;
        let suffix = if m.as_str() == "昨晚" { "晚上" } else { "" };
        return Some((Span::day(d), format!("{}{suffix}", chinese_day(d))));
    }
    if let Some(m) = c.name("ztoday") {
        let suffix = match m.as_str() {
            "今晚" => "晚上",
            "今早" => "早上",
            _ => "",
        };
        return Some((Span::day(today), format!("{}{suffix}", chinese_day(today))));
    }
    if c.name("ztomorrow").is_some() {
        return Some(day(shift(today, 1)?));
    }
    if let Some(y) = c.name("zyear") {
        let offset = match y.as_str() {
            "去年" => -1,
            "明年" => 1,
            _ => 0,
        };
        let (year, span) = year_span(today, offset)?;
        return Some((span, format!("{year}年")));
    }
    if let (Some(n), Some(unit)) = (c.name("zn"), c.name("zunit")) {
        let back = number(n.as_str())?.checked_neg()?;
        return Some(match unit.as_str() {
            "天" => day(shift(today, back)?),
            "周" | "星期" => {
                let start = week_start(shift_weeks(today, back)?)?;
                (week_span(start)?, format!("{}那周", chinese_day(start)))
            }
            "月" => {
                let span = month_span(today, back)?;
                (
                    span,
                    format!("{}年{}月", span.start.year(), span.start.month()),
                )
            }
            _ => {
                let (year, span) = year_span(today, back)?;
                (span, format!("{year}年"))
            }
        });
    }
    let rel = c.name("zrel")?.as_str();
    let what = if c.name("zmonth").is_some() {
        "月"
    } else {
        c.name("zwhat")?.as_str()
    };
    let offset: i64 = match rel {
        "上" => -1,
        "下" => 1,
        _ => 0,
    };
    if let Some(d) = c.name("zday") {
        let d = weekday_of_week(today, offset, chinese_weekday(d.as_str())?)?;
        return Some((Span::day(d), chinese_day(d)));
    }
    Some(if what == "月" {
        let span = month_span(today, offset)?;
        (
            span,
            format!("{}年{}月", span.start.year(), span.start.month()),
        )
    } else {
        let start = shift_weeks(week_start(today)?, offset)?;
        (week_span(start)?, format!("{}那周", chinese_day(start)))
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDate {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.date_naive())
            .expect("valid")
    }

    // 8 May 2023 was a Monday.
    const NOW: &str = "2023-05-08T13:56:00Z";

    #[test]
    fn english_relative_days() {
        let r = resolve("I went to a support group yesterday", at(NOW));
        assert_eq!(r.text, "I went to a support group on 7 May 2023");
        assert_eq!(
            r.span,
            Some(Span::day(
                NaiveDate::from_ymd_opt(2023, 5, 7).expect("date")
            ))
        );
        assert_eq!(
            resolve("two days ago I ran", at(NOW)).text,
            "on 6 May 2023 I ran"
        );
        assert_eq!(
            resolve("we meet tomorrow", at(NOW)).text,
            "we meet on 9 May 2023"
        );
    }

    #[test]
    fn english_weeks_months_years_and_weekdays() {
        assert_eq!(
            resolve("last week", at(NOW)).text,
            "in the week of 1 May 2023"
        );
        assert_eq!(resolve("next month", at(NOW)).text, "in June 2023");
        assert_eq!(resolve("Last year", at(NOW)).text, "in 2022");
        assert_eq!(
            resolve("last weekend", at(NOW)).text,
            "on the weekend of 6 May 2023"
        );
        assert_eq!(resolve("last Friday", at(NOW)).text, "on Friday 5 May 2023");
        assert_eq!(
            resolve("next Monday", at(NOW)).text,
            "on Monday 15 May 2023"
        );
        assert_eq!(resolve("3 months ago", at(NOW)).text, "in February 2023");
    }

    #[test]
    fn a_preposition_before_the_date_is_not_doubled() {
        assert_eq!(
            resolve("our latest work from last weekend", at(NOW)).text,
            "our latest work from the weekend of 6 May 2023"
        );
        assert_eq!(resolve("since yesterday", at(NOW)).text, "since 7 May 2023");
        assert_eq!(
            resolve("she left yesterday", at(NOW)).text,
            "she left on 7 May 2023"
        );
    }

    #[test]
    fn chinese_relative_dates() {
        assert_eq!(
            resolve("我昨天去了医院", at(NOW)).text,
            "我2023年5月7日去了医院"
        );
        assert_eq!(
            resolve("上周我搬家了", at(NOW)).text,
            "2023年5月1日那周我搬家了"
        );
        assert_eq!(resolve("下个月去上海", at(NOW)).text, "2023年6月去上海");
        assert_eq!(resolve("两天前", at(NOW)).text, "2023年5月6日");
    }

    #[test]
    fn this_next_and_last_weekday_name_a_day_of_that_week() {
        // Wednesday 10 May 2023.
        let wed = at("2023-05-10T09:00:00Z");
        assert_eq!(resolve("this Friday", wed).text, "on Friday 12 May 2023");
        assert_eq!(resolve("next Friday", wed).text, "on Friday 19 May 2023");
        assert_eq!(resolve("last Friday", wed).text, "on Friday 5 May 2023");
        assert_eq!(resolve("this Monday", wed).text, "on Monday 8 May 2023");
        // On the Friday itself, "this Friday" is today.
        let fri = at("2023-05-12T09:00:00Z");
        assert_eq!(resolve("this Friday", fri).text, "on Friday 12 May 2023");
        assert_eq!(resolve("next Friday", fri).text, "on Friday 19 May 2023");
        assert_eq!(resolve("这周五", wed).text, "2023年5月12日");
        assert_eq!(resolve("下周五见", wed).text, "2023年5月19日见");
        assert_eq!(resolve("上星期天", wed).text, "2023年5月7日");
        assert_eq!(resolve("下个月一号", wed).text, "2023年6月一号");
        assert_eq!(
            resolve("下周一起去吃饭", wed).text,
            "2023年5月15日那周一起去吃饭"
        );
    }

    #[test]
    fn an_end_is_read_where_the_text_names_one() {
        let wed = at("2023-05-10T09:00:00Z");
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d);
        assert_eq!(
            last_valid_day("I'm in Tokyo until Friday", wed),
            day(2023, 5, 12)
        );
        assert_eq!(
            last_valid_day("staying till next Monday", wed),
            day(2023, 5, 15)
        );
        assert_eq!(last_valid_day("until tomorrow", wed), day(2023, 5, 11));
        assert_eq!(
            last_valid_day("I'm off for the next two days", wed),
            day(2023, 5, 12)
        );
        assert_eq!(
            last_valid_day("我到周五为止都在上海", wed),
            day(2023, 5, 12)
        );
        assert_eq!(last_valid_day("到明天之前别打扰我", wed), day(2023, 5, 11));
        assert_eq!(last_valid_day("until Wednesday", wed), day(2023, 5, 10));
        assert_eq!(last_valid_day("I live in Lisbon", wed), None);
        assert_eq!(last_valid_day("until I find a job", wed), None);
    }

    #[test]
    fn text_without_relative_dates_is_unchanged() {
        let r = resolve("I live in Lisbon and the weekly market is great", at(NOW));
        assert_eq!(r.text, "I live in Lisbon and the weekly market is great");
        assert_eq!(r.span, None);
    }
}
