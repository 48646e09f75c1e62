#!/bin/bash
# copy_vs_cp.sh TABLE TRIALS BINARY...: compaction without deletions
# against cp of the same bytes, interleaved, for docs/benchmarks.md.
#
# TABLE is a LanceDB table without deletions, e.g. built with
#   LANCEDB_NODE_MODULES=tools/lancedb/node_modules node \
#     internal/compact/testdata/bench_compact.mjs build DIR plain 8388608 262144 0
# (TABLE = DIR/plain.lance); each BINARY is a test binary of this package
# (go test -c -o BIN ./internal/compact), run as TestBenchCompaction's
# child on a fresh copy of TABLE (one compact.Run, its whole process timed).
# Per trial it prints cp -a of TABLE/data alone, cp -a then sync of every
# copied file (one fsync each), each binary's wall time, and the load.
set -eu
table=$1 trials=$2
shift 2
work=$(mktemp -d "$(dirname "$table")/copy-vs-cp.XXXXXX")
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
for _ in $(seq "$trials"); do
	sync
	s=$(now); cp -a "$table/data" "$work/cp"; e=$(now)
	sync "$work"/cp/*; e2=$(now)
	line="cp $(echo "$e - $s" | bc) cp+sync $(echo "$e2 - $s" | bc)"
	rm -rf "$work/cp"
	for b in "$@"; do
		rm -rf "$work/t.lance"; cp -a "$table" "$work/t.lance"; sync
		s=$(now)
		LANCE_COMPACT_CHILD="$work/t.lance" "$b" -test.run='^TestBenchCompaction$' >/dev/null
		e=$(now)
		line="$line $(basename "$b") $(echo "$e - $s" | bc)"
	done
	echo "$line load $(cut -d' ' -f1 /proc/loadavg)"
done
