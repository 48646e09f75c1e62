// Package concurrency is the concurrency campaign on Lance tables:
// LanceDB writers (MemWAL merge-inserts through the table's LSM write
// spec, appends, deletes and plain merge-inserts, and LanceDB's own
// maintenance: optimize and createIndex of btree and bitmap indexes, new
// names or replacing the fixture's) write to several tables of one
// database while several compactord instances maintain them at once: two
// in-process daemons (leases off, so both run every job and race each
// other) and CLI workers running `compactord merge`, `compact`,
// `index catchup`, `index remap`, `trim --reader-grace 0s`, `cleanup`,
// `table append` and `table delete` as processes against random tables.
// The database is a local directory (file://) or a prefix of an S3
// bucket served by versitygw.
//
// Every compactord compaction remaps the indexes inline (the daemons'
// jobs.compact.inline_remap, the CLI's --defer-remap=false): LanceDB's
// optimize remaps the btree through its own compaction's row map only,
// so a deferred remap pending in the fragment-reuse index when it runs
// corrupts the table. COMPACTORD_LANCE_CONCURRENCY_REMAP=deferred runs
// every compaction deferred instead, and
// TestLanceConcurrencyCatchesDeferredRemap shows the campaign reporting
// that corruption.
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
// unindexed row in any index, LanceDB's index-answered counts equal to
// its scan, every generation merged and the merged, caught-up ones
// trimmed.
//
//	go test ./internal/testing/concurrency                     (short: 10 s of writing on file:// and 7 s on S3, in parallel)
//	COMPACTORD_LANCE_CONCURRENCY_DURATION=2m go test ./internal/testing/concurrency -run 'TestLanceConcurrency$' -v
//	COMPACTORD_LANCE_CONCURRENCY_STORES=s3                     (file, s3 or file,s3)
//	COMPACTORD_LANCE_CONCURRENCY_REMAP=deferred                (inline by default)
//	COMPACTORD_LANCE_CONCURRENCY_LANCE_MAINT=optimize=2,createIndex=1   (weights beside append 3, delete 2, merge 1; off: none)
//	make soak                                               (TestSoakLanceConcurrency; rounds alternate between the stores)
package concurrency
