#!/usr/bin/env bash
# The whole test suite: set up what is missing, then formatting, lints, and
# every unit and integration test against the real NATS and PostgreSQL, then a
# short fuzzing run of the three parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
./ops/setup.sh --browser
echo "[test] cargo fmt --check" >&2
cargo fmt --all -- --check
echo "[test] cargo clippy" >&2
cargo clippy --locked --workspace --all-targets -- -D warnings
echo "[test] cargo test" >&2
cargo test --locked --workspace
echo "[test] fuzzing, 60 s a target" >&2
./ops/fuzz.sh 60
