pub mod bench;
pub mod dlq;
pub mod publish;
pub mod status;
pub mod streams;
pub mod up;

use hindsight_shared::{Config, bus::Bus, config, telemetry};

/// Configuration and logs for a command.
pub fn setup() -> anyhow::Result<Config> {
    let config = Config::from_env()?;
    telemetry::init_logs(&config);
    Ok(config)
}

/// Configuration, logs and a NATS connection, for commands that only talk to NATS.
pub async fn connect() -> anyhow::Result<(Config, Bus)> {
    let config = setup()?;
    let bus = Bus::connect(&config).await?;
    Ok((config, bus))
}

pub fn config() -> anyhow::Result<()> {
    println!("{}", config::reference_markdown());
    let current = Config::from_env()?;
    println!("In effect (secrets masked):");
    for (k, v) in current.masked() {
        println!("  {k}={v}");
    }
    Ok(())
}
