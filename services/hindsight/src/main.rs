//! `hindsight`: run any stage or all of them with the gateway, publish turns,
//! recall, serve MCP over stdio, manage tenant keys, erase a user, run and undo maintenance,
//! and inspect streams and the dead-letter queue. Configuration comes from environment variables
//! (`hindsight config` lists them); logs go to stderr.

mod cmd;
mod locomo;
mod stages;

use clap::{Parser, Subcommand};

const AFTER_HELP: &str = "Configuration is read from HINDSIGHT_* environment variables; \
`hindsight config` lists each with its default. Logs go to stderr.";

#[derive(Parser)]
#[command(name = "hindsight", version, about = "Long-term memory for LLM agents, over NATS JetStream and Postgres.", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every stage, the gateway and the janitor in one process (applies streams and migrations first).
    ///
    /// Serves the gateway's HTTP API (/v1/*), MCP (/mcp), /healthz, /readyz and
    /// /metrics on HINDSIGHT_HTTP_ADDR, answers recall on NATS, and prints
    /// `ready: http://ADDR` on stdout once every part is ready.
    Up,
    /// Run one stage, the gateway or the janitor on its own (as its container does).
    Run {
        /// The stage to run.
        #[arg(value_enum)]
        stage: stages::StageName,
    },
    /// Publish turns to `<ns>.turns.<tenant>`.
    Publish(Box<cmd::publish::Args>),
    /// Manage the JetStream streams, consumers and buckets declared in streams/.
    Streams {
        #[command(subcommand)]
        command: cmd::streams::Command,
    },
    /// Inspect, replay and purge the dead-letter queue.
    Dlq {
        #[command(subcommand)]
        command: cmd::dlq::Command,
    },
    /// Show every stream and consumer: messages, pending, ack pending, redelivered.
    Status(cmd::status::Args),
    /// Print the configuration reference and the values in effect (secrets masked).
    Config,
    /// Rebuild the vector index from Postgres, from the stored embeddings (nothing is re-embedded).
    ///
    /// With the embedded index, stop `hindsight up` first: one process owns its directory.
    Reindex,
    /// Measure throughput and recall latency in a throw-away namespace and database.
    Bench {
        #[command(subcommand)]
        command: cmd::bench::Command,
    },
    /// Recall a user's memories through the running gateway (NATS request-reply).
    Recall(Box<cmd::recall::Args>),
    /// Serve MCP over stdio (for agents that spawn their tools).
    Mcp(cmd::mcp::Args),
    /// Create tenants and their gateway keys.
    Tenant {
        #[command(subcommand)]
        command: cmd::tenant::Command,
    },
    /// Erase a user everywhere hindsight keeps what they said.
    User {
        #[command(subcommand)]
        command: cmd::user::Command,
    },
    /// Run the janitor's maintenance now, undo a run, list runs.
    Maintenance {
        #[command(subcommand)]
        command: cmd::maintenance::Command,
    },
    /// Evaluate against the LoCoMo data (../shared/eval/).
    Eval {
        #[command(subcommand)]
        command: cmd::eval::Command,
    },
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // First: it may execute the process again with the model threads' setting.
    hindsight_embedder::threads::share_cores();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(Cli::parse()))
}

async fn run(cli: Cli) -> std::process::ExitCode {
    let result = match cli.command {
        Command::Up => cmd::up::up().await,
        Command::Run { stage } => cmd::up::run(stage).await,
        Command::Publish(args) => cmd::publish::run(*args).await,
        Command::Streams { command } => cmd::streams::run(command).await,
        Command::Dlq { command } => cmd::dlq::run(command).await,
        Command::Status(args) => cmd::status::run(args).await,
        Command::Config => cmd::config(),
        Command::Reindex => cmd::reindex().await,
        Command::Recall(args) => cmd::recall::run(*args).await,
        Command::Mcp(args) => cmd::mcp::run(args).await,
        Command::Tenant { command } => cmd::tenant::run(command).await,
        Command::Bench { command } => cmd::bench::run(command).await,
        Command::Eval { command } => cmd::eval::run(command).await,
        Command::Maintenance { command } => cmd::maintenance::run(command).await,
        Command::User { command } => cmd::user::run(command).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
