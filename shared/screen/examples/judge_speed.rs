//! How fast the filter's per-turn judgement runs, alone: `judge` on the
//! turns `hindsight bench filter` publishes, without NATS or Postgres.
//! For profiles (`valgrind --tool=callgrind`) and side-by-side runs:
//!
//!   cargo run --release -p hindsight-screen --example judge_speed -- [TURNS]

use std::time::Instant;

use hindsight_core::turn::{Turn, parse_envelope};
use hindsight_screen::{judge, screen};

const CITIES: &[&str] = &[
    "Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi",
];
const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah",
];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "My favourite restaurant in {city} closed, so {person} suggested a new one on {n}th street.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "我下个月和{person}一起去{city}出差，大概待{n}天。",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("TURNS is a number"))
        .unwrap_or(20_000);
    let parsed: Vec<_> = (0..turns)
        .map(|i| {
            let content = TEMPLATES[i % TEMPLATES.len()]
                .replace("{city}", CITIES[(i / 7) % CITIES.len()])
                .replace("{person}", PEOPLE[(i / 3) % PEOPLE.len()])
                .replace("{n}", &(2 + i % 97).to_string());
            let v = serde_json::json!({
                "tenant": "bench", "user_id": format!("user-{}", i % 50),
                "session_id": format!("session-{}", i % 200), "turn_id": format!("bench-{i}"),
                "content": format!("{content} (note {i})"),
            });
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
