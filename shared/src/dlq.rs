//! The dead-letter queue: `<ns>.dlq.<stage>.<tenant>`, one message per input a
//! stage could not handle, carrying the original payload and headers that say
//! which stage gave up, why, and after how many deliveries.

use async_nats::{HeaderMap, jetstream};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Serialize;

use hindsight_core::namespace::Namespace;

pub const HEADER_STAGE: &str = "Hindsight-Stage";
pub const HEADER_REASON: &str = "Hindsight-Reason";
pub const HEADER_DELIVERIES: &str = "Hindsight-Deliveries";
pub const HEADER_SUBJECT: &str = "Hindsight-Subject";
pub const HEADER_STREAM_SEQ: &str = "Hindsight-Stream-Seq";
pub const HEADER_MSG_ID: &str = "Hindsight-Msg-Id";
/// Set on a message an operator replayed from the DLQ (the DLQ sequence).
pub const HEADER_REPLAY: &str = "Hindsight-Replay";

#[derive(Debug, thiserror::Error)]
pub enum DlqError {
    #[error("DLQ stream {stream}: {reason}")]
    Stream { stream: String, reason: String },
    #[error("publishing to {subject}: {reason}")]
    Publish { subject: String, reason: String },
    #[error("DLQ message {seq} has no {header} header, so it cannot be replayed")]
    NotReplayable { seq: u64, header: &'static str },
}

/// Header values may not hold line breaks; reasons are single lines anyway.
fn header_safe(value: &str) -> String {
    let one_line: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    one_line.chars().take(1000).collect()
}

/// Everything needed to dead-letter one input.
pub struct DeadLetter<'a> {
    pub stage: &'a str,
    pub tenant: &'a str,
    pub reason: &'a str,
    pub deliveries: u64,
    pub original_subject: &'a str,
    pub stream_seq: u64,
    pub original_msg_id: Option<&'a str>,
    pub payload: Bytes,
}

/// Publishes a dead letter and waits for JetStream to store it. The message id
/// is derived from the stage and the input's stream sequence, so dead-lettering
/// the same input twice (after a crash) stores it once.
pub async fn publish(
    js: &jetstream::Context,
    ns: &Namespace,
    letter: DeadLetter<'_>,
) -> Result<(), DlqError> {
    let subject = ns.dlq_subject(letter.stage, letter.tenant);
    let mut msg = jetstream::message::PublishMessage::build()
        .payload(letter.payload)
        .message_id(format!(
            "dlq:{}:{}:{}",
            letter.stage, letter.original_subject, letter.stream_seq
        ))
        .header(HEADER_STAGE, letter.stage)
        .header(HEADER_REASON, header_safe(letter.reason).as_str())
        .header(HEADER_DELIVERIES, letter.deliveries.to_string().as_str())
        .header(HEADER_SUBJECT, letter.original_subject)
        .header(HEADER_STREAM_SEQ, letter.stream_seq.to_string().as_str());
    if let Some(id) = letter.original_msg_id {
        msg = msg.header(HEADER_MSG_ID, header_safe(id).as_str());
    }
    let publish_err = |reason: String| DlqError::Publish {
        subject: subject.clone(),
        reason,
    };
    js.send_publish(subject.clone(), msg)
        .await
        .map_err(|e| publish_err(e.to_string()))?
        .await
        .map_err(|e| publish_err(e.to_string()))?;
    Ok(())
}

/// A dead letter as read back from the DLQ stream.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub seq: u64,
    pub stage: String,
    pub tenant: String,
    pub reason: String,
    pub deliveries: u64,
    pub original_subject: String,
    pub original_seq: u64,
    pub failed_at: DateTime<Utc>,
    #[serde(skip)]
    pub payload: Bytes,
    /// The payload as text (lossy), for people.
    pub payload_preview: String,
}

fn header(headers: Option<&HeaderMap>, name: &str) -> Option<String> {
    headers
        .and_then(|h| h.get(name))
        .map(|v| v.as_str().to_string())
}

