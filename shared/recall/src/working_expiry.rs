//! How many working-memory keys expired between two instants.
//!
//! A key of the `WORKING` bucket expires one TTL after its last write, and
//! NATS 2.9 emits nothing when it does. So [`WorkingMemory`](crate::WorkingMemory)
//! records every write, without its content, in the stream `WORKING_WRITES`
//! (`streams/working_writes.toml`, 14 days):
//!
//! - `<ns>.working.written.<key>`: the key's last write (one message per
//!   subject), with `KV-Operation` (`PUT` or `DEL`) and `Hindsight-Revision`;
//!   the write time is the record's stream time.
//! - `<ns>.working.expired.<key>.<seq>`: when a key is written again after it
//!   expired, the last write of the lifetime that ended (`seq` is that
//!   record's sequence, `Hindsight-Written-At` its time), which the new write
//!   replaces on `written.<key>`.
//!
//! [`expired_keys`] reads the last message of every subject in one pass.
//!
//! Why not RePublish on the bucket's stream: NATS 2.9 refuses to add it to an
//! existing stream (`stream configuration update can not change RePublish`),
//! and a stream capturing the republished writes refuses most of them, since
//! the copy keeps the writer's headers: `Nats-Expected-Last-Subject-Sequence`
//! of every compare-and-set write is checked again against the capturing
//! stream's own sequences, and `Nats-Rollup` of a purge is refused too.
//!
//! A record is published once the KV write is acknowledged, so the recorded
//! time trails the write by one round trip: an expiry is computed that much
//! late, never early. A process that dies between the two loses that record.

use std::{collections::HashSet, time::Duration};

use async_nats::{
    HeaderMap,
    jetstream::{
        self,
        consumer::{AckPolicy, DeliverPolicy, pull},
        stream::{LastRawMessageErrorKind, Stream},
    },
};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use futures::StreamExt;
use hindsight_core::Namespace;

/// The stream of write records, relative to the namespace.
pub const WRITES_STREAM: &str = "WORKING_WRITES";
/// `PUT` or `DEL`, as the KV API names operations.
pub const HEADER_OPERATION: &str = "KV-Operation";
/// The KV revision the record is about (informational).
pub const HEADER_REVISION: &str = "Hindsight-Revision";
/// On `expired.` records: when the lifetime's last write was recorded (RFC 3339).
pub const HEADER_WRITTEN_AT: &str = "Hindsight-Written-At";

/// Records read per request by [`expired_keys`].
const BATCH: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ExpiryError {
    #[error("working-memory write log {stream}: {reason}")]
    Unavailable { stream: String, reason: String },
    #[error("a TTL of {0:?} is out of range")]
    Ttl(Duration),
}

fn written_subject(ns: &Namespace, key: &str) -> String {
    ns.absolute(&format!("working.written.{key}"))
}

fn expired_subject(ns: &Namespace, key: &str, seq: u64) -> String {
    ns.absolute(&format!("working.expired.{key}.{seq}"))
}

fn header<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    headers.and_then(|h| h.get_last(name)).map(|v| v.as_str())
}

/// Whether a record's operation removed the key (`DEL`, `PURGE`).
fn removes(headers: Option<&HeaderMap>) -> bool {
    matches!(header(headers, HEADER_OPERATION), Some("DEL" | "PURGE"))
}

fn nanos_to_utc(nanos: i128) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(nanos as i64)
}

/// The last recorded write of a key.
#[derive(Debug, Clone)]
pub(crate) struct LastWrite {
    seq: u64,
    removed: bool,
    at: DateTime<Utc>,
    revision: Option<String>,
}

/// Where working memory records its writes (see the module documentation).
#[derive(Clone)]
pub(crate) struct WriteLog {
    js: jetstream::Context,
    ns: Namespace,
    stream: Stream<()>,
}

impl WriteLog {
    pub(crate) async fn open(js: &jetstream::Context, ns: &Namespace) -> Result<Self, String> {
        let stream = js
            .get_stream_no_info(ns.stream_name(WRITES_STREAM))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            js: js.clone(),
            ns: ns.clone(),
            stream,
        })
    }

    /// Removes every record of keys starting with `prefix` (a user's keys);
    /// returns how many records went.
    pub(crate) async fn purge(&self, prefix: &str) -> Result<u64, String> {
        let mut purged = 0;
        for kind in ["written", "expired"] {
            let filter = self.ns.absolute(&format!("working.{kind}.{prefix}.>"));
            purged += self
                .stream
                .purge()
                .filter(filter)
                .await
                .map_err(|e| e.to_string())?
                .purged;
        }
        Ok(purged)
    }

    /// The key's last recorded write; `None` when there is none or it cannot be read (logged).
    pub(crate) async fn last_write(&self, key: &str) -> Option<LastWrite> {
        match self
            .stream
            .get_last_raw_message_by_subject(&written_subject(&self.ns, key))
            .await
        {
            Ok(msg) => Some(LastWrite {
                seq: msg.sequence,
                removed: removes(Some(&msg.headers)),
                at: nanos_to_utc(msg.time.unix_timestamp_nanos()),
                revision: header(Some(&msg.headers), HEADER_REVISION).map(str::to_string),
            }),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
            Err(e) => {
                self.failed("read", &e.to_string());
                None
            }
        }
    }

    /// Records a put of `revision`. `previous` is the key's last write as read
    /// before a create (a new lifetime): if it was a put, that lifetime ended
    /// by expiry and is kept on `expired.<key>.<seq>`.
    pub(crate) async fn put(&self, key: &str, revision: u64, previous: Option<LastWrite>) {
        if let Some(previous) = previous.filter(|p| !p.removed) {
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_OPERATION, "PUT");
            headers.insert(
                HEADER_WRITTEN_AT,
                previous
                    .at
                    .to_rfc3339_opts(SecondsFormat::Nanos, true)
                    .as_str(),
            );
            if let Some(r) = &previous.revision {
                headers.insert(HEADER_REVISION, r.as_str());
            }
            // The subject is unique to that lifetime: recording it twice keeps one.
            let subject = expired_subject(&self.ns, key, previous.seq);
            if let Err(e) = self.publish(subject, headers).await {
                self.failed("expired", &e);
            }
        }
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_OPERATION, "PUT");
        headers.insert(HEADER_REVISION, revision.to_string().as_str());
        if let Err(e) = self.publish(written_subject(&self.ns, key), headers).await {
            self.failed("written", &e);
        }
    }

    /// Records that the key was deleted: it will not expire.
    pub(crate) async fn deleted(&self, key: &str) {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_OPERATION, "DEL");
        if let Err(e) = self.publish(written_subject(&self.ns, key), headers).await {
            self.failed("deleted", &e);
        }
    }

    async fn publish(&self, subject: String, headers: HeaderMap) -> Result<(), String> {
        self.js
            .publish_with_headers(subject, headers, Bytes::new())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// The working-memory write itself succeeded; only its accounting did not.
    fn failed(&self, record: &'static str, reason: &str) {
        hindsight_shared::events::WorkingWriteLogFailed { record, reason }.emit();
    }
}

