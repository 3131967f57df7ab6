//! How the local models' worker threads wait between operations.
//!
//! candle runs each operation of a model on a pool of worker threads that,
//! between operations, spin (25,000 times by default) before they sleep. On a
//! machine whose cores the model shares with the other stages, Postgres and
//! NATS, a spinning worker holds a core the others need, and a worker
//! preempted mid-operation keeps its partners spinning at the barrier:
//! `bench ingest` on two cores ran at 98.5 facts/s with the default and at 115
//! with 500 spins (three alternating rounds each), the bare embedder no slower.

/// candle's setting: spins before a waiting worker sleeps.
pub const SPIN_LIMIT_VAR: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
/// What hindsight sets it to when the environment does not.
pub const SPIN_LIMIT: &str = "500";

/// Makes sure [`SPIN_LIMIT_VAR`] is set, to [`SPIN_LIMIT`] unless the
/// environment sets it: if it is not, the process executes itself again with
/// it set (same arguments, same process id; the environment is read-only to
/// safe code once threads may exist). Call it first thing in `main`. If that
/// fails, the process goes on with candle's default and says so on stderr.
pub fn share_cores() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(SPIN_LIMIT_VAR).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    // Returns only if the process could not be replaced.
    let error = command.args(args).env(SPIN_LIMIT_VAR, SPIN_LIMIT).exec();
    eprintln!(
        "warning: could not set {SPIN_LIMIT_VAR} ({error}); the model's threads spin as long as candle's default"
    );
}
