//! `hindsight streams apply`.

use hindsight_shared::streams;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Create or update every stream, consumer and KV bucket in streams/ (idempotent).
    Apply,
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Apply => {
            let (config, bus) = super::connect().await?;
            let topology = streams::apply(&bus.js, &config).await?;
            for (spec, consumers) in &topology.streams {
                let names: Vec<_> = consumers.iter().map(|c| c.name.as_str()).collect();
                println!(
                    "stream {} ({}) consumers: {}",
                    config.namespace.stream_name(&spec.name),
                    spec.subjects
                        .iter()
                        .map(|s| config.namespace.absolute(s))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if names.is_empty() {
                        "-".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            }
            for b in &topology.buckets {
                println!(
                    "bucket {} (ttl {}s)",
                    config.namespace.stream_name(&b.name),
                    b.ttl.as_secs()
                );
            }
            Ok(())
        }
    }
}
