//! `hindsight tenant`: create tenants and their bearer keys for the gateway.

use hindsight_core::ids::is_valid_tenant;
use hindsight_store::Store;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Create the tenant if needed and print a new bearer key for it. The key
    /// is shown once; only its hash is stored.
    Create { name: String },
    /// Revoke every key of the tenant.
    Revoke { name: String },
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let config = super::setup()?;
    let store = Store::connect(&config.database_url, config.db_pool).await?;
    match command {
        Command::Create { name } => {
            if !is_valid_tenant(&name) {
                anyhow::bail!(
                    "tenant {name:?} is not 1 to 128 characters of A-Z a-z 0-9 _ : / @ -"
                );
            }
            let key = store.create_tenant_key(&name).await?;
            eprintln!(
                "tenant {name}: new key (shown once; send it as `Authorization: Bearer <key>`):"
            );
            println!("{key}");
        }
        Command::Revoke { name } => {
            let n = store.revoke_tenant_keys(&name).await?;
            println!("revoked {n} key(s) of tenant {name}");
        }
    }
    Ok(())
}
