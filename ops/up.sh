#!/usr/bin/env bash
# The main job: set up what is missing, build, and run every hindsight stage in
# one process (`hindsight up`). Stop with Ctrl-C: batches in flight finish first.
set -euo pipefail
cd "$(dirname "$0")/.."
./ops/setup.sh
echo "[up] building hindsight (release; the first build takes about 14 minutes on 2 cores)" >&2
cargo build --release --locked -p hindsight
exec ./target/release/hindsight up "$@"
