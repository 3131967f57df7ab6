//! `hindsight publish`: one turn from flags, or JSON lines from a file or stdin.
//! The stream is the contract: this does nothing an agent with a plain NATS
//! client could not do.

use std::path::PathBuf;

use async_nats::jetstream::{self, context::PublishAckFuture};
use hindsight_core::{ids::is_valid_tenant, turn::MAX_ENVELOPE_BYTES};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  hindsight publish --tenant acme --user u1 --session s1 \"I'm allergic to peanuts\"\n  hindsight publish --file turns.jsonl\n  cat turns.jsonl | hindsight publish --file -"
)]
pub struct Args {
    /// JSON lines to publish, one turn per line (`-` reads stdin). Each line names its tenant.
    #[arg(long, conflicts_with_all = ["tenant", "user", "session", "content"])]
    file: Option<PathBuf>,
    #[arg(long, required_unless_present = "file")]
    tenant: Option<String>,
    /// The user the turn is about (`user_id`).
    #[arg(long, required_unless_present = "file")]
    user: Option<String>,
    /// The conversation (`session_id`).
    #[arg(long, required_unless_present = "file")]
    session: Option<String>,
    /// The text of the turn.
    #[arg(required_unless_present = "file")]
    content: Option<String>,
    /// Defaults to an id derived from the content and session.
    #[arg(long)]
    turn_id: Option<String>,
    #[arg(long)]
    agent: Option<String>,
    /// Display name of who said it (default: the user for user turns, the agent for assistant turns).
    #[arg(long)]
    speaker: Option<String>,
    /// user | assistant | tool | system (default user).
    #[arg(long)]
    role: Option<String>,
    /// user | agent | tool | external (default from the role).
    #[arg(long)]
    source: Option<String>,
    /// RFC 3339 timestamp (default: when the turn is received).
    #[arg(long)]
    ts: Option<String>,
    /// A JSON object.
    #[arg(long)]
    metadata: Option<String>,
}

fn from_flags(args: &Args) -> anyhow::Result<Value> {
    let mut turn = Map::new();
    let mut put = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            turn.insert(k.to_string(), Value::String(v.clone()));
        }
    };
    put("tenant", &args.tenant);
    put("user_id", &args.user);
    put("session_id", &args.session);
    put("content", &args.content);
    put("turn_id", &args.turn_id);
    put("agent_id", &args.agent);
    put("speaker", &args.speaker);
    put("role", &args.role);
    put("source", &args.source);
    put("ts", &args.ts);
    if let Some(m) = &args.metadata {
        let metadata: Value =
            serde_json::from_str(m).map_err(|e| anyhow::anyhow!("--metadata is not JSON: {e}"))?;
        turn.insert("metadata".into(), metadata);
    }
    Ok(Value::Object(turn))
}

/// The subject and message id of one line, or why it cannot be routed.
fn route(line: &str) -> Result<(String, Option<String>), String> {
    if line.len() > MAX_ENVELOPE_BYTES * 16 {
        return Err(format!("{} bytes is more than NATS accepts", line.len()));
    }
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let tenant = value
        .get("tenant")
        .and_then(Value::as_str)
        .ok_or("no `tenant` string: the tenant names the subject")?;
    if !is_valid_tenant(tenant) {
        return Err(format!(
            "tenant {tenant:?} is not 1 to 128 characters of A-Z a-z 0-9 _ : / @ -"
        ));
    }
    let msg_id = value
        .get("turn_id")
        .and_then(Value::as_str)
        .map(|id| format!("{tenant}:{id}"));
    Ok((tenant.to_string(), msg_id))
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let (config, bus) = super::connect().await?;
    let mut published = 0u64;
    let mut duplicates = 0u64;
    let mut failed = 0u64;
    let mut in_flight: Vec<PublishAckFuture> = Vec::new();

    let mut lines: Vec<(usize, String)> = Vec::new();
    match &args.file {
        None => lines.push((1, from_flags(&args)?.to_string())),
        Some(path) => {
            let reader: Box<dyn tokio::io::AsyncRead + Unpin + Send> = if path.as_os_str() == "-" {
                Box::new(tokio::io::stdin())
            } else {
                Box::new(
                    tokio::fs::File::open(path)
                        .await
                        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?,
                )
            };
            let mut reader = BufReader::new(reader).lines();
            let mut n = 0;
            while let Some(line) = reader.next_line().await? {
                n += 1;
                if !line.trim().is_empty() {
                    lines.push((n, line));
                }
            }
        }
    }

    for (n, line) in lines {
        let (tenant, msg_id) = match route(&line) {
            Ok(r) => r,
            Err(reason) => {
                eprintln!("line {n}: not published: {reason}");
                failed += 1;
                continue;
            }
        };
        let mut msg = jetstream::message::PublishMessage::build().payload(line.into_bytes().into());
        if let Some(id) = msg_id {
            msg = msg.message_id(id);
        }
        let subject = config
            .namespace
            .subject(hindsight_core::Topic::Turns, &tenant);
        match bus.js.send_publish(subject, msg).await {
            Ok(ack) => in_flight.push(ack),
            Err(e) => {
                eprintln!("line {n}: not published: {e}");
                failed += 1;
            }
        }
        if in_flight.len() >= 256 {
            settle(&mut in_flight, &mut published, &mut duplicates, &mut failed).await;
        }
    }
    settle(&mut in_flight, &mut published, &mut duplicates, &mut failed).await;
    println!(
        "published {published} turn(s) to {}.turns.* ({duplicates} duplicate(s) ignored by JetStream, {failed} failed)",
        config.namespace
    );
    if failed > 0 {
        anyhow::bail!("{failed} turn(s) were not published");
    }
    Ok(())
}

async fn settle(
    in_flight: &mut Vec<PublishAckFuture>,
    published: &mut u64,
    duplicates: &mut u64,
    failed: &mut u64,
) {
    for ack in in_flight.drain(..) {
        match ack.await {
            Ok(ack) if ack.duplicate => *duplicates += 1,
            Ok(_) => *published += 1,
            Err(e) => {
                eprintln!("not stored: {e}");
                *failed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_are_routed_by_their_tenant() {
        let (tenant, id) =
            route(&json!({"tenant": "acme", "turn_id": "t1"}).to_string()).expect("routable");
        assert_eq!((tenant.as_str(), id.as_deref()), ("acme", Some("acme:t1")));
        assert!(route("{}").is_err());
        assert!(route(&json!({"tenant": "a.b"}).to_string()).is_err());
        assert!(route("nope").is_err());
    }
}
