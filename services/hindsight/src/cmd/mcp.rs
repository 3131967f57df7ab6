//! `hindsight mcp`: the MCP server over stdio, for agents that spawn their
//! tools. Recall goes to the running gateway over NATS (which owns the
//! vector index); when none answers, this process answers from Postgres with
//! keyword search and says so. Logs go to stderr; stdout is the protocol.

use hindsight_core::ids::is_valid_tenant;
use hindsight_gateway::{REMOTE_RECALL_TIMEOUT, api::Gateway};
use hindsight_shared::bus::Bus;
use hindsight_store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// The tenant every tool call acts for.
    #[arg(long, env = "HINDSIGHT_MCP_TENANT")]
    tenant: String,
    /// The user tools default to when a call names none.
    #[arg(long, env = "HINDSIGHT_MCP_USER")]
    user: Option<String>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if !is_valid_tenant(&args.tenant) {
        anyhow::bail!(
            "tenant {:?} is not 1 to 128 characters of A-Z a-z 0-9 _ : / @ -",
            args.tenant
        );
    }
    let config = super::setup()?;
    let bus = Bus::connect(&config).await?;
    let store = Store::connect(&config.database_url, config.db_pool).await?;
    let ctx = hindsight_shared::service::Context {
        config: config.clone(),
        bus: bus.clone(),
        store,
    };
    let recaller = hindsight_gateway::recaller(&ctx, None).await?;
    let gateway = Gateway::new(recaller, bus, config.namespace.clone())
        .zoned(config.time_zones.clone())
        .screening(hindsight_screen::screen::Settings::from_config(&config))
        .with_remote_recall(REMOTE_RECALL_TIMEOUT);
    hindsight_gateway::mcp::serve_stdio(gateway, args.tenant, args.user).await
}
