#!/usr/bin/env bash
# make bench: compactord's benchmarks on Lance tables, each against LanceDB
# 0.39 (tools/lancedb, `make lancedb`) as the peer: MemWAL merge vs
# LanceDB's mergeInsert, compaction vs LanceDB's compact_files, append
# growth, scans, verify over long histories, the Go MemWAL writer
# against LanceDB's, full-text catch-up against optimize()'s index step,
# and vector index catch-up and remap against LanceDB's optimize(). Each prints its figures
# (docs/benchmarks.md, the "Lance:" sections, quotes them with the command
# that reproduces them). The tests' own variables (LANCE_BENCH_ROWS,
# LANCE_BENCH_UPSERTS, LANCE_BENCH_TRIALS, ...) scale them.
#
#   BENCH_ONLY=merge,compact    a subset: merge, compact, append, scan, verify, wal, fts, vector
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
declare -A tests=(
  [merge]='./internal/merge ^TestBench(MemWALMerge|MergeGenerations)$'
  [compact]='./internal/compact ^TestBenchCompaction$'
  [append]='./internal/table ^TestBenchAppendGrowth$'
  [scan]='./internal/scan ^TestBenchLanceDB'
  [verify]='./internal/verify ^TestBenchVerifyHistory$'
  [wal]='./lancewal ^TestBenchWriter$'
  [fts]='./internal/index ^TestBenchFullTextCatchUp$'
  [vector]='./internal/index ^TestBenchVectorIndex$'
)
only=${BENCH_ONLY:-merge,compact,append,scan,verify,wal,fts,vector}
# The compaction benchmark's table shapes and sizes (docs/benchmarks.md,
# "Lance: compaction"): with and without a vector column, with a btree and
# a bitmap, with an IVF_PQ index on the vector, inline and deferred remap,
# at 1, 4 and 16 Mi rows (the slope of peak RSS over them); and the wide
# table (id and a 768-d vector, 200 000 rows), without and with an IVF_PQ
# index. About an hour on a 2-core machine.
export LANCE_BENCH_SHAPES=${LANCE_BENCH_SHAPES:-plain;vec;btree,bitmap;vec,btree,bitmap;ivfpq;btree,bitmap,defer;vec,btree,bitmap,defer;wide;wide,ivfpq}
export LANCE_BENCH_ROWS_COMPACT=${LANCE_BENCH_ROWS_COMPACT:-1048576,4194304,16777216}
status=0
for name in ${only//,/ }; do
  spec=${tests[$name]:-}
  if [ -z "$spec" ]; then
    echo "bench.sh: unknown section $name (want merge, compact, append, scan, verify, wal, fts, vector)" >&2
    exit 2
  fi
  read -r pkg run <<<"$spec"
  echo "== $name: go test $pkg -run '$run'"
  rows=${LANCE_BENCH_ROWS:-}
  if [ "$name" = compact ]; then
    rows=${LANCE_BENCH_ROWS:-$LANCE_BENCH_ROWS_COMPACT}
  fi
  LANCE_BENCH=1 CI=true LANCE_BENCH_ROWS=$rows $GO test -count=1 -timeout 180m -run "$run" -v "$pkg" || status=1
done
exit $status
