//! What the fault suites share: the pipeline as four `hindsight run STAGE`
//! processes with a deployment's environment (killed, restarted, and
//! supervised as compose's `restart: unless-stopped` would), a publisher that
//! retries unacknowledged publishes under the same message id, outages of the
//! machine's PostgreSQL and NATS, and the invariants checked afterwards.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
    time::{Duration, Instant},
};

use async_nats::jetstream;
use hindsight_core::Topic;
use hindsight_tests::{Deployment, STAGE_CONSUMERS};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{Child, Command},
};

/// The pipeline's stages, in order.
pub const STAGES: [&str; 4] = ["filter", "extract", "embed", "persist"];

/// The embedding model name the processes send to the fake endpoint.
pub const EMBED_MODEL: &str = "fake-bag-of-words";

// ---------------------------------------------------------------- turns

/// The turns of one suite: envelopes in publish order, and which turn ids
/// the filter must archive (valid) or dead-letter (invalid).
pub struct Turns {
    pub tenant: String,
    pub envelopes: Vec<Value>,
    pub valid: Vec<String>,
    pub invalid: Vec<String>,
}

fn locomo() -> &'static Vec<crate::locomo::Turn> {
    static TURNS: OnceLock<Vec<crate::locomo::Turn>> = OnceLock::new();
    TURNS.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval/locomo-dev.json");
        match crate::locomo::load(&path) {
            Ok(d) => d.turns,
            Err(e) => {
                eprintln!("LoCoMo not readable ({e}): synthetic turns instead");
                Vec::new()
            }
        }
    })
}

const CITIES: &[&str] = &["Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn"];
const PEOPLE: &[&str] = &["Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna"];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

/// `n` realistic turns of `tenant`: LoCoMo's conversations under new ids
/// (round `r` of the data gets ids and sessions prefixed `r<r>-`, so a
/// repeated conversation is the same user saying the same things again), or
/// synthetic ones when the data is missing. Every `invalid_every`-th turn
/// breaks the contract (its user id has a space), for the DLQ.
pub fn turns(tenant: &str, n: usize, offset: usize, invalid_every: usize) -> Turns {
    let data = locomo();
    let mut out = Turns {
        tenant: tenant.to_string(),
        envelopes: Vec::with_capacity(n),
        valid: Vec::new(),
        invalid: Vec::new(),
    };
    for i in 0..n {
        let k = i + offset;
        let mut v = if data.is_empty() {
            let content = TEMPLATES[k % TEMPLATES.len()]
                .replace("{city}", CITIES[(k / 7) % CITIES.len()])
                .replace("{person}", PEOPLE[(k / 3) % PEOPLE.len()])
                .replace("{n}", &(2 + k % 97).to_string());
            json!({
                "user_id": format!("user-{}", k % 20),
                "session_id": format!("session-{}", k % 100),
                "turn_id": format!("synthetic-{k}"),
                "content": format!("{content} (note {k})"),
            })
        } else {
            let t = &data[k % data.len()];
            let round = k / data.len();
            let mut v = t.envelope();
            v["turn_id"] = json!(format!("r{round}-{}-{}", t.user_id, t.turn_id));
            v["session_id"] = json!(format!("r{round}-{}", t.session_id));
            v
        };
        v["tenant"] = json!(tenant);
        let id = v["turn_id"].as_str().unwrap_or_default().to_string();
        if invalid_every > 0 && i % invalid_every == invalid_every - 1 {
            v["user_id"] = json!("not a valid id");
            out.invalid.push(id);
        } else {
            out.valid.push(id);
        }
        out.envelopes.push(v);
    }
    out
}

// ---------------------------------------------------------------- publishing

#[derive(Debug, Default, Clone)]
pub struct Published {
    /// Publishes that got no ack and were sent again (same message id).
    pub retried: usize,
    /// Acks that said "duplicate": a retried publish whose first attempt had
    /// been stored after all.
    pub duplicate_acks: usize,
    pub seconds: f64,
}

