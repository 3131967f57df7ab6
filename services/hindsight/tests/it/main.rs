//! The `hindsight` command line driven as a process: one binary for every suite but the fault
//! suite (`tests/faults.rs`), which restarts the machine's NATS and PostgreSQL and so runs in a
//! binary of its own, when no other test runs.

mod compose;
mod dlq_cli;
mod erase_kill;
mod maintenance_cli;
mod mcp_stdio;
mod user_cli;