/// How many working-memory keys expired in `(since, until]`: every lifetime
/// of a key whose last write, plus `ttl` (the bucket's TTL), falls in the
/// window, unless that last write deleted it. A key that expired, was written
/// again and expired again counts once per expiry. Instants after now count
/// the keys that will expire by then if nobody writes them again.
///
/// One pass over the last record of every subject (an ephemeral consumer, a
/// request per 10,000 keys), however many keys there are.
pub async fn expired_keys(
    js: &jetstream::Context,
    ns: &Namespace,
    ttl: Duration,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<u64, ExpiryError> {
    let ttl = chrono::Duration::from_std(ttl).map_err(|_| ExpiryError::Ttl(ttl))?;
    let name = ns.stream_name(WRITES_STREAM);
    let unavailable = |reason: String| ExpiryError::Unavailable {
        stream: name.clone(),
        reason,
    };
    if since >= until {
        return Ok(0);
    }
    let stream = js
        .get_stream(&name)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let state = &stream.cached_info().state;
    if state.messages == 0 {
        return Ok(0);
    }
    // Records stored after this are writes made during the pass: not expiries.
    let last_seq = state.last_sequence;
    let consumer = stream
        .create_consumer(pull::Config {
            filter_subject: ns.absolute("working.>"),
            deliver_policy: DeliverPolicy::LastPerSubject,
            ack_policy: AckPolicy::None,
            headers_only: true,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let consumer_name = consumer.cached_info().name.clone();

    let written = ns.absolute("working.written.");
    let expired = ns.absolute("working.expired.");
    let in_window = |written_at: DateTime<Utc>| {
        written_at
            .checked_add_signed(ttl)
            .is_some_and(|expires| since < expires && expires <= until)
    };
    let mut count = 0u64;
    // Sequences of the `written.` records counted: an `expired.` record naming
    // one of them is the same lifetime (its key was written again during the
    // pass, or that write's own record was lost).
    let mut counted = HashSet::new();
    'fetch: loop {
        let mut batch = consumer
            .fetch()
            .max_messages(BATCH)
            .messages()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let mut fetched = 0;
        while let Some(msg) = batch.next().await {
            let msg = msg.map_err(|e| unavailable(e.to_string()))?;
            fetched += 1;
            let info = msg.info().map_err(|e| unavailable(e.to_string()))?;
            let (seq, pending) = (info.stream_sequence, info.pending);
            let headers = msg.headers.as_ref();
            if msg.subject.starts_with(written.as_str()) {
                let at = nanos_to_utc(info.published.unix_timestamp_nanos());
                if seq <= last_seq && !removes(headers) && in_window(at) {
                    count += 1;
                    counted.insert(seq);
                }
            } else if let Some(rest) = msg.subject.strip_prefix(expired.as_str()) {
                let of = rest
                    .rsplit_once('.')
                    .and_then(|(_, s)| s.parse::<u64>().ok());
                let at = header(headers, HEADER_WRITTEN_AT)
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc));
                match (of, at) {
                    (Some(of), Some(at)) => {
                        if !counted.contains(&of) && in_window(at) {
                            count += 1;
                        }
                    }
                    _ => {
                        tracing::warn!(subject = %msg.subject, "unreadable working-memory expiry record skipped")
                    }
                }
            }
            if pending == 0 {
                break 'fetch;
            }
        }
        if fetched == 0 {
            break;
        }
    }
    // It would go by itself after 30 s idle; no need to wait.
    let _ = stream.delete_consumer(&consumer_name).await;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_stay_inside_the_stream_file_subjects() {
        let ns = Namespace::new("t-1").expect("valid");
        assert_eq!(
            written_subject(&ns, "61.62.63"),
            "t-1.working.written.61.62.63"
        );
        assert_eq!(
            expired_subject(&ns, "61.62.63", 42),
            "t-1.working.expired.61.62.63.42"
        );
    }

    #[test]
    fn deletes_and_purges_remove_a_key() {
        let mut h = HeaderMap::new();
        h.insert(HEADER_OPERATION, "PUT");
        assert!(!removes(Some(&h)));
        assert!(!removes(None));
        for op in ["DEL", "PURGE"] {
            let mut h = HeaderMap::new();
            h.insert(HEADER_OPERATION, op);
            assert!(removes(Some(&h)), "{op}");
        }
    }
}
