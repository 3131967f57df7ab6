//! The streams' part of an erase. The user's messages are removed by
//! sequence with JetStream's message delete, which overwrites the message
//! where it is stored (the request does not ask for `no_erase`).
//!
//! Where the sequences come from, without reading whole streams:
//! - TURNS: the `turns` archive keeps each turn's sequence (and those of its
//!   second publishes); the database place writes them down before deleting
//!   the rows. Turns not archived yet are the ones past the filter's ack
//!   floor: only those are read. Turns the filter refuses while the erase
//!   runs are written down by the filter itself.
//! - KEPT, FACTS, EMBEDDED: work queues, which hold only what a stage has not
//!   acknowledged yet (in flight); all of it is read.
//! - DLQ: the tenant's letters (its subjects end with the tenant) are read;
//!   a letter of the user goes, and so does the message it was made from
//!   when that stream keeps its messages (a turn that failed validation
//!   stays in TURNS; the letter names its sequence).
//!
//! A message is the user's when its subject's tenant is theirs and its JSON
//! body's top-level `user_id` (every stage's message has it there) is theirs;
//! a body that is not JSON (a turn that failed validation) is the user's when
//! it spells out `"user_id": "<user>"`.

use std::collections::HashMap;

use async_nats::jetstream::{self, message::StreamMessage, stream::Stream};
use futures::StreamExt;
use hindsight_core::Namespace;
use hindsight_shared::{
    dlq,
    streams::{Retention, Topology},
};
use hindsight_store::{
    Store,
    erase::{Erasure, PendingMessage},
};

use crate::EraseError;

/// The DLQ stream, relative to the namespace.
const DLQ: &str = "DLQ";

/// Messages removed per round trip to Postgres.
const CHUNK: i64 = 1000;
/// Requests to JetStream in flight at once (reads and deletes by sequence).
const IN_FLIGHT: usize = 64;

pub struct Streams {
    js: jetstream::Context,
    ns: Namespace,
    topology: Topology,
}

fn failed(what: impl std::fmt::Display, e: impl std::fmt::Display) -> EraseError {
    EraseError::Streams(format!("{what}: {e}"))
}

impl Streams {
    pub fn new(js: jetstream::Context, ns: Namespace) -> Result<Self, EraseError> {
        let topology = Topology::load().map_err(|e| failed("the stream files", e))?;
        Ok(Self { js, ns, topology })
    }

    async fn stream(&self, base: &str) -> Result<Stream, EraseError> {
        let name = self.ns.stream_name(base);
        self.js
            .get_stream(&name)
            .await
            .map_err(|e| failed(format!("stream {name}"), e))
    }

    /// Finds the user's messages still in flight and in the DLQ, and writes
    /// them down for the job; returns how many were new.
    pub async fn scan(&self, store: &Store, job: &Erasure) -> Result<u64, EraseError> {
        let mut found = Vec::new();
        for (spec, consumers) in &self.topology.streams {
            if spec.name == DLQ {
                found.extend(self.scan_dlq(job).await?);
            } else if spec.retention == Retention::Workqueue {
                found.extend(self.scan_after(job, &spec.name, 0).await?);
            } else if !consumers.is_empty() {
                // Past the slowest consumer's ack floor: what it has not taken yet.
                let stream = self.stream(&spec.name).await?;
                let mut floor = u64::MAX;
                for c in consumers {
                    let info = stream
                        .consumer_info(&c.name)
                        .await
                        .map_err(|e| failed(format!("consumer {}", c.name), e))?;
                    floor = floor.min(info.ack_floor.stream_sequence);
                }
                found.extend(self.scan_after(job, &spec.name, floor).await?);
            }
            // Streams without consumers other than the DLQ hold no content
            // (the working-memory write log).
        }
        Ok(store.record_messages(job.id, &found).await?)
    }

    /// The user's messages of a stream after sequence `after`, read one by one.
    async fn scan_after(
        &self,
        job: &Erasure,
        base: &str,
        after: u64,
    ) -> Result<Vec<PendingMessage>, EraseError> {
        let mut stream = self.stream(base).await?;
        let state = stream
            .info()
            .await
            .map_err(|e| failed(format!("stream {base}"), e))?
            .state
            .clone();
        if state.messages == 0 {
            return Ok(Vec::new());
        }
        let seqs = state.first_sequence.max(after + 1)..=state.last_sequence;
        // Owned futures (no borrows across the await), so the whole stays `Send`.
        let read: Vec<(u64, Option<StreamMessage>)> = futures::stream::iter(seqs)
            .map(|seq| {
                let stream = stream.clone();
                async move { (seq, stream.get_raw_message(seq).await.ok()) }
            })
            .buffered(IN_FLIGHT)
            .collect()
            .await;
        // A sequence deleted or acknowledged since is simply not there.
        Ok(read
            .into_iter()
            .filter_map(|(seq, msg)| {
                let msg = msg?;
                (self.ns.tenant_of(&msg.subject) == Some(job.tenant.as_str())
                    && body_names_user(&msg.payload, &job.user_id))
                .then(|| PendingMessage {
                    stream: base.to_string(),
                    seq: seq as i64,
                })
            })
            .collect())
    }

