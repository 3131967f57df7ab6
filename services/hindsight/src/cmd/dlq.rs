//! `hindsight dlq list|show|replay|purge`.

use hindsight_shared::dlq::{self, Selection};

#[derive(clap::Args, Clone)]
pub struct Filter {
    /// Only dead letters of this stage (filter, extract, embed, persist).
    #[arg(long)]
    stage: Option<String>,
    /// Only dead letters of this tenant.
    #[arg(long)]
    tenant: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// List dead letters, oldest first, with their reasons.
    List {
        #[command(flatten)]
        filter: Filter,
        /// Show at most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one dead letter with its whole payload.
    Show {
        /// Its sequence in the DLQ stream (the SEQ column of `dlq list`).
        seq: u64,
    },
    /// Publish dead letters back to the subject they failed on, then remove them from the DLQ.
    ///
    /// Replayed messages keep their ids (turn ids, fact ids), so nothing they
    /// already did is done twice. Give sequences, or --all with optional filters.
    Replay {
        /// DLQ sequences to replay.
        seqs: Vec<u64>,
        /// Replay every dead letter matching the filters.
        #[arg(long, conflicts_with = "seqs")]
        all: bool,
        #[command(flatten)]
        filter: Filter,
    },
    /// Delete dead letters for good (all of them, or those matching the filters).
    Purge {
        #[command(flatten)]
        filter: Filter,
        /// Required: purging cannot be undone.
        #[arg(long)]
        yes: bool,
    },
}

fn selection(filter: &Filter, limit: Option<usize>) -> Selection {
    Selection {
        stage: filter.stage.clone(),
        tenant: filter.tenant.clone(),
        limit,
    }
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let (config, bus) = super::connect().await?;
    let ns = &config.namespace;
    match command {
        Command::List {
            filter,
            limit,
            json,
        } => {
            let entries = dlq::list(&bus.js, ns, &selection(&filter, Some(limit))).await?;
            if json {
                for e in &entries {
                    println!("{}", serde_json::to_string(e)?);
                }
            } else {
                println!(
                    "{:>6}  {:<8} {:<16} {:>4}  {:<20}  REASON",
                    "SEQ", "STAGE", "TENANT", "DLV", "FAILED AT"
                );
                for e in &entries {
                    println!(
                        "{:>6}  {:<8} {:<16} {:>4}  {:<20}  {}",
                        e.seq,
                        e.stage,
                        e.tenant,
                        e.deliveries,
                        e.failed_at.format("%Y-%m-%d %H:%M:%S"),
                        e.reason
                    );
                }
                eprintln!("{} dead letter(s)", entries.len());
            }
        }
        Command::Show { seq } => {
            let entry = dlq::get(&bus.js, ns, seq).await?;
            let mut value = serde_json::to_value(&entry)?;
            value["payload"] =
                serde_json::Value::String(String::from_utf8_lossy(&entry.payload).into_owned());
            if let Some(obj) = value.as_object_mut() {
                obj.remove("payload_preview");
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        Command::Replay { seqs, all, filter } => {
            let entries = if all {
                dlq::list(&bus.js, ns, &selection(&filter, None)).await?
            } else if seqs.is_empty() {
                anyhow::bail!("name the sequences to replay, or pass --all");
            } else {
                let mut entries = Vec::new();
                for seq in seqs {
                    entries.push(dlq::get(&bus.js, ns, seq).await?);
                }
                entries
            };
            let mut replayed = 0;
            for entry in &entries {
                dlq::replay(&bus.js, ns, entry).await?;
                replayed += 1;
            }
            println!("replayed {replayed} dead letter(s)");
        }
        Command::Purge { filter, yes } => {
            if !yes {
                anyhow::bail!("purging deletes dead letters for good: pass --yes to confirm");
            }
            let purged = dlq::purge(&bus.js, ns, &selection(&filter, None)).await?;
            println!("purged {purged} dead letter(s)");
        }
    }
    Ok(())
}
