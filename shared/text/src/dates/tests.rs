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