    /// The user's dead letters, and the messages they were made from where
    /// the stream keeps them.
    async fn scan_dlq(&self, job: &Erasure) -> Result<Vec<PendingMessage>, EraseError> {
        let selection = dlq::Selection {
            tenant: Some(job.tenant.clone()),
            ..dlq::Selection::default()
        };
        let letters = dlq::list(&self.js, &self.ns, &selection)
            .await
            .map_err(|e| failed("the DLQ", e))?;
        let mut out = Vec::new();
        for letter in letters {
            if !body_names_user(&letter.payload, &job.user_id) {
                continue;
            }
            out.push(PendingMessage {
                stream: DLQ.to_string(),
                seq: letter.seq as i64,
            });
            if let Some(base) = self.kept_stream_of(&letter.original_subject) {
                out.push(PendingMessage {
                    stream: base,
                    seq: letter.original_seq as i64,
                });
            }
        }
        Ok(out)
    }

    /// The stream (relative name) a subject was published to, when that
    /// stream keeps its messages after they are handled.
    fn kept_stream_of(&self, subject: &str) -> Option<String> {
        let relative = subject.strip_prefix(self.ns.as_str())?.strip_prefix('.')?;
        self.topology
            .streams
            .iter()
            .find(|(spec, _)| {
                spec.retention == Retention::Limits
                    && spec.name != DLQ
                    && spec.subjects.iter().any(|s| {
                        s.strip_suffix('>')
                            .is_some_and(|prefix| relative.starts_with(prefix))
                    })
            })
            .map(|(spec, _)| spec.name.clone())
    }

    /// Removes the job's written-down messages from their streams, counting
    /// each once.
    pub async fn remove(&self, store: &Store, job: &Erasure) -> Result<(), EraseError> {
        loop {
            let pending = store.pending_messages(job.id, CHUNK).await?;
            if pending.is_empty() {
                return Ok(());
            }
            let mut streams: HashMap<String, Stream> = HashMap::new();
            for m in &pending {
                if !streams.contains_key(&m.stream) {
                    streams.insert(m.stream.clone(), self.stream(&m.stream).await?);
                }
            }
            // Collected first: a stream over a borrowing iterator would not be `Send`.
            let deletes: Vec<_> = pending
                .iter()
                .filter_map(|m| {
                    let stream = streams.get(&m.stream)?.clone();
                    let (name, seq) = (m.stream.clone(), m.seq as u64);
                    Some(async move {
                        match stream.delete_message(seq).await {
                            Ok(_) => Ok(()),
                            // Gone already: deleted by an earlier pass, acknowledged
                            // from a work queue, or aged out.
                            Err(e) if is_gone(&e) => Ok(()),
                            Err(e) => Err(failed(format!("deleting {name} #{seq}"), e)),
                        }
                    })
                })
                .collect();
            let results: Vec<Result<(), EraseError>> = futures::stream::iter(deletes)
                .buffer_unordered(IN_FLIGHT)
                .collect()
                .await;
            results.into_iter().collect::<Result<(), _>>()?;
            store.messages_removed(job.id, &pending).await?;
        }
    }
}

/// Whether a delete failed only because the message is not there: NATS says
/// "no message found" as its own code, or (2.9) as a failed delete, and
/// "sequence not found" for a sequence outside what the stream holds.
fn is_gone(e: &jetstream::stream::DeleteMessageError) -> bool {
    match e.kind() {
        jetstream::stream::DeleteMessageErrorKind::JetStream(j) => {
            j.error_code() == jetstream::ErrorCode::NO_MESSAGE_FOUND
                || j.error_code() == jetstream::ErrorCode::SEQUENCE_NOT_FOUND
                || (j.error_code() == jetstream::ErrorCode::STREAM_MESSAGE_DELETE_FAILED
                    && j.to_string().contains("no message found"))
        }
        _ => false,
    }
}

/// Whether a message body names the user as its `user_id`.
pub fn body_names_user(body: &[u8], user_id: &str) -> bool {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => value.get("user_id").and_then(|u| u.as_str()) == Some(user_id),
        Err(_) => spells_out_user(body, user_id),
    }
}

/// `"user_id"`, a colon and the user's id as a JSON string, with any spaces
/// between: how a body that does not parse may still name the user.
fn spells_out_user(body: &[u8], user_id: &str) -> bool {
    let key = b"\"user_id\"";
    let mut rest = body;
    while let Some(at) = find(rest, key) {
        rest = &rest[at + key.len()..];
        let after = trim_start(rest);
        if let Some(after) = after.strip_prefix(b":") {
            let value = trim_start(after);
            if let Some(value) = value.strip_prefix(b"\"")
                && let Some(tail) = value.strip_prefix(user_id.as_bytes())
                && tail.first() == Some(&b'"')
            {
                return true;
            }
        }
    }
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_names_its_user_at_the_top_level_only() {
        assert!(body_names_user(
            br#"{"user_id":"ann","content":"x"}"#,
            "ann"
        ));
        assert!(!body_names_user(br#"{"user_id":"anna"}"#, "ann"));
        assert!(!body_names_user(
            br#"{"user_id":"bob","metadata":{"user_id":"ann"}}"#,
            "ann"
        ));
        assert!(!body_names_user(br#"["ann"]"#, "ann"));
    }

    #[test]
    fn a_body_that_does_not_parse_names_its_user_when_it_spells_it_out() {
        assert!(body_names_user(
            br#"{"user_id" : "ann", "content": "#,
            "ann"
        ));
        assert!(!body_names_user(br#"{"user_id": "annie", "#, "ann"));
        assert!(!body_names_user(br#"{"speaker": "ann", "#, "ann"));
        assert!(!body_names_user(b"not json at all", "ann"));
    }
}