/// Publishes the envelopes with JetStream publish, message id
/// `<tenant>:<turn_id>`, at about `per_second`, 32 acks in flight; a publish
/// that gets no ack (error or timeout) is sent again with the same id until
/// acknowledged, so each turn is stored exactly once.
pub async fn publish(
    js: jetstream::Context,
    subject: String,
    tenant: String,
    envelopes: Vec<Value>,
    per_second: f64,
) -> Published {
    const WINDOW: usize = 32;
    let started = Instant::now();
    let mut report = Published::default();
    for (n, chunk) in envelopes.chunks(WINDOW).enumerate() {
        let mut pending: Vec<&Value> = chunk.iter().collect();
        let mut rounds = 0;
        while !pending.is_empty() {
            let mut acks = Vec::with_capacity(pending.len());
            for v in &pending {
                let id = format!("{tenant}:{}", v["turn_id"].as_str().unwrap_or_default());
                let msg = jetstream::message::PublishMessage::build()
                    .payload(v.to_string().into_bytes().into())
                    .message_id(id);
                acks.push(js.send_publish(subject.clone(), msg).await);
            }
            let mut failed = Vec::new();
            for (v, ack) in pending.iter().zip(acks) {
                let acked = match ack {
                    Ok(future) => match future.await {
                        Ok(ack) => {
                            report.duplicate_acks += usize::from(ack.duplicate);
                            true
                        }
                        Err(_) => false,
                    },
                    Err(_) => false,
                };
                if !acked {
                    failed.push(*v);
                }
            }
            if !failed.is_empty() {
                rounds += 1;
                assert!(
                    rounds < 400,
                    "publishes still unacknowledged after {rounds} tries"
                );
                report.retried += failed.len();
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            pending = failed;
        }
        let due = started + Duration::from_secs_f64(((n + 1) * WINDOW) as f64 / per_second);
        tokio::time::sleep_until(due.into()).await;
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// The subject turns of `tenant` are published to in this deployment.
pub fn subject(d: &Deployment, tenant: &str) -> String {
    d.config().namespace.subject(Topic::Turns, tenant)
}

// ---------------------------------------------------------------- processes

/// A stage process that stopped without being asked to, and was restarted.
#[derive(Debug, Clone)]
pub struct Exit {
    pub stage: &'static str,
    pub status: String,
}

struct Proc {
    child: Child,
    port: u16,
    last_spawn: Instant,
}

/// The four stages as `hindsight run STAGE` processes.
pub struct Pipeline {
    env: Vec<(String, String)>,
    logs: PathBuf,
    procs: BTreeMap<&'static str, Proc>,
    /// Processes that exited by themselves (the supervisor restarted them).
    pub exits: Vec<Exit>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Whether the process on `port` answers `/readyz` with 200.
async fn ready(port: u16) -> bool {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    match tokio::time::timeout(Duration::from_secs(2), attempt).await {
        Ok(Ok(buf)) => buf.starts_with(b"HTTP/1.0 200") || buf.starts_with(b"HTTP/1.1 200"),
        _ => false,
    }
}

impl Pipeline {
    /// The environment of the deployment `d`, embedding through `embed_base_url`
    /// (the fake's deterministic vectors), plus `extra`.
    pub fn new(d: &Deployment, suite: &str, embed_base_url: &str, extra: &[(&str, &str)]) -> Self {
        let dimension = hindsight_tests::fake_llm::EMBED_DIMENSION.to_string();
        let mut env: Vec<(String, String)> = d
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(
                [
                    ("HINDSIGHT_EMBED_BASE_URL", embed_base_url),
                    ("HINDSIGHT_EMBED_MODEL", EMBED_MODEL),
                    ("HINDSIGHT_EMBED_DIMENSION", dimension.as_str()),
                    ("HINDSIGHT_LLM_BASE_URL", ""),
                    ("HINDSIGHT_LOG", "info"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
            )
            .collect();
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k.to_string(), v.to_string()));
        }
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("faults")
            .join(suite);
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs).expect("log directory");
        Self {
            env,
            logs,
            procs: BTreeMap::new(),
            exits: Vec::new(),
        }
    }

    fn spawn(&mut self, stage: &'static str) {
        // A fresh port each time: the old one may linger in TIME_WAIT.
        let port = free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{stage}.log")))
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_hindsight"))
            .args(["run", stage])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("HINDSIGHT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("HOSTNAME", format!("faults-{stage}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("hindsight runs");
        self.procs.insert(
            stage,
            Proc {
                child,
                port,
                last_spawn: Instant::now(),
            },
        );
    }

    /// The last lines of a stage's log, for failure messages.
    pub fn log_tail(&self, stage: &str) -> String {
        let text =
            std::fs::read_to_string(self.logs.join(format!("{stage}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Starts every stage and waits until each consumes.
    pub async fn start(&mut self) {
        for stage in STAGES {
            self.spawn(stage);
        }
        for stage in STAGES {
            self.wait_ready(stage, Duration::from_secs(60)).await;
        }
    }

    /// Waits until `stage` answers ready; how long that took.
    pub async fn wait_ready(&mut self, stage: &'static str, timeout: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let proc = self.procs.get_mut(stage).expect("stage started");
            if ready(proc.port).await {
                return started.elapsed();
            }
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!(
                    "{stage} exited ({status}) before it was ready:\n{}",
                    self.log_tail(stage)
                );
            }
            assert!(
                started.elapsed() < timeout,
                "{stage} not ready within {timeout:?}:\n{}",
                self.log_tail(stage)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `kill -9` the stage's process, start it again and wait until it
    /// consumes; returns the time from the kill to ready.
    pub async fn kill9_and_restart(&mut self, stage: &'static str) -> Duration {
        let started = Instant::now();
        let proc = self.procs.get_mut(stage).expect("stage started");
        if let Ok(Some(status)) = proc.child.try_wait() {
            panic!(
                "{stage} had exited by itself ({status}):\n{}",
                self.log_tail(stage)
            );
        }
        proc.child.start_kill().expect("SIGKILL sent");
        let status = proc
            .child
            .wait()
            .await
            .expect("the killed process is reaped");
        assert!(!status.success(), "{stage} was killed: {status}");
        self.spawn(stage);
        self.wait_ready(stage, Duration::from_secs(60)).await;
        started.elapsed()
    }

    /// Restarts processes that exited by themselves, at most once a second per
    /// stage (compose's `restart: unless-stopped`); returns how many it restarted.
    pub fn supervise(&mut self) -> usize {
        let mut exited = Vec::new();
        for (stage, proc) in &mut self.procs {
            if proc.last_spawn.elapsed() < Duration::from_secs(1) {
                continue;
            }
            if let Ok(Some(status)) = proc.child.try_wait() {
                exited.push((*stage, status.to_string()));
            }
        }
        for (stage, status) in &exited {
            eprintln!(
                "faults: {stage} exited by itself ({status}); restarting it. Its log ends:\n{}",
                self.log_tail(stage)
            );
            self.exits.push(Exit {
                stage,
                status: status.clone(),
            });
            self.spawn(stage);
        }
        exited.len()
    }

    /// Sleeps for `d`, supervising meanwhile.
    pub async fn supervised_sleep(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.supervise();
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
    }

    /// SIGTERM to every process, then waits for each (SIGKILL after 30 s).
    /// Returns the stages that did not exit cleanly.
    pub async fn stop(mut self) -> Vec<String> {
        let mut unclean = Vec::new();
        for proc in self.procs.values() {
            if let Some(pid) = proc.child.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
        }
        for (stage, proc) in &mut self.procs {
            match tokio::time::timeout(Duration::from_secs(30), proc.child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => unclean.push(format!("{stage}: {status}")),
                _ => {
                    let _ = proc.child.start_kill();
                    let _ = proc.child.wait().await;
                    unclean.push(format!("{stage}: did not stop within 30 s of SIGTERM"));
                }
            }
        }
        unclean
    }
}

// ---------------------------------------------------------------- waiting

/// Messages pending or unacknowledged on the stages' consumers (None while
/// JetStream does not answer).
async fn backlog(d: &Deployment) -> Option<u64> {
    let mut total = 0;
    for (stream, consumer) in STAGE_CONSUMERS {
        let stream = d
            .ctx
            .bus
            .js
            .get_stream(d.config().namespace.stream_name(stream))
            .await
            .ok()?;
        let info = stream.consumer_info(consumer).await.ok()?;
        total += info.num_pending + info.num_ack_pending as u64;
    }
    Some(total)
}

async fn dead_letters(
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

/// Waits (supervising the processes) until every valid turn went through the
/// filter, every kept turn was extracted, every fact is in a memory, the index
/// caught up, every invalid turn is in the DLQ and every consumer is settled.
/// Returns how long that took, or None after `timeout`.
pub async fn drained(
    d: &Deployment,
    turns: &Turns,
    pipeline: &mut Pipeline,
    timeout: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    loop {
        pipeline.supervise();
        let done = d
            .ctx
            .store
            .drained(turns.valid.len())
            .await
            .unwrap_or(false)
            && dead_letters(d)
                .await
                .is_some_and(|l| l.len() >= turns.invalid.len())
            && backlog(d).await == Some(0);
        if done {
            return Some(started.elapsed());
        }
        if started.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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

// ---------------------------------------------------------------- outages

/// Restarts the machine's PostgreSQL cluster (as its operator would); returns
/// how long it refused connections, from the restart command to the first
/// successful query.
pub async fn restart_postgres(d: &Deployment) -> Duration {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("/etc/postgresql")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        .expect("a PostgreSQL cluster");
    let started = Instant::now();
    let status = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .await
        .expect("pg_ctlcluster runs");
    assert!(status.success(), "pg_ctlcluster restart: {status}");
    while sqlx::query("SELECT 1")
        .execute(&d.ctx.store.pool)
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "PostgreSQL back within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// Whether the machine's PostgreSQL and NATS are the local ones these
/// outages act on.
pub fn local_servers(d: &Deployment) -> (bool, bool) {
    let c = d.config();
    let pg = Path::new("/etc/postgresql").is_dir()
        && Path::new("/usr/bin/pg_ctlcluster").exists()
        && (c.database_url.contains("@127.0.0.1") || c.database_url.contains("@localhost"));
    let nats = Path::new("/usr/sbin/nats-server").exists()
        && (c.nats_url.contains("127.0.0.1:4222") || c.nats_url.contains("localhost:4222"));
    (pg, nats)
}

fn nats_reachable() -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], 4222).into(), Duration::from_millis(200))
        .is_ok()
}

/// Stops the machine's nats-server (SIGTERM, waiting for it to exit).
pub async fn stop_nats() {
    let status = Command::new("start-stop-daemon")
        .args([
            "--stop",
            "--retry",
            "TERM/15/KILL/5",
            "--exec",
            "/usr/sbin/nats-server",
        ])
        .status()
        .await
        .expect("start-stop-daemon runs");
    assert!(status.success(), "nats-server stopped: {status}");
}

/// Starts nats-server exactly as ops/setup.sh does, and waits until it listens.
pub async fn start_nats() {
    let status = Command::new("start-stop-daemon")
        .args([
            "--start",
            "--oknodo",
            "--background",
            "--exec",
            "/usr/sbin/nats-server",
            "--",
            "-a",
            "127.0.0.1",
            "-p",
            "4222",
            "-js",
            "-sd",
            "/var/lib/nats-server",
            "-l",
            "/var/log/nats-server.log",
        ])
        .status()
        .await
        .expect("start-stop-daemon runs");
    assert!(status.success(), "nats-server started: {status}");
    let started = Instant::now();
    while !nats_reachable() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nats-server listening within 30 s (see /var/log/nats-server.log)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------- invariants

/// What became of a suite's turns.
#[derive(Debug, Default)]
pub struct Counts {
    pub published: usize,
    pub stored: u64,
    pub kept: i64,
    pub dropped: i64,
    pub quarantined: i64,
    pub dlq: usize,
    pub by_extractor: BTreeMap<String, i64>,
    pub facts: i64,
    pub memories: i64,
    pub by_status: BTreeMap<String, i64>,
    pub indexed_points: u64,
}

impl Counts {
    pub fn extractors(&self) -> String {
        self.by_extractor
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn statuses(&self) -> String {
        self.by_status
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The counts as one line of a summary.
    pub fn line(&self) -> String {
        format!(
            "published {} (stored once each: {}), kept {}, dropped {}, DLQ {}, extracted by {}, facts {}, memories {} ({}), points in the index {}",
            self.published,
            self.stored,
            self.kept,
            self.dropped,
            self.dlq,
            self.extractors(),
            self.facts,
            self.memories,
            self.statuses(),
            self.indexed_points
        )
    }
}

async fn scalar(d: &Deployment, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&d.ctx.store.pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Checks every invariant once the pipeline is drained and its processes
/// stopped (the embedded index is read here, so persist must have let go of
/// it): the counts, and every violation found.
pub async fn verify(d: &Deployment, turns: &Turns) -> (Counts, Vec<String>) {
    let mut bad = Vec::new();
    let pool = &d.ctx.store.pool;
    let mut counts = Counts {
        published: turns.envelopes.len(),
        ..Default::default()
    };

    // Every publish stored exactly once.
    counts.stored = d.stream_messages("TURNS").await;
    if counts.stored != turns.envelopes.len() as u64 {
        bad.push(format!(
            "TURNS holds {} messages for {} turns published",
            counts.stored,
            turns.envelopes.len()
        ));
    }

    // Every valid turn archived once with its fate, every invalid one in the DLQ.
    let archived: Vec<(String, String)> = sqlx::query_as("SELECT turn_id, fate FROM turns")
        .fetch_all(pool)
        .await
        .expect("turns");
    let archived_ids: HashSet<&str> = archived.iter().map(|(id, _)| id.as_str()).collect();
    for (_, fate) in &archived {
        match fate.as_str() {
            "kept" => counts.kept += 1,
            _ => counts.dropped += 1,
        }
    }
    let valid: HashSet<&str> = turns.valid.iter().map(String::as_str).collect();
    let missing: Vec<&&str> = valid
        .iter()
        .filter(|id| !archived_ids.contains(**id))
        .collect();
    if !missing.is_empty() {
        bad.push(format!(
            "{} valid turns not archived, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    let strangers = archived_ids
        .iter()
        .filter(|id| !valid.contains(**id))
        .count();
    if strangers > 0 {
        bad.push(format!(
            "{strangers} archived turns that were not published as valid"
        ));
    }
    let letters = dead_letters(d).await.expect("DLQ readable");
    counts.dlq = letters.len();
    let mut lettered: HashMap<String, usize> = HashMap::new();
    for l in &letters {
        let id = serde_json::from_slice::<Value>(&l.payload)
            .ok()
            .and_then(|v| v["turn_id"].as_str().map(str::to_string))
            .unwrap_or_default();
        if l.stage != "filter" {
            bad.push(format!(
                "dead letter at {} ({} deliveries): {} — {}",
                l.stage, l.deliveries, l.reason, l.payload_preview
            ));
        } else if l.reason.trim().is_empty() {
            bad.push(format!("dead letter without a reason: {id}"));
        }
        *lettered.entry(id).or_default() += 1;
    }
    for id in &turns.invalid {
        match lettered.get(id) {
            Some(1) => {}
            Some(n) => bad.push(format!("invalid turn {id} dead-lettered {n} times")),
            None => bad.push(format!("invalid turn {id} not in the DLQ")),
        }
    }

    // Every kept turn extracted, and by whom.
    let unextracted = scalar(
        d,
        "SELECT count(*) FROM turns WHERE fate = 'kept' AND extract_outcome IS NULL",
    )
    .await;
    if unextracted > 0 {
        bad.push(format!("{unextracted} kept turns never extracted"));
    }
    counts.quarantined = scalar(d, "SELECT count(*) FROM turns WHERE quarantine").await;
    let extractors: Vec<(Option<String>, i64)> = sqlx::query_as(
        "SELECT extractor, count(*) FROM turns WHERE fate = 'kept' GROUP BY extractor",
    )
    .fetch_all(pool)
    .await
    .expect("extractors");
    counts.by_extractor = extractors
        .into_iter()
        .map(|(e, n)| (e.unwrap_or_else(|| "none".into()), n))
        .collect();

    // Every fact in exactly one memory; every memory with provenance.
    counts.facts = scalar(
        d,
        "SELECT coalesce(sum(jsonb_array_length(facts)), 0)::bigint FROM turns",
    )
    .await;
    let sources = scalar(d, "SELECT count(*) FROM memory_sources").await;
    if sources != counts.facts {
        bad.push(format!(
            "{} facts extracted, {sources} provenance rows",
            counts.facts
        ));
    }
    let unpersisted = scalar(
        d,
        "SELECT count(*) FROM turns t, jsonb_array_elements(t.facts) f
         WHERE NOT EXISTS (SELECT 1 FROM memory_sources s
                           WHERE s.tenant = t.tenant AND s.fact_id = f->>'fact_id')",
    )
    .await;
    if unpersisted > 0 {
        bad.push(format!("{unpersisted} facts in no memory"));
    }
    let orphans = scalar(
        d,
        "SELECT count(*) FROM memory_sources s WHERE NOT EXISTS (
             SELECT 1 FROM turns t, jsonb_array_elements(t.facts) f
             WHERE t.tenant = s.tenant AND t.turn_id = s.turn_id AND f->>'fact_id' = s.fact_id)",
    )
    .await;
    if orphans > 0 {
        bad.push(format!(
            "{orphans} provenance rows naming no extracted fact"
        ));
    }
    let twice = scalar(
        d,
        "SELECT count(*) FROM (SELECT 1 FROM memory_sources GROUP BY tenant, fact_id HAVING count(*) > 1) x",
    )
    .await;
    if twice > 0 {
        bad.push(format!("{twice} facts persisted more than once"));
    }
    let duplicates = scalar(
        d,
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE status = 'active'
             GROUP BY tenant, user_id, embedding_model, content_key HAVING count(*) > 1) x",
    )
    .await;
    if duplicates > 0 {
        bad.push(format!(
            "{duplicates} groups of active memories of one user with the same content key"
        ));
    }
    let unsourced = scalar(
        d,
        "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.memory_id = m.id)",
    )
    .await;
    if unsourced > 0 {
        bad.push(format!("{unsourced} memories without provenance"));
    }
    counts.memories = scalar(d, "SELECT count(*) FROM memories").await;
    let statuses: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM memories GROUP BY status")
            .fetch_all(pool)
            .await
            .expect("statuses");
    counts.by_status = statuses.into_iter().collect();

    // The index caught up, and holds exactly the memories that belong in it.
    let pending = scalar(
        d,
        "SELECT count(*) FROM memories WHERE index_state = 'pending'",
    )
    .await;
    if pending > 0 {
        bad.push(format!("{pending} memories still pending indexing"));
    }
    let index =
        hindsight_index::open(&d.config().index, &d.config().data_dir).expect("the index opens");
    for (name, version, dimension) in d.ctx.store.embedding_models().await.expect("models") {
        let collection = hindsight_index::Collection::for_model(
            &d.config().namespace,
            &hindsight_core::embedding::ModelId {
                name: name.clone(),
                version: version.clone(),
                dimension: dimension.max(0) as usize,
            },
        );
        let points = index.count(&collection, None).await.expect("index count");
        let expected: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM memories WHERE embedding_model = $1 AND embedding_version = $2
                AND status = ANY($3)",
        )
        .bind(&name)
        .bind(&version)
        .bind(hindsight_core::memory::names(
            &hindsight_core::memory::Status::INDEXED,
        ))
        .fetch_one(pool)
        .await
        .expect("indexable memories");
        counts.indexed_points += points;
        if points != expected as u64 {
            bad.push(format!(
                "the index holds {points} points of {name}, Postgres {expected} indexable memories"
            ));
        }
    }
    (counts, bad)
}

// ---------------------------------------------------------------- misc

/// A small deterministic generator (xorshift) for the kill schedule.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in [lo, hi) milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }
}

/// Mean and max of some durations, in ms.
pub fn mean_max(ds: &[Duration]) -> (u128, u128) {
    if ds.is_empty() {
        return (0, 0);
    }
    let total: u128 = ds.iter().map(Duration::as_millis).sum();
    (
        total / ds.len() as u128,
        ds.iter().map(Duration::as_millis).max().unwrap_or(0),
    )
}
