//! Chinese relative dates: 昨天, 上周五, 两天前, 下个月.

use super::*;

pub(super) fn chinese_weekday(c: &str) -> Option<Weekday> {
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

pub(super) fn chinese_span(c: &Captures<'_>, today: NaiveDate) -> Option<(Span, String)> {
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
