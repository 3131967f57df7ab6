//! How fast the filter's per-turn judgement runs, alone: `judge` on the
//! turns `hindsight bench filter` publishes, without NATS or Postgres.
//! For profiles (`valgrind --tool=callgrind`) and side-by-side runs:
//!
//!   cargo run --release -p hindsight-screen --example judge_speed -- [TURNS]

use std::time::Instant;

use hindsight_core::turn::{Turn, parse_envelope};
use hindsight_screen::{judge, screen};
use hindsight_shared::synthetic;

fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("TURNS is a number"))
        .unwrap_or(20_000);
    let parsed: Vec<_> = (0..turns)
        .map(|i| {
            let v = synthetic::turn("bench", i);
            parse_envelope(v.to_string().as_bytes(), "bench", chrono::Utc::now())
                .expect("a valid turn")
        })
        .collect();
    let fit = Instant::now();
    screen::learnt::model();
    // The patterns compile on first use: once, before the clock starts.
    if let Some(first) = parsed.first() {
        judge(first, None, screen::Settings::default());
    }
    eprintln!(
        "model fit and patterns compiled in {:.2} s",
        fit.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let quarantined = judged(parsed.get(1..).unwrap_or_default());
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{turns} turns judged in {seconds:.3} s: {:.0} turns/s, {:.1} µs per turn ({quarantined} quarantined)",
        turns as f64 / seconds,
        seconds * 1e6 / turns as f64
    );
}

/// The timed loop, a function of its own so that a profile can collect it
/// alone (`--toggle-collect=judge_speed::judged`). Returns how many turns
/// were quarantined.
#[inline(never)]
fn judged(turns: &[Turn]) -> usize {
    turns
        .iter()
        .filter(|turn| judge(turn, None, screen::Settings::default()).quarantine)
        .count()
}
