//! `hindsight bench filter`: end-to-end throughput of the filter stage
//! (publish → kept) in a throw-away namespace and database, so it can run next
//! to a live deployment without touching it.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishAckFuture};
use hindsight_shared::{
    Topic,
    sandbox::Sandbox,
    service::{self, Context},
};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::stages::{self, StageName};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Turns per second through the filter stage, from publish to `kept`.
    Filter {
        /// How many turns to publish.
        #[arg(long, default_value_t = 20_000)]
        turns: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct FilterReport {
    turns: usize,
    kept: u64,
    publish_seconds: f64,
    seconds: f64,
    turns_per_s: f64,
}

const CITIES: &[&str] = &[
    "Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi",
];
const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah",
];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "My favourite restaurant in {city} closed, so {person} suggested a new one on {n}th street.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "我下个月和{person}一起去{city}出差，大概待{n}天。",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

/// A realistic, unique turn for index `i`.
fn turn(tenant: &str, i: usize) -> serde_json::Value {
    let template = TEMPLATES[i % TEMPLATES.len()];
    let content = template
        .replace("{city}", CITIES[(i / 7) % CITIES.len()])
        .replace("{person}", PEOPLE[(i / 3) % PEOPLE.len()])
        .replace("{n}", &(2 + i % 97).to_string());
    json!({
        "tenant": tenant,
        "user_id": format!("user-{}", i % 50),
        "session_id": format!("session-{}", i % 200),
        "turn_id": format!("bench-{i}"),
        "content": format!("{content} (note {i})"),
    })
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Filter { turns, json } => {
            let report = filter(turns).await?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "filter: {} turns kept in {:.2} s → {:.0} turns/s end to end (publishing took {:.2} s)",
                    report.kept, report.seconds, report.turns_per_s, report.publish_seconds
                );
            }
            Ok(())
        }
    }
}

async fn filter(turns: usize) -> anyhow::Result<FilterReport> {
    let base = super::setup()?;
    let sandbox = Sandbox::new(&base, "bench");
    let ctx = Context::boot(sandbox.config.clone()).await?;
    let shutdown = CancellationToken::new();
    let running = service::start(
        &ctx,
        vec![stages::task(StageName::Filter, &ctx)?],
        shutdown.clone(),
    )
    .await?;
    running.readiness.wait().await;

    let result = measure(&ctx, turns).await;
    shutdown.cancel();
    running.wait().await?;
    sandbox.remove(&ctx.bus).await?;
    result
}

async fn measure(ctx: &Context, turns: usize) -> anyhow::Result<FilterReport> {
    let ns = &ctx.config.namespace;
    let tenant = "bench";
    let payloads: Vec<Vec<u8>> = (0..turns)
        .map(|i| turn(tenant, i).to_string().into_bytes())
        .collect();
    let subject = ns.subject(Topic::Turns, tenant);
    let mut kept_stream = ctx.bus.js.get_stream(ns.stream_name("KEPT")).await?;

    let started = Instant::now();
    let mut in_flight: Vec<PublishAckFuture> = Vec::with_capacity(1024);
    for (i, payload) in payloads.into_iter().enumerate() {
        let msg = jetstream::message::PublishMessage::build()
            .payload(payload.into())
            .message_id(format!("{tenant}:bench-{i}"));
        in_flight.push(ctx.bus.js.send_publish(subject.clone(), msg).await?);
        if in_flight.len() == 1024 {
            for ack in in_flight.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in in_flight.drain(..) {
        ack.await?;
    }
    let publish_seconds = started.elapsed().as_secs_f64();

    let deadline = Instant::now() + Duration::from_secs(600);
    let kept = loop {
        let kept = kept_stream.info().await?.state.messages;
        if kept >= turns as u64 || Instant::now() > deadline {
            break kept;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    if kept < turns as u64 {
        anyhow::bail!("only {kept} of {turns} turns were kept within 10 minutes");
    }
    Ok(FilterReport {
        turns,
        kept,
        publish_seconds,
        seconds,
        turns_per_s: turns as f64 / seconds,
    })
}
