#!/usr/bin/env bash
# Side by side: the same benchmark on an older commit and on this checkout, in one sitting.
#
#   ops/bench-compare.sh REV [--rounds N] -- BENCH [ARGS...]
#   ops/bench-compare.sh 860b83a --rounds 3 -- filter --turns 20000
#   ops/bench-compare.sh main~5 -- recall
#
# Builds REV in a git worktree under /var/tmp/hindsight-compare/ and this checkout's working
# tree, both release, then runs `hindsight bench BENCH ARGS --json` N times each (default 3),
# alternating older and newer so that the machine's drift falls on both, and prints every run's
# JSON line and, per number the benchmark reports, the mean of each side and newer ÷ older.
# Each older commit builds in a cargo build directory of its own
# (/var/tmp/hindsight-compare/build-SHA, kept between runs): sharing one, or this checkout's,
# would not do, because cargo names a workspace crate's artifacts by its path inside the
# workspace, so two checkouts' crates overwrite each other (the newer side then compiled against
# the older side's hindsight-shared). A new one starts as a copy of the latest other one, so that
# only what differs compiles again. A benchmark that needs services (NATS, PostgreSQL) finds them
# as for `bench`.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
rev="$1"
shift
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="${2:?--rounds takes a number}"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] || usage
case "$rounds" in '' | *[!0-9]* | 0) echo "[compare] --rounds must be a positive number" >&2; exit 2 ;; esac

sha="$(git rev-parse --verify --quiet "$rev^{commit}")" || {
  echo "[compare] $rev is not a commit here" >&2
  exit 2
}
build_dir="/var/tmp/hindsight-compare/build-${sha:0:12}"
tree="/var/tmp/hindsight-compare/${sha:0:12}"
if [ ! -d "$build_dir" ]; then
  latest="$(ls -dt /var/tmp/hindsight-compare/build-???????????? 2>/dev/null | head -n 1 || true)"
  if [ -n "$latest" ]; then
    echo "[compare] seeding $build_dir from $latest" >&2
    rm -rf "$build_dir.partial"
    cp -a "$latest" "$build_dir.partial"
    # The workspace's own crates always compile again: their fingerprints
    # would compare the other commit's sources by time, not by content.
    rm -rf "$build_dir.partial"/release/.fingerprint/hindsight*
    mv "$build_dir.partial" "$build_dir"
  fi
fi
if [ ! -d "$tree" ]; then
  mkdir -p "$(dirname "$tree")"
  git worktree add --detach "$tree" "$sha" >&2
fi

echo "[compare] building ${sha:0:12} (older) in $tree" >&2
(cd "$tree" && CARGO_BUILD_BUILD_DIR="$build_dir" cargo build --release --locked --bin hindsight >&2)
echo "[compare] building this checkout (newer)" >&2
cargo build --release --locked --bin hindsight >&2
older="$tree/target/release/hindsight"
newer="$PWD/target/release/hindsight"

runs="$(mktemp)"
trap 'rm -f "$runs"' EXIT
for round in $(seq 1 "$rounds"); do
  for side in older newer; do
    bin="$older"
    [ "$side" = newer ] && bin="$newer"
    echo "[compare] round $round/$rounds: $side" >&2
    line="$("$bin" bench "$@" --json | tail -n 1)"
    echo "$side $line" | tee -a "$runs"
  done
done

python3 - "$runs" "${sha:0:12}" <<'EOF'
import json, sys
path, rev = sys.argv[1], sys.argv[2]
sides = {"older": [], "newer": []}
for line in open(path):
    side, _, body = line.partition(" ")
    sides[side].append(json.loads(body))

def numbers(run, prefix=""):
    for key, value in run.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            yield prefix + key, float(value)
        elif isinstance(value, dict):
            yield from numbers(value, prefix + key + ".")

means = {}
for side, runs in sides.items():
    sums = {}
    for run in runs:
        for key, value in numbers(run):
            sums.setdefault(key, []).append(value)
    means[side] = {k: sum(v) / len(v) for k, v in sums.items()}
print(f"\n{'measure':<32} {'older ' + rev:>20} {'newer':>14} {'newer/older':>12}")
for key, old in means["older"].items():
    new = means["newer"].get(key)
    if new is None:
        continue
    ratio = f"{new / old:.3f}" if old else "-"
    print(f"{key:<32} {old:>20.3f} {new:>14.3f} {ratio:>12}")
EOF
