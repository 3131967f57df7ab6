//! Counting expired working-memory keys against the real NATS: each test in a
//! namespace of its own (so tests run in parallel), removed at the end.

use std::time::Duration;

use async_nats::{HeaderMap, jetstream};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use hindsight_core::Namespace;
use hindsight_recall::{WorkingMemory, expired_keys, working::BUCKET, working_expiry};
use hindsight_shared::{Config, bus::Bus, sandbox::Sandbox, streams};
use serde_json::{Map, Value, json};

struct Env {
    config: Config,
    js: jetstream::Context,
    ttl: Duration,
}

impl Env {
    async fn new() -> Self {
        let base = Config::from_env().expect("the environment holds a valid configuration");
        let config = Sandbox::new(&base, "test").config;
        let bus = Bus::connect(&config)
            .await
            .expect("NATS is reachable (see README: the test command starts it)");
        let topology = streams::apply(&bus.js, &config)
            .await
            .expect("streams apply");
        // Applying again changes nothing and fails nothing.
        streams::apply(&bus.js, &config)
            .await
            .expect("streams apply is idempotent");
        let ttl = topology
            .buckets
            .iter()
            .find(|b| b.name == BUCKET)
            .expect("streams/kv.toml declares the working-memory bucket")
            .ttl;
        Self {
            config,
            js: bus.js,
            ttl,
        }
    }

    fn ns(&self) -> &Namespace {
        &self.config.namespace
    }

    async fn expired(&self, ttl: Duration, since: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
        expired_keys(&self.js, self.ns(), ttl, since, until)
            .await
            .expect("the write log is readable")
    }

    /// Deletes the namespace's streams and bucket.
    async fn remove(self) {
        let topology = streams::Topology::load().expect("stream files");
        for (spec, _) in &topology.streams {
            let _ = self
                .js
                .delete_stream(self.ns().stream_name(&spec.name))
                .await;
        }
        for bucket in &topology.buckets {
            let name = self.ns().stream_name(&bucket.name);
            let _ = self.js.delete_stream(format!("KV_{name}")).await;
        }
    }
}

