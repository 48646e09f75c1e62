#!/usr/bin/env bash
# make bench: the issue #9 benchmark suite. Builds compactord and the
# harness (cmd/benchsuite), installs the DuckDB peer (bench/, npm ci), runs
# every comparison on generated data and rewrites the generated block of
# docs/benchmarks.md. About 10 minutes with the defaults on 2 cores (plus
# about 4 minutes the first time, to generate the data sets, which are kept
# in $BENCH_WORK and reused).
#
# Sizes and knobs (environment):
#   BENCH_SIZE=small            a quick smoke run (1/16 of the data, 1 trial)
#   BENCH_ONLY=compact,merge    sections: compact, rss, merge, commit, idle
#   BENCH_THREADS=N             DuckDB threads = compactord parallelism (default: nproc)
#   BENCH_TRIALS=N              interleaved trials per comparison (default 3)
#   BENCH_COMPACT_ROWS=N        compaction rows, ~34 B each (default 31457280, 1 GiB)
#   BENCH_COMPACT_FRAGMENTS=N   its fragments (default 32)
#   BENCH_RSS_FRAGMENTS=N       many-fragment variant for peak RSS (default 512)
#   BENCH_RSS_MERGE_UPSERTS=N   upserts merged into the 1 GiB table for peak RSS (default 4194304; 0 skips)
#   BENCH_MERGE_BASE=N          merge base rows (default 10000000)
#   BENCH_MERGE_UPSERTS=N       merge upserts (default 1000000)
#   BENCH_MERGE_FRAGMENT_ROWS=N rows per base fragment (default 1000000)
#   BENCH_COMMIT_SAMPLES=N      commit latency samples (default 500)
#   BENCH_IDLE_TABLES=N         idle daemon tables (default 100)
#   BENCH_IDLE_SETTLE=D BENCH_IDLE_WINDOW=D   e.g. 20s
#   BENCH_S3=0                  skip S3 (versitygw) in the commit benchmark
#   BENCH_BASELINE=BIN          an older compactord, run in the same compaction and merge
#                               trials for before/after figures of a change
#   BENCH_WORK=DIR              data sets and scratch (default var/bench; on the disk to measure)
#   BENCH_OUT=FILE              document to update (default docs/benchmarks.md; "-" prints)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
mkdir -p bin
version=$(git describe --always --dirty 2>/dev/null || echo dev)
$GO build -ldflags "-X github.com/compactord/compactord/internal/cli.Version=$version" -o bin/compactord ./cmd/compactord
$GO build -o bin/benchsuite ./cmd/benchsuite

if [ ! -d bench/node_modules/@duckdb/node-api ]; then
  (cd bench && npm ci --no-audit --no-fund)
fi

args=()
add() { if [ -n "${2:-}" ]; then args+=("$1" "$2"); fi; }

if [ "${BENCH_SIZE:-}" = small ]; then
  : "${BENCH_TRIALS:=1}" "${BENCH_COMPACT_ROWS:=1966080}" "${BENCH_COMPACT_FRAGMENTS:=8}" "${BENCH_RSS_FRAGMENTS:=64}" "${BENCH_RSS_MERGE_UPSERTS:=262144}"
  : "${BENCH_MERGE_BASE:=1000000}" "${BENCH_MERGE_UPSERTS:=100000}" "${BENCH_MERGE_FRAGMENT_ROWS:=250000}"
  : "${BENCH_COMMIT_SAMPLES:=40}" "${BENCH_IDLE_TABLES:=10}" "${BENCH_IDLE_SETTLE:=2s}" "${BENCH_IDLE_WINDOW:=3s}"
  : "${BENCH_WORK:=var/bench-small}"
fi

add --work "${BENCH_WORK:-var/bench}"
add --threads "${BENCH_THREADS:-$(nproc)}"
add --trials "${BENCH_TRIALS:-}"
add --compact-rows "${BENCH_COMPACT_ROWS:-}"
add --compact-fragments "${BENCH_COMPACT_FRAGMENTS:-}"
add --rss-fragments "${BENCH_RSS_FRAGMENTS:-}"
add --rss-merge-upserts "${BENCH_RSS_MERGE_UPSERTS:-}"
add --merge-base "${BENCH_MERGE_BASE:-}"
add --merge-upserts "${BENCH_MERGE_UPSERTS:-}"
add --merge-fragment-rows "${BENCH_MERGE_FRAGMENT_ROWS:-}"
add --commit-samples "${BENCH_COMMIT_SAMPLES:-}"
add --idle-tables "${BENCH_IDLE_TABLES:-}"
add --idle-settle "${BENCH_IDLE_SETTLE:-}"
add --idle-window "${BENCH_IDLE_WINDOW:-}"
add --only "${BENCH_ONLY:-}"
add --baseline "${BENCH_BASELINE:-}"

out=${BENCH_OUT:-docs/benchmarks.md}
if [ "$out" = - ]; then out=""; fi
args+=(--out "$out")

if [ "${BENCH_S3:-1}" != 0 ]; then
  gw="${COMPACTORD_TOOLS:-$PWD/tools}/versitygw"
  if [ -x "$gw" ]; then
    args+=(--versitygw "$gw")
  else
    echo "bench: $gw not found (make tools installs it); the commit benchmark runs on file:// only" >&2
  fi
fi

exec bin/benchsuite run --compactord bin/compactord --node "${NODE:-node}" --bench-dir bench "${args[@]}"
