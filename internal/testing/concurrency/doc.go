// Package concurrency is the concurrency campaign on Lance tables:
// LanceDB writers (MemWAL merge-inserts through the table's LSM write
// spec, appends, deletes and plain merge-inserts) write to several tables
// of one database directory while several compactord instances maintain
// them at once: two in-process daemons (leases off, so both run every job
// and race each other) and CLI workers running `compactord merge`,
// `index catchup`, `trim --reader-grace 0s`, `cleanup` and
// `table append` as processes against random tables.
//
// While they run, an observer checks each table again and again for
// what must hold at every instant: the latest version and the merged
// positions never go back, catch-up never passes the merged position, a
// generation the latest version still reads (or a maintained index still
// lacks) keeps its files, a WAL entry above the replay cursor is never
// deleted, no key is live twice in the base, every index agrees with a
// scan of its version, and verify finds nothing. (A check that finds a
// file gone reads the table again and counts a violation only if no
// legitimate delete can explain it.) Afterwards every job runs to
// completion and each table must read, through LanceDB's LSM view and its
// base view and through compactord's own scan, exactly what the writers'
// acknowledged operations say (nothing lost, nothing resurrected), with no
// unindexed row, every generation merged and the merged, caught-up ones
// trimmed.
//
//	go test ./internal/testing/concurrency                     (short: ~20 s of writing)
//	COMPACTORD_LANCE_CONCURRENCY_DURATION=2m go test ./internal/testing/concurrency -run TestLanceConcurrency -v
//	make soak                                               (TestSoakLanceConcurrency)
package concurrency