fn entry(
    ns: &Namespace,
    seq: u64,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: Bytes,
    at: DateTime<Utc>,
) -> Entry {
    let preview: String = String::from_utf8_lossy(&payload)
        .chars()
        .take(200)
        .collect();
    let rest = subject
        .strip_prefix(ns.as_str())
        .and_then(|s| s.strip_prefix(".dlq."))
        .unwrap_or("");
    let (stage, tenant) = rest.split_once('.').unwrap_or((rest, ""));
    Entry {
        seq,
        stage: stage.to_string(),
        tenant: tenant.to_string(),
        reason: header(headers, HEADER_REASON).unwrap_or_default(),
        deliveries: header(headers, HEADER_DELIVERIES)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        original_subject: header(headers, HEADER_SUBJECT).unwrap_or_default(),
        original_seq: header(headers, HEADER_STREAM_SEQ)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        failed_at: at,
        payload,
        payload_preview: preview,
    }
}

/// Which dead letters to look at.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub stage: Option<String>,
    pub tenant: Option<String>,
    pub limit: Option<usize>,
}

impl Selection {
    fn subject(&self, ns: &Namespace) -> String {
        format!(
            "{}.dlq.{}.{}",
            ns,
            self.stage.as_deref().unwrap_or("*"),
            self.tenant.as_deref().unwrap_or("*")
        )
    }
}

async fn dlq_stream(
    js: &jetstream::Context,
    ns: &Namespace,
) -> Result<jetstream::stream::Stream, DlqError> {
    let name = ns.stream_name("DLQ");
    js.get_stream(&name).await.map_err(|e| DlqError::Stream {
        stream: name,
        reason: e.to_string(),
    })
}

/// Reads dead letters, oldest first, through an ordered consumer that goes away
/// when done (the DLQ stream keeps its messages; reading changes nothing).
pub async fn list(
    js: &jetstream::Context,
    ns: &Namespace,
    selection: &Selection,
) -> Result<Vec<Entry>, DlqError> {
    let mut stream = dlq_stream(js, ns).await?;
    let stream_err = |reason: String| DlqError::Stream {
        stream: ns.stream_name("DLQ"),
        reason,
    };
    let info = stream.info().await.map_err(|e| stream_err(e.to_string()))?;
    if info.state.messages == 0 {
        return Ok(Vec::new());
    }
    // An ephemeral consumer that acks nothing and vanishes shortly after use.
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            filter_subject: selection.subject(ns),
            ack_policy: jetstream::consumer::AckPolicy::None,
            inactive_threshold: std::time::Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .map_err(|e| stream_err(e.to_string()))?;
    let mut out = Vec::new();
    let limit = selection.limit.unwrap_or(usize::MAX);
    'fetch: loop {
        let mut messages = consumer
            .fetch()
            .max_messages((limit - out.len()).min(1000))
            .messages()
            .await
            .map_err(|e| stream_err(e.to_string()))?;
        let mut fetched = 0;
        while let Some(msg) = messages.next().await {
            let msg = msg.map_err(|e| stream_err(e.to_string()))?;
            fetched += 1;
            let Ok(meta) = msg.info() else { continue };
            let at = DateTime::from_timestamp_nanos(meta.published.unix_timestamp_nanos() as i64);
            let (seq, pending) = (meta.stream_sequence, meta.pending);
            out.push(entry(
                ns,
                seq,
                msg.subject.as_str(),
                msg.headers.as_ref(),
                msg.payload.clone(),
                at,
            ));
            if pending == 0 || out.len() >= limit {
                break 'fetch;
            }
        }
        if fetched == 0 {
            break;
        }
    }
    Ok(out)
}

/// Reads one dead letter by its DLQ sequence.
pub async fn get(js: &jetstream::Context, ns: &Namespace, seq: u64) -> Result<Entry, DlqError> {
    read(&dlq_stream(js, ns).await?, ns, seq).await
}

/// Reads one dead letter from the DLQ stream already looked up.
async fn read(
    stream: &jetstream::stream::Stream,
    ns: &Namespace,
    seq: u64,
) -> Result<Entry, DlqError> {
    let msg = stream
        .get_raw_message(seq)
        .await
        .map_err(|e| DlqError::Stream {
            stream: ns.stream_name("DLQ"),
            reason: format!("message {seq}: {e}"),
        })?;
    let at = DateTime::from_timestamp_nanos(msg.time.unix_timestamp_nanos() as i64);
    Ok(entry(
        ns,
        seq,
        msg.subject.as_str(),
        Some(&msg.headers),
        msg.payload,
        at,
    ))
}

