//! How the local models use the cores.
//!
//! candle runs each operation of a model on a pool of worker threads, one per
//! core, that wait for each other at the end of every operation and, between
//! operations, spin (25,000 times by default) before they sleep. On a machine
//! whose cores the model shares with the other stages, Postgres and NATS, that
//! loses twice: a spinning worker holds a core the others need, and a worker
//! whose core another process took keeps the whole operation waiting. The
//! bare model on two cores embedded 189 texts/s alone and 119 beside one busy
//! process (`batch_speed` example, LoCoMo's facts in windows of 64).
//!
//! So hindsight runs each call to a local model on one thread
//! (`CANDLE_NUM_THREADS=1`), with a short spin (`CANDLE_BARRIER_POOL_SPIN_LIMIT=500`),
//! and uses the cores by making several calls at once instead: the embed
//! stage embeds `HINDSIGHT_EMBED_PARALLEL` micro-batches at a time, each
//! slowed only while its own core is taken. On two cores, two calls at once
//! of one thread each embedded 211 texts/s in the same windows (249 in
//! windows of 256), against 189 for one call over both cores; a recall's
//! query embeds as fast either way (p50 8.0 ms over 500 queries).

/// candle's settings, and what hindsight sets each to when the environment
/// does not: spins before a waiting worker sleeps, and the threads one
/// operation runs on.
pub const SETTINGS: [(&str, &str); 2] = [
    ("CANDLE_BARRIER_POOL_SPIN_LIMIT", "500"),
    ("CANDLE_NUM_THREADS", "1"),
];

/// Makes sure each of [`SETTINGS`] is set, to hindsight's value unless the
/// environment sets it: if one is not, the process executes itself again
/// with it set (same arguments, same process id; the environment is
/// read-only to safe code once threads may exist). Call it first thing in
/// `main`. If that fails, the process goes on with candle's defaults and says
/// so on stderr.
pub fn share_cores() {
    use std::os::unix::process::CommandExt;
    let missing: Vec<(&str, &str)> = SETTINGS
        .into_iter()
        .filter(|(var, _)| std::env::var_os(var).is_none())
        .collect();
    if missing.is_empty() {
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
    let error = command.args(args).envs(missing).exec();
    eprintln!(
        "warning: could not set candle's threading ({error}); the local models run with candle's defaults"
    );
}