fn changes(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

fn chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).expect("in range")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_keys_by_their_last_write_and_skips_deleted_ones() {
    let env = Env::new().await;
    assert_eq!(env.ttl, Duration::from_secs(3600));
    let ttl = chrono(env.ttl);
    let writes = env
        .js
        .get_stream(env.ns().stream_name(working_expiry::WRITES_STREAM))
        .await
        .expect("streams apply declares the write log")
        .cached_info()
        .clone();
    assert_eq!(writes.config.max_messages_per_subject, 1);
    assert_eq!(
        writes.config.max_age,
        Duration::from_secs(14 * 86400),
        "kept beyond a weekly janitor interval"
    );

    let wm = WorkingMemory::open(&env.js, env.ns())
        .await
        .expect("working memory opens");
    let start = Utc::now();
    assert_eq!(env.expired(env.ttl, start - ttl, start + ttl).await, 0);

    for session in ["s-1", "s-2", "s-3", "s-4"] {
        wm.merge("acme", "alice", session, &changes(json!({"task": session})))
            .await
            .expect("write");
    }
    wm.clear("acme", "alice", "s-3").await.expect("delete");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let middle = Utc::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Overwritten: its TTL runs from this write.
    wm.merge("acme", "alice", "s-2", &changes(json!({"step": 2})))
        .await
        .expect("overwrite");
    let end = Utc::now();
    assert_eq!(
        wm.get("acme", "alice", "s-2").await.expect("read"),
        changes(json!({"task": "s-2", "step": 2}))
    );

    // Nothing written in this test expires within the hour after it started.
    assert_eq!(env.expired(env.ttl, start - ttl, start + ttl).await, 0);
    assert_eq!(env.expired(env.ttl, start - ttl, start).await, 0);
    // s-1, s-2 (last written after `middle`) and s-4; s-3 was deleted.
    assert_eq!(env.expired(env.ttl, start + ttl, end + ttl).await, 3);
    assert_eq!(env.expired(env.ttl, start, end + ttl * 2).await, 3);
    // s-1 and s-4 expire before middle + ttl; s-2's first write does not count.
    assert_eq!(env.expired(env.ttl, start + ttl, middle + ttl).await, 2);
    assert_eq!(env.expired(env.ttl, middle + ttl, end + ttl).await, 1);
    // The window is (since, until]: empty or reversed windows hold nothing.
    assert_eq!(env.expired(env.ttl, end + ttl, end + ttl).await, 0);
    assert_eq!(env.expired(env.ttl, end + ttl, start + ttl).await, 0);
    // A namespace whose streams were never applied is an error, not zero.
    let other = Namespace::new(&format!("{}-x", env.ns())).expect("valid");
    assert!(
        expired_keys(&env.js, &other, env.ttl, start, end + ttl)
            .await
            .is_err()
    );

    let stream = env
        .js
        .get_stream(env.ns().stream_name(working_expiry::WRITES_STREAM))
        .await
        .expect("write log");

    // One lifetime recorded twice (kept as expired, but the record of the write
    // that followed was lost) counts once.
    let s1 = ["acme", "alice", "s-1"].map(hex::encode).join(".");
    let last = stream
        .get_last_raw_message_by_subject(&env.ns().absolute(&format!("working.written.{s1}")))
        .await
        .expect("s-1 was recorded");
    let written_at = DateTime::from_timestamp_nanos(last.time.unix_timestamp_nanos() as i64);
    let mut headers = HeaderMap::new();
    headers.insert(
        working_expiry::HEADER_WRITTEN_AT,
        written_at
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
            .as_str(),
    );
    env.js
        .publish_with_headers(
            env.ns()
                .absolute(&format!("working.expired.{s1}.{}", last.sequence)),
            headers,
            Bytes::new(),
        )
        .await
        .expect("publish")
        .await
        .expect("stored");
    assert_eq!(env.expired(env.ttl, start + ttl, end + ttl).await, 3);

    // The write log holds no content: headers only.
    let info = stream.get_info().await.expect("write log info");
    for seq in info.state.first_sequence..=info.state.last_sequence {
        if let Ok(msg) = stream.get_raw_message(seq).await {
            assert!(msg.payload.is_empty(), "record {seq} carries a payload");
            assert!(
                !format!("{:?}", msg.headers).contains("task"),
                "record {seq} carries content"
            );
        }
    }
    env.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_expired_and_was_written_again_counts_each_expiry() {
    let env = Env::new().await;
    // This namespace's bucket with a TTL of two seconds, so that keys really expire.
    let ttl = Duration::from_secs(2);
    let bucket = format!("KV_{}", env.ns().stream_name(BUCKET));
    let mut config = env
        .js
        .get_stream(&bucket)
        .await
        .expect("bucket stream")
        .cached_info()
        .config
        .clone();
    config.max_age = ttl;
    config.duplicate_window = ttl;
    env.js.update_stream(config).await.expect("shorter TTL");

    let wm = WorkingMemory::open(&env.js, env.ns())
        .await
        .expect("working memory opens");
    let start = Utc::now();
    wm.merge("acme", "bob", "s-1", &changes(json!({"a": 1})))
        .await
        .expect("write");
    // Written and deleted: a delete is not an expiry, before or after a new write.
    wm.merge("acme", "bob", "s-2", &changes(json!({"a": 1})))
        .await
        .expect("write");
    wm.clear("acme", "bob", "s-2").await.expect("delete");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !wm.get("acme", "bob", "s-1").await.expect("read").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the key expires within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let expired_once = Utc::now();
    assert_eq!(env.expired(ttl, start, expired_once).await, 1);

    // Written again: a new lifetime, the first one's expiry is kept.
    wm.merge("acme", "bob", "s-1", &changes(json!({"b": 2})))
        .await
        .expect("write again");
    wm.merge("acme", "bob", "s-2", &changes(json!({"b": 2})))
        .await
        .expect("write after delete");
    wm.clear("acme", "bob", "s-2").await.expect("delete again");
    assert_eq!(
        wm.get("acme", "bob", "s-1").await.expect("read"),
        changes(json!({"b": 2})),
        "the expired keys are gone"
    );
    assert_eq!(env.expired(ttl, start, expired_once).await, 1);
    let far = Utc::now() + chrono::Duration::hours(1);
    assert_eq!(env.expired(ttl, start, far).await, 2);
    assert_eq!(env.expired(ttl, expired_once, far).await, 1);
    env.remove().await;
}