/// Publishes a dead letter back to the subject it failed on, marked as a replay,
/// then removes it from the DLQ. The message id is derived from the DLQ
/// sequence, so replaying the same letter twice publishes it once; the stages'
/// own identity rules (turn and fact ids) keep its effects from doubling.
pub async fn replay(
    js: &jetstream::Context,
    ns: &Namespace,
    entry: &Entry,
) -> Result<(), DlqError> {
    if entry.original_subject.is_empty() {
        return Err(DlqError::NotReplayable {
            seq: entry.seq,
            header: HEADER_SUBJECT,
        });
    }
    let subject = entry.original_subject.clone();
    let msg = jetstream::message::PublishMessage::build()
        .payload(entry.payload.clone())
        .message_id(format!("replay:{}:{}", ns.stream_name("DLQ"), entry.seq))
        .header(HEADER_REPLAY, entry.seq.to_string().as_str());
    let publish_err = |reason: String| DlqError::Publish {
        subject: subject.clone(),
        reason,
    };
    js.send_publish(subject.clone(), msg)
        .await
        .map_err(|e| publish_err(e.to_string()))?
        .await
        .map_err(|e| publish_err(e.to_string()))?;
    let stream = dlq_stream(js, ns).await?;
    stream
        .delete_message(entry.seq)
        .await
        .map_err(|e| DlqError::Stream {
            stream: ns.stream_name("DLQ"),
            reason: format!(
                "replayed message {} but could not delete it: {e}",
                entry.seq
            ),
        })?;
    Ok(())
}

/// Deletes the selected dead letters for good; returns how many.
pub async fn purge(
    js: &jetstream::Context,
    ns: &Namespace,
    selection: &Selection,
) -> Result<u64, DlqError> {
    let stream = dlq_stream(js, ns).await?;
    let response = stream
        .purge()
        .filter(selection.subject(ns))
        .await
        .map_err(|e| DlqError::Stream {
            stream: ns.stream_name("DLQ"),
            reason: e.to_string(),
        })?;
    Ok(response.purged)
}

/// Dead letters waiting, per stage and tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Depth {
    pub stage: String,
    pub tenant: String,
    pub count: u64,
}

/// How many dead letters each stage and tenant has, from the stream's
/// per-subject counts (no message is read).
pub async fn depths(js: &jetstream::Context, ns: &Namespace) -> Result<Vec<Depth>, DlqError> {
    let stream = dlq_stream(js, ns).await?;
    let stream_err = |reason: String| DlqError::Stream {
        stream: ns.stream_name("DLQ"),
        reason,
    };
    let mut subjects = stream
        .info_with_subjects(format!("{ns}.dlq.>"))
        .await
        .map_err(|e| stream_err(e.to_string()))?;
    let mut out = Vec::new();
    while let Some(item) = subjects.next().await {
        let (subject, count) = item.map_err(|e| stream_err(e.to_string()))?;
        let rest = subject
            .strip_prefix(ns.as_str())
            .and_then(|s| s.strip_prefix(".dlq."))
            .unwrap_or("");
        let (stage, tenant) = rest.split_once('.').unwrap_or((rest, ""));
        out.push(Depth {
            stage: stage.to_string(),
            tenant: tenant.to_string(),
            count: count as u64,
        });
    }
    out.sort_by(|a, b| (&a.stage, &a.tenant).cmp(&(&b.stage, &b.tenant)));
    Ok(out)
}

/// The newest `n` dead letters, newest first, read backwards from the end of
/// the stream (replayed or purged sequences are skipped).
pub async fn latest(
    js: &jetstream::Context,
    ns: &Namespace,
    n: usize,
) -> Result<Vec<Entry>, DlqError> {
    let mut stream = dlq_stream(js, ns).await?;
    let info = stream.info().await.map_err(|e| DlqError::Stream {
        stream: ns.stream_name("DLQ"),
        reason: e.to_string(),
    })?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut out = Vec::new();
    if info.state.messages == 0 {
        return Ok(out);
    }
    // Interior deletions are bounded by what replay removed; stop after a
    // fixed number of probes so a page view stays cheap.
    let mut seq = last;
    let mut probes = 0;
    while seq >= first && seq > 0 && out.len() < n && probes < n * 20 {
        probes += 1;
        if let Ok(entry) = read(&stream, ns, seq).await {
            out.push(entry);
        }
        seq -= 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_become_one_header_line() {
        assert_eq!(header_safe("a\r\nb"), "a  b");
    }
}
