//! The `turns` archive `bench janitor` loads beside the memories: as many
//! turns as asked, received over the same two years (uniformly, so a first
//! run with the default retention deletes about three quarters and empties
//! most of the rest), nine in ten kept with one extracted fact, one in ten
//! dropped as noise. Written by Postgres itself (`generate_series`, every
//! "random" choice a function of the turn's number), so the load costs
//! next to nothing and runs are comparable.

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use sqlx::PgPool;

/// Turns written per statement.
const SLICE: i64 = 100_000;

pub(super) async fn load(
    pool: &PgPool,
    turns: usize,
    users: usize,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let total = turns as i64;
    let slices: Vec<(i64, i64)> = (0..(total + SLICE - 1) / SLICE)
        .map(|i| (i * SLICE + 1, ((i + 1) * SLICE).min(total)))
        .collect();
    futures::stream::iter(slices)
        .map(|(from, to)| slice(pool, from, to, users.max(1) as i64, now))
        .buffer_unordered(2)
        .try_collect::<()>()
        .await
}

async fn slice(
    pool: &PgPool,
    from: i64,
    to: i64,
    users: i64,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO turns (tenant, turn_id, user_id, session_id, speaker, role, source, trust,
                            content, metadata, ts, received_at, stream_seq, fate, reason, flags,
                            extract_outcome, extractor, facts)
         SELECT (ARRAY['acme', 'globex', 'initech'])[1 + u % 3], 'turn-' || g,
                'user-' || lpad(u::text, 5, '0'), u || '-s' || (g % 40),
                CASE WHEN g % 2 = 0 THEN person ELSE 'assistant' END,
                CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END,
                CASE WHEN g % 2 = 0 THEN 'user' ELSE 'agent' END, 'high',
                text, jsonb_build_object('channel', 'chat', 'client', 'bench'),
                at, at, g,
                CASE WHEN g % 10 = 0 THEN 'dropped' ELSE 'kept' END,
                CASE WHEN g % 10 = 0 THEN 'noise' END,
                ARRAY['screen:0.01'],
                CASE WHEN g % 10 <> 0 THEN 'facts' END,
                CASE WHEN g % 10 <> 0 THEN 'rules' END,
                CASE WHEN g % 10 <> 0 THEN jsonb_build_array(jsonb_build_object(
                    'fact_id', 'fact-' || g, 'content', person || ' enjoys ' || thing,
                    'fact_type', 'preference', 'importance', 0.5)) END
         FROM generate_series($1::bigint, $2::bigint) AS g
         CROSS JOIN LATERAL (SELECT
             (g * 40503) % $3 AS u,
             $4::timestamptz - make_interval(secs => ((g * 7919) % 1000003) / 1000003.0 * 730 * 86400) AS at,
             (ARRAY['Caroline', 'Melanie', 'Tom', 'Aiko', 'Ravi', 'Joanna', 'Nate', 'Li'])[1 + g % 8] AS person,
             (ARRAY['jazz records', 'green tea', 'trail running', 'night trains', 'old maps'])[1 + g % 5] AS thing
         ) k
         CROSS JOIN LATERAL (SELECT
             person || ' said they have been into ' || thing || ' lately, and that next month they '
             || 'want to take it further with friends from work, if the weather holds. (' || g || ')' AS text
         ) c",
    )
    .bind(from)
    .bind(to)
    .bind(users)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}
