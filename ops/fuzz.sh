#!/usr/bin/env bash
# Fuzzes the envelope parser, the LLM-output parser and the rules extractor
# (fuzz/fuzz_targets/), each for the given number of seconds (default 60), one
# after the other. Fails if any target finds a crash: a panic, a broken
# property (each target asserts its own), an input slower than 10 s, or more
# than 2 GB of memory; it prints the input that did it and how to replay it.
#
#   ops/fuzz.sh              # a minute per target
#   ops/fuzz.sh 3600         # an hour per target
#   FUZZ_TARGETS=rules ops/fuzz.sh 600
#
# Stable Rust: cargo-fuzz runs with `--sanitizer none` (coverage-guided
# libFuzzer, debug assertions and overflow checks on; AddressSanitizer needs
# nightly, and the code under test has no unsafe). The corpus a run grows is
# kept in fuzz/target/corpus/<target> (not committed; HINDSIGHT_FUZZ_CORPUS_DIR
# puts it elsewhere, as .ci/run does outside the clone) and seeded from the
# committed fuzz/corpus/<target>, so later runs start where earlier ones ended.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[fuzz] %s\n' "$*" >&2; }

seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*) log "usage: ops/fuzz.sh [seconds-per-target]"; exit 2 ;;
esac
read -r -a targets <<<"${FUZZ_TARGETS:-envelope llm_reply rules}"
flags=(--sanitizer none --debug-assertions)

if ! cargo fuzz --version >/dev/null 2>&1; then
  log "installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

# A build directory chosen for the main workspace (as .ci/run does) gets a sibling for the fuzz
# build, which compiles the same crates with other flags: each stays warm between runs.
if [ -n "${CARGO_BUILD_BUILD_DIR:-}" ]; then
  export CARGO_BUILD_BUILD_DIR="${CARGO_BUILD_BUILD_DIR%/}-fuzz"
fi

log "building ${targets[*]}"
start=$SECONDS
cargo fuzz build "${flags[@]}"
log "built in $((SECONDS - start)) s"

root="$PWD/fuzz"
failed=()
for target in "${targets[@]}"; do
  work="${HINDSIGHT_FUZZ_CORPUS_DIR:-$root/target/corpus}/$target"
  artifacts="$root/artifacts/$target"
  logfile="$root/target/logs/$target.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$logfile")"
  before=$(find "$work" -type f | wc -l)
  known=$(find "$artifacts" -type f | sort)
  dict=()
  [ -f "$root/dict/$target.dict" ] && dict=("-dict=$root/dict/$target.dict")
  log "$target: ${seconds} s (log: $logfile)"
  status=0
  cargo fuzz run "${flags[@]}" "$target" "$work" "$root/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" >"$logfile" 2>&1 || status=$?
  after=$(find "$work" -type f | wc -l)
  if [ "$status" -eq 0 ]; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logfile" | tail -1)
    log "$target: passed, ${execs:-?} inputs (${rate:-?}/s), corpus $before → $after"
    continue
  fi
  failed+=("$target")
  tail -n 40 "$logfile" >&2
  new=$(comm -13 <(printf '%s\n' "$known") <(find "$artifacts" -type f | sort) | grep . || true)
  for artifact in $new; do
    log "$target: FAILED on $artifact"
    log "  replay: cargo fuzz run ${flags[*]} $target $artifact"
    log "  shrink: cargo fuzz tmin ${flags[*]} $target $artifact"
  done
  [ -n "$new" ] || log "$target: FAILED (exit $status) without an artifact: see $logfile"
done

if [ "${#failed[@]}" -gt 0 ]; then
  log "crashes found by: ${failed[*]}"
  exit 1
fi
log "no crashes in ${#targets[@]} targets × ${seconds} s ($((SECONDS - start)) s in all)"
