//! Waiting for the pipeline to drain.

use super::*;

/// A stage consumer's state, or why JetStream did not give it (it may be
/// down during an outage).
async fn consumer_info(
    d: &Deployment,
    stream: &str,
    consumer: &str,
) -> Result<jetstream::consumer::Info, String> {
    let name = d.config().namespace.stream_name(stream);
    let stream = d
        .ctx
        .bus
        .js
        .get_stream(&name)
        .await
        .map_err(|e| format!("no stream {name} ({e})"))?;
    stream
        .consumer_info(consumer)
        .await
        .map_err(|e| format!("no consumer info ({e})"))
}

/// Messages pending or unacknowledged on the stages' consumers (None while
/// JetStream does not answer).
async fn backlog(d: &Deployment) -> Option<u64> {
    let mut total = 0;
    for (stream, consumer) in STAGE_CONSUMERS {
        let info = consumer_info(d, stream, consumer).await.ok()?;
        total += info.num_pending + info.num_ack_pending as u64;
    }
    Some(total)
}

/// Each stage consumer's state, one line each, for a failure message: what
/// waits, what is held unacknowledged, what was redelivered, and how many
/// pull requests wait.
pub async fn consumers(d: &Deployment) -> String {
    let mut lines = Vec::new();
    for (stream, consumer) in STAGE_CONSUMERS {
        lines.push(match consumer_info(d, stream, consumer).await {
            Ok(i) => format!(
                "{consumer}: pending {}, unacknowledged {}, redelivered {}, pull requests waiting {}",
                i.num_pending, i.num_ack_pending, i.num_redelivered, i.num_waiting
            ),
            Err(e) => format!("{consumer}: {e}"),
        });
    }
    lines.join("; ")
}

pub(super) async fn dead_letters(
    d: &Deployment,
) -> Option<Vec<hindsight_tests::hindsight_shared::dlq::Entry>> {
    hindsight_tests::hindsight_shared::dlq::list(
        &d.ctx.bus.js,
        &d.config().namespace,
        &Default::default(),
    )
    .await
    .ok()
}

/// How long the pipeline may go without progress before a wait gives up,
/// and how long a wait may take in all. A slow machine (a CI runner shared
/// with other work) drains slowly but steadily; a stuck pipeline stops
/// making progress: the first is waited for, the second fails fast.
pub struct Patience {
    pub stall: Duration,
    pub cap: Duration,
}

pub const PATIENCE: Patience = Patience {
    stall: Duration::from_secs(120),
    cap: Duration::from_secs(900),
};

/// Waits (supervising the processes) until every valid turn went through the
/// filter, every kept turn was extracted, every fact is in a memory, the index
/// caught up, every invalid turn is in the DLQ and every consumer is settled.
/// Returns how long that took, or why it gave up: no progress for
/// `patience.stall`, or not done within `patience.cap`; with the work left
/// and the work done every 15 s, to tell a slow drain from a stuck one.
///
/// Progress is work left shrinking below its least or work done growing past
/// its most. Work left alone is not enough: while the filter and extraction
/// still turn a backlog of turns into facts, it grows faster than a slow
/// persist shrinks it, though every stage is working.
pub async fn drained(
    d: &Deployment,
    turns: &Turns,
    pipeline: &mut Pipeline,
    patience: &Patience,
) -> Result<Duration, String> {
    let started = Instant::now();
    let mut least: Option<u64> = None;
    let mut most: Option<i64> = None;
    let mut progressed = started;
    let mut trace: Vec<String> = Vec::new();
    let mut traced = started;
    loop {
        pipeline.supervise();
        let backlog = backlog(d).await;
        let done = backlog == Some(0)
            && d.ctx
                .store
                .drained(turns.valid.len())
                .await
                .unwrap_or(false)
            && dead_letters(d)
                .await
                .is_some_and(|l| l.len() >= turns.invalid.len());
        if done {
            return Ok(started.elapsed());
        }
        let left = match (backlog, pending_index(d).await) {
            (Some(b), Some(i)) => Some(b + i.max(0) as u64),
            _ => None,
        };
        if let Some(left) = left
            && least.is_none_or(|l| left < l)
        {
            least = Some(left);
            progressed = Instant::now();
        }
        let done = work_done(d).await;
        if let Some(done) = done
            && most.is_none_or(|m| done > m)
        {
            most = Some(done);
            progressed = Instant::now();
        }
        if traced.elapsed() >= Duration::from_secs(15) || trace.is_empty() {
            traced = Instant::now();
            let known = |n: Option<String>| n.unwrap_or_else(|| "?".into());
            trace.push(format!(
                "{:.0} s: {} left, {} done",
                started.elapsed().as_secs_f64(),
                known(left.map(|l| l.to_string())),
                known(done.map(|n| n.to_string())),
            ));
        }
        let why = if progressed.elapsed() > patience.stall {
            Some(format!("no progress for {:?}", patience.stall))
        } else if started.elapsed() > patience.cap {
            Some(format!("not drained within {:?}", patience.cap))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "{why} (work left in the consumers and the index, and work done, every 15 s: {})",
                trace.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Work the stages have done, a count that only grows while they work:
/// turns archived, turns extracted, facts placed in a memory, memories
/// indexed (None while PostgreSQL does not answer).
async fn work_done(d: &Deployment) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM turns)
              + (SELECT count(*) FROM turns WHERE extract_outcome IS NOT NULL)
              + (SELECT count(*) FROM memory_sources)
              + (SELECT count(*) FROM memories WHERE index_state <> 'pending')",
    )
    .fetch_one(&d.ctx.store.pool)
    .await
    .ok()
}

/// Memories still waiting to be indexed.
pub async fn pending_index(d: &Deployment) -> Option<i64> {
    sqlx::query_scalar("SELECT count(*) FROM memories WHERE index_state = 'pending'")
        .fetch_one(&d.ctx.store.pool)
        .await
        .ok()
}

/// Memories written so far.
pub async fn memories(d: &Deployment) -> Option<i64> {
    sqlx::query_scalar("SELECT count(*) FROM memories")
        .fetch_one(&d.ctx.store.pool)
        .await
        .ok()
}
