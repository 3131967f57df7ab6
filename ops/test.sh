#!/usr/bin/env bash
# The whole test suite: set up what is missing, then formatting, lints, and
# every unit and integration test against the real NATS and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
./ops/setup.sh --browser
echo "[test] cargo fmt --check" >&2
cargo fmt --all -- --check
echo "[test] cargo clippy" >&2
cargo clippy --locked --workspace --all-targets -- -D warnings
echo "[test] cargo test" >&2
cargo test --locked --workspace
