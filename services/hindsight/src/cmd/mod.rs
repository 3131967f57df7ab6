pub mod bench;
pub mod dedupe_eval;
pub mod dlq;
pub mod eval;
pub mod locomo_eval;
pub mod maintenance;
pub mod mcp;
pub mod publish;
pub mod recall;
pub mod screen_corpus;
pub mod screen_encoder;
pub mod screen_eval;
pub mod status;
pub mod streams;
pub mod tenant;
pub mod up;
pub mod user;

use hindsight_shared::{Config, bus::Bus, config, telemetry};

/// Configuration and logs for a command. Commands that only talk to the
/// servers log warnings and errors unless `HINDSIGHT_LOG` asks for more.
pub fn setup() -> anyhow::Result<Config> {
    let mut config = Config::from_env()?;
    if std::env::var_os("HINDSIGHT_LOG").is_none() {
        config.log = "warn".into();
    }
    telemetry::init_logs(&config);
    Ok(config)
}

/// Configuration and logs for a process that runs stages.
pub fn setup_service() -> anyhow::Result<Config> {
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

pub async fn reindex() -> anyhow::Result<()> {
    let config = setup()?;
    let store = hindsight_store::Store::connect(&config.database_url, config.db_pool).await?;
    let index = hindsight_index::open(&config.index, &config.data_dir)?;
    let started = std::time::Instant::now();
    let count =
        hindsight_persist::reconcile::reindex(&store, index.as_ref(), &config.namespace).await?;
    hindsight_persist::reconcile::optimize_all(&store, index.as_ref(), &config.namespace).await;
    println!(
        "reindexed {count} memories in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
