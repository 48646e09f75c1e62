// Package crash is the crash campaign of Lance MemWAL maintenance: on
// copies of a table LanceDB built through its MemWAL (several shards and
// generations, a maintained btree index) each point runs the pipeline
// `compactord merge` → `compactord index catchup` → `compactord trim
// --reader-grace 0s`, kills one of the three stages with SIGKILL at a
// random point (at the Nth object it creates, publishes or deletes,
// counted with inotify, or after a random delay) and runs the others to
// completion before and after it. After every kill it checks that verify
// passes, that LanceDB's LSM view still reads the model's rows and its
// base view holds each key once with a value the key had, that every
// generation above min(merged, caught up) of the latest version's MemWAL
// index still has all its files, and that the newest shard manifest, the
// newest covered WAL entry and every entry above the replay cursor still
// exist. Then re-running the killed stage and the ones after it finishes:
// LanceDB's indexStats shows no unindexed rows, trim has deleted every
// merged, caught-up generation and the covered WAL entries, and with every
// generation merged LanceDB's base view is the model and a merge plans
// nothing. The tests are all; this file is the package's documentation.
//
//	go test ./internal/testing/crash                       (short: 3 points per stage)
//	COMPACTORD_LANCE_CRASH_POINTS=120 go test ./internal/testing/crash -run TestLanceCrash -v
//	make soak                                           (TestSoakLanceCrash)
package crash
