//! What `hindsight status` shows: per stream its messages, per consumer what is
//! pending, waiting for an ack, and redelivered.

use async_nats::jetstream;
use serde::Serialize;

use hindsight_core::namespace::Namespace;

use crate::streams::Topology;

#[derive(Debug, Clone, Serialize)]
pub struct ConsumerStatus {
    pub name: String,
    pub pending: u64,
    pub ack_pending: u64,
    pub redelivered: u64,
    /// Deliveries acknowledged so far (the consumer's ack floor): what the
    /// stage has handled since the consumer was created.
    pub acked: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamStatus {
    pub stream: String,
    pub subjects: Vec<String>,
    /// `None` when the stream does not exist (run `hindsight streams apply`).
    pub messages: Option<u64>,
    pub bytes: Option<u64>,
    pub consumers: Vec<ConsumerStatus>,
}

/// Reads the state of every stream and consumer of the topology.
pub async fn collect(
    js: &jetstream::Context,
    ns: &Namespace,
) -> Result<Vec<StreamStatus>, crate::streams::StreamsError> {
    let topology = Topology::load()?;
    let mut out = Vec::new();
    for (spec, consumers) in &topology.streams {
        let name = ns.stream_name(&spec.name);
        let subjects = spec.subjects.iter().map(|s| ns.absolute(s)).collect();
        let Ok(mut stream) = js.get_stream(&name).await else {
            out.push(StreamStatus {
                stream: name,
                subjects,
                messages: None,
                bytes: None,
                consumers: Vec::new(),
            });
            continue;
        };
        let (messages, bytes) = match stream.info().await {
            Ok(info) => (Some(info.state.messages), Some(info.state.bytes)),
            Err(_) => (None, None),
        };
        let mut consumer_status = Vec::new();
        for c in consumers {
            if let Ok(info) = stream.consumer_info(&c.name).await {
                consumer_status.push(ConsumerStatus {
                    name: c.name.clone(),
                    pending: info.num_pending,
                    ack_pending: info.num_ack_pending as u64,
                    redelivered: info.num_redelivered as u64,
                    acked: info.ack_floor.consumer_sequence,
                });
            }
        }
        out.push(StreamStatus {
            stream: name,
            subjects,
            messages,
            bytes,
            consumers: consumer_status,
        });
    }
    Ok(out)
}
