//! `hindsight recall`: asks the running gateway over NATS request-reply
//! (`<ns>.recall.<tenant>`), as any agent can.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hindsight_core::{fact::FactType, memory::Include};
use hindsight_recall::RecallRequest;
use hindsight_recall::rank::brief;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  hindsight recall --tenant acme --user u1 \"what is the user allergic to?\"\n  hindsight recall --tenant acme --user u1 --json --explain --include superseded \"where does the user live?\""
)]
pub struct Args {
    #[arg(long)]
    tenant: String,
    /// The user whose memories to search (`user_id`).
    #[arg(long)]
    user: String,
    /// Only this conversation; also returns its working memory.
    #[arg(long)]
    session: Option<String>,
    /// At most this many memories (default: a dynamic k, those close to the best).
    #[arg(long)]
    k: Option<usize>,
    /// Token budget of the answer (default HINDSIGHT_RECALL_MAX_TOKENS).
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Also search these (comma-separated): superseded, archived, quarantined, and expired
    /// (memories past their end date at --as-of).
    #[arg(long, value_delimiter = ',')]
    include: Vec<Include>,
    /// Recall as of this time (RFC 3339, e.g. 2026-05-09T12:00:00Z; default now).
    #[arg(long)]
    as_of: Option<DateTime<Utc>>,
    /// Only these fact types (comma-separated): preference, constraint, event, plan, entity,
    /// relation, fact.
    #[arg(long, value_delimiter = ',')]
    types: Vec<FactType>,
    /// Print the whole answer as one JSON object.
    #[arg(long, conflicts_with = "brief")]
    json: bool,
    /// Print the memory brief (the default).
    #[arg(long)]
    brief: bool,
    /// With --json, every candidate with its rank per channel and each part of its score.
    #[arg(long)]
    explain: bool,
    /// How long to wait for the gateway.
    #[arg(long, default_value = "10s", value_parser = hindsight_text::duration::parse)]
    timeout: Duration,
    /// What to recall.
    query: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let (config, bus) = super::connect().await?;
    let mut req = RecallRequest::new(args.user, args.query);
    req.session_id = args.session;
    req.top_k = args.k;
    req.max_tokens = args.max_tokens;
    req.fact_types = args.types;
    req.explain = args.explain;
    req.include = args.include;
    req.as_of = args.as_of;
    req.validate()?;
    let answer = hindsight_gateway::remote::request(
        &bus.client,
        &config.namespace,
        &args.tenant,
        &req,
        args.timeout,
    )
    .await
    .map_err(|reason| {
        anyhow::anyhow!(
            "no gateway answered on {} ({reason}): is `hindsight up` (or the gateway) running with HINDSIGHT_NAMESPACE={}?",
            config.namespace.recall_subject(&args.tenant),
            config.namespace
        )
    })??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    print!(
        "{}",
        brief::render(&answer.memories, config.time_zones.of(&args.tenant))
    );
    if let Some(wm) = &answer.working_memory
        && !wm.is_empty()
    {
        println!(
            "\nWorking memory: {}",
            serde_json::Value::Object(wm.clone())
        );
    }
    if let Some(reason) = &answer.degraded_reason {
        eprintln!("degraded: {reason}");
    }
    Ok(())
}
