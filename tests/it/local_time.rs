//! Relative dates on the sender's calendar, through real NATS and Postgres:
//! a turn at 07:30 in Shanghai (`+08:00`) is still the day before in UTC, so
//! its "yesterday" and 昨天 must not be read on the UTC day; a turn whose
//! `ts` gives no offset is read on the configured zone (here the tenant's
//! own, overriding the deployment's); "this Friday" and "next Friday" are the
//! Friday of this week and of next week (docs/pipeline.md, "Dates").

use std::{collections::BTreeMap, time::Duration};

use hindsight_core::zone::{self, Zones};
use hindsight_tests::{Deployment, eventually};
use serde_json::{Value, json};

const TENANT: &str = "acme";

/// Wednesday 6 May 2026, 07:30 in Shanghai: 5 May, 23:30 in UTC.
const SHANGHAI_MORNING: &str = "2026-05-06T07:30:00+08:00";
/// 03:00 UTC on 6 May 2026 is 20:00 on 5 May in Los Angeles (PDT).
const NO_OFFSET: &str = "2026-05-06T03:00:00Z";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_dates_are_read_on_the_senders_calendar() {
    let d = Deployment::new("test", |c| {
        c.time_zones = Zones::new(
            zone::parse("Europe/Berlin").expect("zone"),
            BTreeMap::from([(
                TENANT.to_string(),
                zone::parse("America/Los_Angeles").expect("zone"),
            )]),
        );
    })
    .await;
    let filter = d
        .start(hindsight_filter::from_config(
            d.config(),
            d.ctx.store.clone(),
        ))
        .await;
    let extract = d
        .start(hindsight_extract::from_config(d.config(), d.ctx.store.clone()).expect("stage"))
        .await;

    let turns = [
        ("zh-yesterday", SHANGHAI_MORNING, "我昨天去了医院"),
        (
            "en-yesterday",
            SHANGHAI_MORNING,
            "I went to the dentist yesterday",
        ),
        (
            "this-friday",
            SHANGHAI_MORNING,
            "I'm meeting Ana this Friday",
        ),
        (
            "next-friday",
            SHANGHAI_MORNING,
            "I'm flying to Rome next Friday",
        ),
        ("zh-next-friday", SHANGHAI_MORNING, "我下周五去杭州出差"),
        ("zoned", NO_OFFSET, "I went hiking with Sam yesterday"),
    ];
    for (id, ts, content) in turns {
        let turn = json!({
            "tenant": TENANT, "user_id": "li", "session_id": format!("s-{id}"), "turn_id": id,
            "speaker": "Li", "ts": ts, "content": content,
        });
        d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
    }
    let pool = d.ctx.store.pool.clone();
    eventually("every turn is extracted", Duration::from_secs(60), || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM turns WHERE extract_outcome = 'facts'",
            )
            .fetch_one(&pool)
            .await
            .unwrap_or(0)
                == turns.len() as i64
        }
    })
    .await;
    let facts: BTreeMap<String, Vec<Value>> =
        sqlx::query_as::<_, (String, Value)>("SELECT turn_id, facts FROM turns")
            .fetch_all(&pool)
            .await
            .expect("facts")
            .into_iter()
            .map(|(id, f)| (id, f.as_array().cloned().unwrap_or_default()))
            .collect();
    let said = |id: &str| -> (String, String) {
        let f = &facts[id][0];
        (
            f["content"].as_str().unwrap_or_default().to_string(),
            f["occurred_at"].as_str().unwrap_or_default().to_string(),
        )
    };

    // On the UTC day (5 May) "yesterday" would be 4 May.
    let (content, at) = said("zh-yesterday");
    assert!(content.contains("2026年5月5日"), "{content}");
    assert!(at.starts_with("2026-05-05"), "{at}");
    let (content, at) = said("en-yesterday");
    assert!(content.contains("5 May 2026"), "{content}");
    assert!(at.starts_with("2026-05-05"), "{at}");
    // Wednesday 6 May: this week's Friday, and next week's.
    assert!(
        said("this-friday").0.contains("Friday 8 May 2026"),
        "{:?}",
        said("this-friday")
    );
    assert!(
        said("next-friday").0.contains("Friday 15 May 2026"),
        "{:?}",
        said("next-friday")
    );
    assert!(
        said("zh-next-friday").0.contains("2026年5月15日"),
        "{:?}",
        said("zh-next-friday")
    );
    // No offset: the tenant's zone (Los Angeles, 5 May), not the deployment's
    // (Berlin, 6 May) nor UTC (6 May).
    let (content, at) = said("zoned");
    assert!(content.contains("4 May 2026"), "{content}");
    assert!(at.starts_with("2026-05-04"), "{at}");

    filter.stop().await;
    extract.stop().await;
    d.remove().await;
}
