//! Hostile and broken turns (`tests/corpus/hostile.jsonl`) published with a
//! plain JetStream client into the whole system running in-process: each one
//! ends where its case says — in the DLQ with a reason naming the problem, or
//! in the archive with its fate (or refused by NATS at publish time, which the
//! publisher is told) — matched by stream sequence and turn id; none is lost;
//! nothing panics; and a normal turn published afterwards is processed at once.
//!
//! A case is one JSON line: `name`, `category`, `subject_tenant`, the payload
//! as `payload` (a JSON value, serialised compactly), `payload_text` (exact
//! text) or `payload_bytes` (text in which `\xNN` stands for a raw byte), an
//! optional `repeat` expanding `@@` in the text (`wrap[0]`, `open` × `times`
//! with `{i}` the index, `core`, `close` × `times`, `wrap[1]`), and what must
//! become of it: `expect` (`dlq`, `archived`, `duplicate`,
//! `refused_at_publish`), `reason` (a substring of the DLQ or archive reason),
//! `fate` and `turn_id` for archived turns.

use std::{
    collections::{BTreeMap, HashMap},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use hindsight_core::Topic;
use hindsight_tests::{
    Deployment, eventually,
    stack::{Stack, drained},
};
use serde::Deserialize;
use serde_json::{Value, json};

const TENANT: &str = "acme";
const CORPUS: &str = include_str!("../corpus/hostile.jsonl");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    category: String,
    subject_tenant: String,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    payload_text: Option<String>,
    #[serde(default)]
    payload_bytes: Option<String>,
    #[serde(default)]
    repeat: Option<Repeat>,
    /// The payload's exact size, when the case is about a boundary.
    #[serde(default)]
    bytes: Option<usize>,
    expect: Expect,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    fate: Option<String>,
    #[serde(default)]
    turn_id: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repeat {
    open: String,
    times: usize,
    #[serde(default)]
    core: String,
    #[serde(default)]
    close: String,
    #[serde(default)]
    wrap: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Expect {
    Dlq,
    Archived,
    Duplicate,
    RefusedAtPublish,
}

fn corpus() -> Vec<Case> {
    CORPUS
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("hostile.jsonl line {}: {e}", i + 1))
        })
        .collect()
}

/// `\xNN` → the byte NN; everything else as UTF-8.
fn unescape_bytes(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') && i + 4 <= bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).expect("hex digits");
            out.push(u8::from_str_radix(hex, 16).expect("a \\xNN escape"));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn expand(text: &str, r: &Repeat) -> String {
    let mut fill = String::new();
    let mut wrap = r.wrap.chars();
    if let Some(c) = wrap.next() {
        fill.push(c);
    }
    for i in 0..r.times {
        fill.push_str(&r.open.replace("{i}", &i.to_string()));
    }
    fill.push_str(&r.core);
    for _ in 0..r.times {
        fill.push_str(&r.close);
    }
    if let Some(c) = wrap.next() {
        fill.push(c);
    }
    assert!(text.contains("@@"), "a repeat needs @@ in the text");
    text.replacen("@@", &fill, 1)
}

fn payload(case: &Case) -> Vec<u8> {
    let given = [
        case.payload.is_some(),
        case.payload_text.is_some(),
        case.payload_bytes.is_some(),
    ];
    assert_eq!(
        given.iter().filter(|g| **g).count(),
        1,
        "{}: exactly one of payload, payload_text, payload_bytes",
        case.name
    );
    let bytes = if let Some(v) = &case.payload {
        v.to_string().into_bytes()
    } else if let Some(t) = &case.payload_text {
        match &case.repeat {
            Some(r) => expand(t, r).into_bytes(),
            None => t.clone().into_bytes(),
        }
    } else {
        unescape_bytes(case.payload_bytes.as_deref().unwrap_or_default())
    };
    if let Some(size) = case.bytes {
        assert_eq!(bytes.len(), size, "{}: payload size", case.name);
    }
    bytes
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// The name of this test's runtime threads.
const THREADS: &str = "hostile-input";

/// Counts every panic of this test (a stage's handler runs in its own task,
/// and the runner turns a panic there into a retry, so it would not show
/// otherwise): on the test's thread, its runtime's threads, and unnamed ones
/// (rayon's, where the embedder computes). Other suites share the process, and
/// the runner's panics on purpose, on threads of runtimes of their own.
fn count_panics() {
    let test_thread = std::thread::current().name().map(str::to_owned);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name();
        if name.is_none() || name == Some(THREADS) || name == test_thread.as_deref() {
            PANICS.fetch_add(1, Ordering::SeqCst);
        }
        default(info);
    }));
}

