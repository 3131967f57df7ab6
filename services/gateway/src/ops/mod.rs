//! What operators watch without Grafana: a snapshot of the pipeline (per-stage
//! progress and lag from JetStream, the DLQ, memory counts, the last
//! maintenance run), served as the `/ops` page and `/ops.json`, and polled
//! every `HINDSIGHT_OPS_POLL` into the gauges on `/metrics`.

mod page;

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use async_nats::jetstream;
use axum::{
    Json, Router,
    extract::State,
    http::header,
    response::{IntoResponse, Response},
    routing::get,
};
use chrono::{DateTime, Utc};
use hindsight_core::{Namespace, memory::Status};
use hindsight_shared::{
    dlq, events,
    status::{self, StreamStatus},
};
use hindsight_store::{Store, maintenance::runs::RunRow, observe::MemoryCount};
use serde::Serialize;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// How many of the newest dead letters the page lists.
const LATEST_DEAD_LETTERS: usize = 10;
/// A page view within this long of the last snapshot reuses it, so many open
/// pages cost one count query, not one each.
const FRESH_FOR: Duration = Duration::from_secs(2);
/// Rates are measured over at least this long, so quick reloads do not
/// divide by almost nothing.
const MIN_RATE_WINDOW: Duration = Duration::from_secs(5);

/// One stage consumer, as JetStream reports it.
#[derive(Debug, Clone, Serialize)]
pub struct StageRow {
    /// The stream's base name (`TURNS`, `KEPT`, `FACTS`, `EMBEDDED`).
    pub stream: String,
    pub consumer: String,
    /// Deliveries acknowledged since the consumer was created.
    pub acked: u64,
    /// Acked deliveries per second since the previous measurement, once there is one.
    pub per_second: Option<f64>,
    /// Not yet delivered.
    pub pending: u64,
    /// Delivered, not yet acked.
    pub ack_pending: u64,
    pub redelivered: u64,
}

impl StageRow {
    /// Messages the stage still has to finish.
    pub fn lag(&self) -> u64 {
        self.pending + self.ack_pending
    }
}

/// The latest maintenance run, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LastRun {
    pub id: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub status: String,
    pub trigger: String,
    /// Changes per step (reinstated, split, decayed, merged, archived,
    /// consolidated, summaries, purged).
    pub counts: Vec<(String, u64)>,
    pub errors: usize,
}

const RUN_STEPS: &[&str] = &[
    "reinstated",
    "split",
    "decayed",
    "merged",
    "archived",
    "consolidated",
    "summaries",
    "purged",
];

impl From<RunRow> for LastRun {
    fn from(run: RunRow) -> Self {
        let counts = RUN_STEPS
            .iter()
            .map(|step| {
                let n = run.counts.get(*step).and_then(|v| v.as_u64()).unwrap_or(0);
                (step.to_string(), n)
            })
            .collect();
        Self {
            id: run.id.to_string(),
            started_at: run.started_at,
            finished_at: run.finished_at,
            status: run.status,
            trigger: run.trigger,
            counts,
            errors: run.errors.as_array().map_or(0, Vec::len),
        }
    }
}

/// Everything the page shows, taken at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub namespace: String,
    pub taken_at: DateTime<Utc>,
    pub stages: Vec<StageRow>,
    pub dlq: Vec<dlq::Depth>,
    pub dlq_total: u64,
    pub dlq_latest: Vec<dlq::Entry>,
    /// Memories per tenant and status; `None` when they could not be counted.
    pub memories: Option<Vec<MemoryCount>>,
    pub last_run: Option<LastRun>,
    /// Parts that could not be read (the rest of the page is still right).
    pub problems: Vec<String>,
}

impl Snapshot {
    /// Memories in `status`, all tenants together.
    pub fn memories_in(&self, status: Status) -> i64 {
        self.memories
            .iter()
            .flatten()
            .filter(|m| m.status == status)
            .map(|m| m.count)
            .sum()
    }
}

#[derive(Default)]
struct Memory {
    latest: Option<(Instant, Arc<Snapshot>)>,
    /// Per consumer: when its ack floor was last measured, and what it was.
    rate_base: HashMap<String, (Instant, u64)>,
    /// Gauge label sets set before, so a vanished one is set to 0.
    dlq_seen: BTreeSet<(String, String)>,
    memories_seen: BTreeSet<(String, Status)>,
}

/// Takes snapshots and keeps what rates and gauges need between them.
#[derive(Clone)]
pub struct Observer {
    js: jetstream::Context,
    ns: Namespace,
    store: Store,
    memory: Arc<Mutex<Memory>>,
}

impl Observer {
    pub fn new(js: jetstream::Context, ns: Namespace, store: Store) -> Self {
        Self {
            js,
            ns,
            store,
            memory: Arc::default(),
        }
    }

