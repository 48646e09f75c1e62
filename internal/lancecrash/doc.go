// Package lancecrash is the crash campaign of Lance MemWAL merges: it runs
// `compactord merge` on copies of a table LanceDB built through its
// MemWAL (several shards and generations), kills the process with SIGKILL
// at random points (at the Nth object it creates or publishes, counted
// with inotify, or after a random delay), and checks after every kill that
// LanceDB's LSM view still reads the model's rows, that its base view
// holds each key once with a value the key had, that verify passes, and
// that a re-run finishes the merge (LanceDB's base view then reads the
// model). The tests are all; this file is the package's documentation.
//
//	go test ./internal/lancecrash                       (short: a few points)
//	COMPACTORD_LANCE_CRASH_POINTS=200 go test ./internal/lancecrash -run TestLanceMergeCrash -v
//	make soak                                           (TestSoakLanceMergeCrash)
package lancecrash