/// One row of the archive.
#[derive(Debug, sqlx::FromRow)]
struct Archived {
    turn_id: String,
    stream_seq: i64,
    fate: String,
    reason: Option<String>,
    content: String,
    duplicate_seqs: Vec<i64>,
}

/// What became of one published case.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    #[default]
    Nowhere,
    Dlq,
    Kept,
    Dropped,
    Duplicate,
    Refused,
}

#[test]
fn every_hostile_turn_ends_in_the_dlq_or_the_archive_with_its_reason() {
    count_panics();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(THREADS)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(hostile_corpus());
}

async fn hostile_corpus() {
    let cases = corpus();
    let mut names = std::collections::HashSet::new();
    for c in &cases {
        assert!(names.insert(c.name.as_str()), "case {} twice", c.name);
    }
    assert!(cases.len() >= 50, "at least 50 cases");

    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let js = d.ctx.bus.js.clone();
    let ns = d.config().namespace.clone();

    // Publish every case, as any agent would, and note its stream sequence.
    let mut seq_of: HashMap<&str, u64> = HashMap::new();
    let mut refused: HashMap<&str, String> = HashMap::new();
    for case in &cases {
        let subject = ns.subject(Topic::Turns, &case.subject_tenant);
        let body = payload(case);
        let stored = async {
            js.publish(subject.clone(), body.into())
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        match stored {
            Ok(ack) => {
                seq_of.insert(&case.name, ack.sequence);
            }
            Err(e) => {
                refused.insert(&case.name, e);
            }
        }
    }
    let published = seq_of.len();

    // Everything published is archived (once, or as a duplicate) or dead-lettered.
    let pool = d.ctx.store.pool.clone();
    let accounted = || {
        let (pool, d) = (pool.clone(), &d);
        async move {
            let archived: i64 = sqlx::query_scalar(
                "SELECT coalesce(sum(1 + cardinality(duplicate_seqs)), 0)::bigint FROM turns",
            )
            .fetch_one(&pool)
            .await
            .expect("query");
            archived as usize + d.dead_letters().await.len()
        }
    };
    // Not `eventually`: on a timeout the cases below say which ones are missing.
    let deadline = Instant::now() + Duration::from_secs(120);
    while accounted().await < published && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "filter backlog after the wait: {}",
        d.backlog("TURNS", "filter").await
    );
    let rows: Vec<Archived> = sqlx::query_as(
        "SELECT turn_id, stream_seq, fate, reason, content, duplicate_seqs FROM turns",
    )
    .fetch_all(&pool)
    .await
    .expect("query");
    let dead = d.dead_letters().await;

    let by_seq: HashMap<u64, &Archived> = rows.iter().map(|r| (r.stream_seq as u64, r)).collect();
    let dup_of: HashMap<u64, &Archived> = rows
        .iter()
        .flat_map(|r| r.duplicate_seqs.iter().map(move |s| (*s as u64, r)))
        .collect();
    let dlq_by_seq: HashMap<u64, &hindsight_shared::dlq::Entry> =
        dead.iter().map(|e| (e.original_seq, e)).collect();

    let mut failures = Vec::new();
    let mut table: BTreeMap<&str, BTreeMap<Seen, usize>> = BTreeMap::new();
    for case in &cases {
        let fail = |what: String| format!("{} ({}): {what}", case.name, case.category);
        let reason = case.reason.as_deref().unwrap_or("");
        let seen = if let Some(e) = refused.get(case.name.as_str()) {
            if case.expect != Expect::RefusedAtPublish {
                failures.push(fail(format!("refused at publish: {e}")));
            }
            Seen::Refused
        } else {
            let seq = seq_of[case.name.as_str()];
            match (dlq_by_seq.get(&seq), by_seq.get(&seq), dup_of.get(&seq)) {
                (Some(letter), None, None) => {
                    if case.expect != Expect::Dlq {
                        failures.push(fail(format!("dead-lettered: {}", letter.reason)));
                    } else if !letter.reason.starts_with("invalid turn: ")
                        || !letter.reason.contains(reason)
                    {
                        failures.push(fail(format!(
                            "DLQ reason {:?} does not say {reason:?}",
                            letter.reason
                        )));
                    }
                    if letter.stage != "filter"
                        || letter.original_subject != ns.subject(Topic::Turns, &case.subject_tenant)
                    {
                        failures.push(fail(format!("dead letter {letter:?}")));
                    }
                    Seen::Dlq
                }
                (None, Some(row), None) => {
                    let fate = if row.fate == "kept" {
                        Seen::Kept
                    } else {
                        Seen::Dropped
                    };
                    if case.expect != Expect::Archived {
                        failures.push(fail(format!("archived as {} ({:?})", row.fate, row.reason)));
                    } else {
                        if case.fate.as_deref() != Some(row.fate.as_str()) {
                            failures.push(fail(format!("fate {} ({:?})", row.fate, row.reason)));
                        }
                        if !row.reason.as_deref().unwrap_or("").contains(reason) {
                            failures.push(fail(format!("archive reason {:?}", row.reason)));
                        }
                        if case.turn_id.as_deref().is_some_and(|t| t != row.turn_id) {
                            failures.push(fail(format!("archived as turn {:?}", row.turn_id)));
                        }
                        // The content is stored as sent (none of these carries a secret).
                        let body = payload(case);
                        let body = body.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&body);
                        let sent: Option<Value> = serde_json::from_slice(body).ok();
                        if let Some(content) = sent.as_ref().and_then(|v| v["content"].as_str())
                            && content != row.content
                        {
                            failures.push(fail("content not stored as sent".into()));
                        }
                    }
                    fate
                }
                (None, None, Some(row)) => {
                    if case.expect != Expect::Duplicate
                        || case.turn_id.as_deref() != Some(row.turn_id.as_str())
                    {
                        failures.push(fail(format!("a duplicate of turn {:?}", row.turn_id)));
                    }
                    Seen::Duplicate
                }
                (None, None, None) => {
                    failures.push(fail(format!("stream sequence {seq}: silently lost")));
                    Seen::Nowhere
                }
                other => {
                    failures.push(fail(format!("in more than one place: {other:?}")));
                    Seen::Nowhere
                }
            }
        };
        *table
            .entry(case.category.as_str())
            .or_default()
            .entry(seen)
            .or_default() += 1;
    }
    for (name, error) in &refused {
        let case = cases.iter().find(|c| c.name == *name).expect("a case");
        if case.expect == Expect::RefusedAtPublish && error.is_empty() {
            failures.push(format!("{name}: refused without a reason"));
        }
    }

    println!(
        "hostile corpus: {} cases, {published} published",
        cases.len()
    );
    for (category, seen) in &table {
        println!("  {category:<26} {seen:?}");
    }
    assert!(
        failures.is_empty(),
        "{} cases went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );

    drained(&d, rows.len() as i64).await;

    // None lost: what was published is exactly what was archived or dead-lettered.
    let archived_total: usize = rows.iter().map(|r| 1 + r.duplicate_seqs.len()).sum();
    assert_eq!(
        published,
        archived_total + dead.len(),
        "published == archived + dead-lettered"
    );
    assert!(
        dead.iter().all(|l| l.reason.starts_with("invalid turn: ")),
        "only contract violations are dead-lettered (no retries exhausted, no crash)"
    );
    assert!(
        dead.iter()
            .all(|l| l.payload.len() <= 1024 * 1024 && l.deliveries == 1),
        "each refused on its first delivery"
    );
    assert!(
        refused.keys().all(|n| cases
            .iter()
            .any(|c| c.name == *n && c.expect == Expect::RefusedAtPublish)),
        "only the cases NATS itself refuses fail to publish"
    );

    // The stages still work: a normal turn published now becomes a memory
    // that recall finds, promptly.
    let started = Instant::now();
    let turn = json!({
        "tenant": TENANT, "user_id": "mallory", "session_id": "s-after", "turn_id": "after-the-storm",
        "content": "I adopted a greyhound called Comet after the storm",
    });
    d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
    eventually(
        "the turn after the corpus becomes a memory",
        Duration::from_secs(30),
        || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM memory_sources s JOIN memories m ON m.id = s.memory_id
                     WHERE s.turn_id = 'after-the-storm' AND m.index_state = 'indexed'",
                )
                .fetch_one(&pool)
                .await
                .expect("query")
                    > 0
            }
        },
    )
    .await;
    let key = d.ctx.store.create_tenant_key(TENANT).await.expect("key");
    let answer: Value = serde_json::from_str(
        &hindsight_tests::http()
            .post(format!("{}/v1/recall", stack.base_url))
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .body(
                json!({"user_id": "mallory", "query": "what dog did I adopt?", "top_k": 5})
                    .to_string(),
            )
            .send()
            .await
            .expect("the gateway answers")
            .text()
            .await
            .expect("a body"),
    )
    .expect("JSON");
    assert!(
        answer["memories"].as_array().is_some_and(|m| m
            .iter()
            .any(|m| m["provenance"] == json!(["after-the-storm"]))),
        "recall finds the turn published after the corpus: {answer}"
    );
    println!(
        "a normal turn after the corpus: memory and recall in {:?}",
        started.elapsed()
    );

    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "nothing panicked");
    stack.shutdown.cancel();
    stack
        .running
        .wait()
        .await
        .expect("every stage was still running and stopped cleanly");
    d.remove().await;
}