    /// A snapshot no older than [`FRESH_FOR`].
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        self.refresh(FRESH_FOR).await
    }

    /// Takes a fresh snapshot (which sets the gauges).
    pub async fn poll(&self) -> Arc<Snapshot> {
        self.refresh(Duration::ZERO).await
    }

    /// The latest snapshot if younger than `max_age`, else a new one.
    async fn refresh(&self, max_age: Duration) -> Arc<Snapshot> {
        let mut memory = self.memory.lock().await;
        if let Some((at, snap)) = &memory.latest
            && at.elapsed() < max_age
        {
            return snap.clone();
        }
        let snap = Arc::new(self.take(&mut memory).await);
        memory.latest = Some((Instant::now(), snap.clone()));
        snap
    }

    async fn take(&self, memory: &mut Memory) -> Snapshot {
        let mut problems = Vec::new();
        let (streams, depths, latest, memories, last_run) = tokio::join!(
            status::collect(&self.js, &self.ns),
            dlq::depths(&self.js, &self.ns),
            dlq::latest(&self.js, &self.ns, LATEST_DEAD_LETTERS),
            self.store.memory_counts(),
            self.store.last_real_run(),
        );
        let now = Instant::now();
        let stages = match streams {
            Ok(streams) => stage_rows(&self.ns, &streams, now, &mut memory.rate_base),
            Err(e) => {
                problems.push(format!("streams: {e}"));
                Vec::new()
            }
        };
        let dlq = depths.unwrap_or_else(|e| {
            problems.push(format!("DLQ depth: {e}"));
            Vec::new()
        });
        let dlq_latest = latest.unwrap_or_else(|e| {
            problems.push(format!("latest dead letters: {e}"));
            Vec::new()
        });
        let memories = memories
            .inspect_err(|e| problems.push(format!("memory counts: {e}")))
            .ok();
        let last_run = match last_run {
            Ok(run) => run.map(LastRun::from),
            Err(e) => {
                problems.push(format!("last maintenance run: {e}"));
                None
            }
        };
        let snap = Snapshot {
            namespace: self.ns.to_string(),
            taken_at: Utc::now(),
            dlq_total: dlq.iter().map(|d| d.count).sum(),
            stages,
            dlq,
            dlq_latest,
            memories,
            last_run,
            problems,
        };
        set_gauges(&snap, memory);
        snap
    }
}

fn stage_rows(
    ns: &Namespace,
    streams: &[StreamStatus],
    now: Instant,
    rate_base: &mut HashMap<String, (Instant, u64)>,
) -> Vec<StageRow> {
    // Streams by their base name (TURNS, KEPT…), the same in every namespace.
    let prefix = ns.stream_name("");
    let mut rows = Vec::new();
    for s in streams {
        let stream = s.stream.strip_prefix(&prefix).unwrap_or(&s.stream);
        for c in &s.consumers {
            let key = format!("{}/{}", s.stream, c.name);
            let per_second = match rate_base.get(&key) {
                Some(&(at, acked)) if now.duration_since(at) >= MIN_RATE_WINDOW => {
                    let rate =
                        c.acked.saturating_sub(acked) as f64 / now.duration_since(at).as_secs_f64();
                    rate_base.insert(key, (now, c.acked));
                    Some(rate)
                }
                Some(_) => None,
                None => {
                    rate_base.insert(key, (now, c.acked));
                    None
                }
            };
            rows.push(StageRow {
                stream: stream.to_string(),
                consumer: c.name.clone(),
                acked: c.acked,
                per_second,
                pending: c.pending,
                ack_pending: c.ack_pending,
                redelivered: c.redelivered,
            });
        }
    }
    rows
}

fn set_gauges(snap: &Snapshot, memory: &mut Memory) {
    for s in &snap.stages {
        events::ConsumerObserved {
            stream: &s.stream,
            consumer: &s.consumer,
            pending: s.pending,
            ack_pending: s.ack_pending,
            redelivered: s.redelivered,
        }
        .emit();
    }
    let dlq_now: BTreeSet<(String, String)> = snap
        .dlq
        .iter()
        .map(|d| (d.stage.clone(), d.tenant.clone()))
        .collect();
    for (stage, tenant) in memory.dlq_seen.difference(&dlq_now) {
        events::DlqObserved {
            stage,
            tenant,
            depth: 0,
        }
        .emit();
    }
    for d in &snap.dlq {
        events::DlqObserved {
            stage: &d.stage,
            tenant: &d.tenant,
            depth: d.count,
        }
        .emit();
    }
    memory.dlq_seen.extend(dlq_now);
    // Only a readable count replaces the last one: a failed query leaves the gauges as they were.
    if let Some(counts) = &snap.memories {
        let now: BTreeSet<(String, Status)> = counts
            .iter()
            .map(|m| (m.tenant.clone(), m.status))
            .collect();
        for (tenant, status) in memory.memories_seen.difference(&now) {
            events::MemoriesObserved {
                tenant,
                status: status.as_str(),
                count: 0,
            }
            .emit();
        }
        for m in counts {
            events::MemoriesObserved {
                tenant: &m.tenant,
                status: m.status.as_str(),
                count: u64::try_from(m.count).unwrap_or(0),
            }
            .emit();
        }
        memory.memories_seen.extend(now);
    }
    if let Some(finished_at) = snap
        .last_run
        .as_ref()
        .filter(|r| r.status == "finished")
        .and_then(|r| r.finished_at)
    {
        events::JanitorLastRunObserved { finished_at }.emit();
    }
}

/// Polls every `every` until `shutdown`, keeping the gauges current.
pub async fn poll(observer: Observer, every: Duration, shutdown: CancellationToken) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {
                let snap = observer.poll().await;
                for problem in &snap.problems {
                    tracing::warn!(%problem, "ops poll: part of the snapshot could not be read");
                }
            }
        }
    }
}

/// `/ops` (the page, refreshing itself every `refresh`) and `/ops.json`.
pub fn router(observer: Observer, refresh: Duration) -> Router {
    Router::new()
        .route("/ops", get(html))
        .route("/ops.json", get(json))
        .with_state((observer, refresh))
}

async fn html(State((observer, refresh)): State<(Observer, Duration)>) -> Response {
    let snap = observer.snapshot().await;
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page::render(&snap, refresh),
    )
        .into_response()
}

async fn json(State((observer, _)): State<(Observer, Duration)>) -> Json<Snapshot> {
    Json(observer.snapshot().await.as_ref().clone())
}
