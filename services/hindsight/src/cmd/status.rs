//! `hindsight status`.

use hindsight_shared::status;

#[derive(clap::Args)]
pub struct Args {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let (config, bus) = super::connect().await?;
    let streams = status::collect(&bus.js, &config.namespace).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&streams)?);
        return Ok(());
    }
    println!(
        "{:<24} {:>10} {:<10} {:>10} {:>12} {:>12}",
        "STREAM", "MESSAGES", "CONSUMER", "PENDING", "ACK PENDING", "REDELIVERED"
    );
    for s in streams {
        let messages = s.messages.map_or("missing".to_string(), |m| m.to_string());
        if s.consumers.is_empty() {
            println!(
                "{:<24} {:>10} {:<10} {:>10} {:>12} {:>12}",
                s.stream, messages, "-", "-", "-", "-"
            );
        }
        for c in s.consumers {
            println!(
                "{:<24} {:>10} {:<10} {:>10} {:>12} {:>12}",
                s.stream, messages, c.name, c.pending, c.ack_pending, c.redelivered
            );
        }
    }
    Ok(())
}
