//! `hindsight user erase`: erase one user everywhere (docs/erase.md).

use std::time::Duration;

use hindsight_erase::Eraser;
use hindsight_store::Store;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Erase a user: memories, provenance, audit content, the turns archive,
    /// their messages in every stream and the DLQ, working-memory keys, rows
    /// of the janitor's purge exports, and index points. Prints what was
    /// removed, per place, as JSON.
    ///
    /// The erase is a job: run again after an interruption, it resumes where
    /// it stopped and ends in the same state. The record it keeps has the
    /// counts, who asked and when, and a hash of the user's id, never the id.
    /// An unknown user erases nothing and reports zero counts.
    Erase {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        user: String,
        /// Count what an erase would remove, changing nothing.
        #[arg(long)]
        dry_run: bool,
        /// How long to wait for the persist service to remove the index points
        /// before leaving the job running (run the erase again to resume).
        #[arg(long, default_value = "60s", value_parser = hindsight_text::duration::parse)]
        wait: Duration,
    },
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let (config, bus) = super::connect().await?;
    let store = Store::connect(&config.database_url, config.db_pool).await?;
    match command {
        Command::Erase {
            tenant,
            user,
            dry_run,
            wait,
        } => {
            let report = Eraser::open(
                store,
                bus.js.clone(),
                config.namespace.clone(),
                &config.data_dir,
            )
            .await?
            .with_wait(wait)
            .erase(&tenant, &user, "cli", dry_run)
            .await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(())
}
