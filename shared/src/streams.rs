//! The declarative JetStream topology in `streams/*.toml`, compiled into every
//! binary and applied idempotently at start-up and by `hindsight streams apply`.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use serde::{Deserialize, Deserializer};

use hindsight_core::namespace::Namespace;

use crate::config::Config;
use hindsight_text::duration;

/// The stream files, in the order they are applied.
pub const FILES: &[(&str, &str)] = &[
    ("turns.toml", include_str!("../../streams/turns.toml")),
    ("kept.toml", include_str!("../../streams/kept.toml")),
    ("facts.toml", include_str!("../../streams/facts.toml")),
    ("embedded.toml", include_str!("../../streams/embedded.toml")),
    ("dlq.toml", include_str!("../../streams/dlq.toml")),
    ("kv.toml", include_str!("../../streams/kv.toml")),
    (
        "working_writes.toml",
        include_str!("../../streams/working_writes.toml"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum StreamsError {
    #[error("streams/{file}: {reason}")]
    File { file: &'static str, reason: String },
    #[error("applying {what}: {reason}")]
    Apply { what: String, reason: String },
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    duration::parse(&text).map_err(serde::de::Error::custom)
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Retention {
    Limits,
    Workqueue,
    Interest,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    File,
    Memory,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub name: String,
    pub description: String,
    pub subjects: Vec<String>,
    pub retention: Retention,
    pub storage: Storage,
    #[serde(deserialize_with = "de_duration")]
    pub max_age: Duration,
    #[serde(deserialize_with = "de_duration")]
    pub duplicate_window: Duration,
    pub max_msg_size: i32,
    /// At most this many messages per subject (the oldest go first); omitted: unlimited.
    #[serde(default)]
    pub max_msgs_per_subject: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerSpec {
    pub name: String,
    pub description: String,
    #[serde(deserialize_with = "de_duration")]
    pub ack_wait: Duration,
    pub max_deliver: i64,
    pub max_ack_pending: i64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketSpec {
    pub name: String,
    pub description: String,
    #[serde(deserialize_with = "de_duration")]
    pub ttl: Duration,
    pub history: i64,
    pub storage: Storage,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    stream: Option<StreamSpec>,
    #[serde(default)]
    consumer: Vec<ConsumerSpec>,
    #[serde(default)]
    bucket: Vec<BucketSpec>,
}

/// The whole topology, read from [`FILES`].
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub streams: Vec<(StreamSpec, Vec<ConsumerSpec>)>,
    pub buckets: Vec<BucketSpec>,
}

impl Topology {
    pub fn load() -> Result<Self, StreamsError> {
        let mut topology = Topology::default();
        for (file, text) in FILES {
            let spec: FileSpec = toml::from_str(text).map_err(|e| StreamsError::File {
                file,
                reason: e.to_string(),
            })?;
            match spec.stream {
                Some(stream) => topology.streams.push((stream, spec.consumer)),
                None if !spec.consumer.is_empty() => {
                    return Err(StreamsError::File {
                        file,
                        reason: "consumers need a [stream]".into(),
                    });
                }
                None => {}
            }
            topology.buckets.extend(spec.bucket);
        }
        Ok(topology)
    }

    /// The consumer spec of a stage, if any stream file declares it.
    pub fn consumer(&self, name: &str) -> Option<(&StreamSpec, &ConsumerSpec)> {
        self.streams
            .iter()
            .find_map(|(s, cs)| cs.iter().find(|c| c.name == name).map(|c| (s, c)))
    }
}

fn stream_config(ns: &Namespace, spec: &StreamSpec) -> stream::Config {
    stream::Config {
        name: ns.stream_name(&spec.name),
        description: Some(spec.description.clone()),
        subjects: spec.subjects.iter().map(|s| ns.absolute(s)).collect(),
        retention: match spec.retention {
            Retention::Limits => stream::RetentionPolicy::Limits,
            Retention::Workqueue => stream::RetentionPolicy::WorkQueue,
            Retention::Interest => stream::RetentionPolicy::Interest,
        },
        storage: storage(spec.storage),
        max_age: spec.max_age,
        duplicate_window: spec.duplicate_window,
        max_message_size: spec.max_msg_size,
        // 0 is the server's "unlimited".
        max_messages_per_subject: spec.max_msgs_per_subject.unwrap_or(0),
        discard: stream::DiscardPolicy::Old,
        ..Default::default()
    }
}

fn storage(s: Storage) -> stream::StorageType {
    match s {
        Storage::File => stream::StorageType::File,
        Storage::Memory => stream::StorageType::Memory,
    }
}

/// The stream behind a KV bucket, as the KV API lays it out. Written out here
/// because the client's `create_key_value` first queries account limits in a
/// form NATS 2.9 does not answer; the stream is the bucket all the same.
fn bucket_stream_config(bucket: &str, spec: &BucketSpec) -> stream::Config {
    stream::Config {
        name: format!("KV_{bucket}"),
        description: Some(spec.description.clone()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: spec.history.max(1),
        max_age: spec.ttl,
        storage: storage(spec.storage),
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    }
}

/// The pull-consumer config of a stage, with the runtime overrides of [`Config`].
///
/// The server's `max_deliver` is one more than the runner's: the runner
/// dead-letters a message on its last attempt itself, and the spare delivery
/// lets it catch a message whose handling crashed the process on that attempt.
pub fn consumer_config(
    ns: &Namespace,
    stream: &StreamSpec,
    spec: &ConsumerSpec,
    config: &Config,
) -> consumer::pull::Config {
    let max_deliver = config.max_deliver.unwrap_or(spec.max_deliver);
    consumer::pull::Config {
        durable_name: Some(spec.name.clone()),
        description: Some(spec.description.clone()),
        ack_policy: consumer::AckPolicy::Explicit,
        deliver_policy: consumer::DeliverPolicy::All,
        ack_wait: config.ack_wait.unwrap_or(spec.ack_wait),
        max_deliver: max_deliver + 1,
        max_ack_pending: spec.max_ack_pending,
        filter_subject: stream
            .subjects
            .first()
            .map(|s| ns.absolute(s))
            .unwrap_or_default(),
        ..Default::default()
    }
}

/// Creates or updates every stream, consumer and bucket. Safe to run any number of times.
pub async fn apply(js: &jetstream::Context, config: &Config) -> Result<Topology, StreamsError> {
    let topology = Topology::load()?;
    let ns = &config.namespace;
    for (spec, consumers) in &topology.streams {
        let stream_cfg = stream_config(ns, spec);
        let name = stream_cfg.name.clone();
        js.create_or_update_stream(stream_cfg)
            .await
            .map_err(|e| StreamsError::Apply {
                what: format!("stream {name}"),
                reason: e.to_string(),
            })?;
        let stream = js
            .get_stream(&name)
            .await
            .map_err(|e| StreamsError::Apply {
                what: format!("stream {name}"),
                reason: e.to_string(),
            })?;
        for c in consumers {
            stream
                .create_consumer(consumer_config(ns, spec, c, config))
                .await
                .map_err(|e| StreamsError::Apply {
                    what: format!("consumer {name}/{}", c.name),
                    reason: e.to_string(),
                })?;
        }
        tracing::debug!(stream = %name, consumers = consumers.len(), "stream applied");
    }
    for b in &topology.buckets {
        let bucket = ns.stream_name(&b.name);
        js.create_or_update_stream(bucket_stream_config(&bucket, b))
            .await
            .map_err(|e| StreamsError::Apply {
                what: format!("bucket {bucket}"),
                reason: e.to_string(),
            })?;
    }
    Ok(topology)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_files_parse_and_name_every_stage() {
        let topology = Topology::load().expect("stream files are valid");
        for stage in ["filter", "extract", "embed", "persist"] {
            assert!(
                topology.consumer(stage).is_some(),
                "no consumer for {stage}"
            );
        }
        let names: Vec<_> = topology
            .streams
            .iter()
            .map(|(s, _)| s.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "TURNS",
                "KEPT",
                "FACTS",
                "EMBEDDED",
                "DLQ",
                "WORKING_WRITES"
            ]
        );
        assert_eq!(topology.buckets[0].ttl, Duration::from_secs(3600));
        // Only the write log keeps one message per subject; the rest are unlimited.
        for (spec, _) in &topology.streams {
            let expected = (spec.name == "WORKING_WRITES").then_some(1);
            assert_eq!(spec.max_msgs_per_subject, expected, "{}", spec.name);
        }
    }
}
