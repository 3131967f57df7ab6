//! English relative dates: "yesterday", "last Friday", "in two weeks".

use super::*;

pub(super) fn english_span(c: &Captures<'_>, today: NaiveDate) -> Option<(Span, String)> {
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
