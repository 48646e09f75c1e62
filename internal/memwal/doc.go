// Package memwal is the writer side of the MemWAL: per-shard writers that
// claim a shard, log records to a write-ahead log, hold them in a MemTable
// and flush the MemTable to key-sorted SSTables that the merge job later
// lands in the base table.
//
// Layout under the table root (docs/format.md):
//
//	_mem_wal/{shard}/manifest/{inv:020}.binpb   ShardManifest, inv = MaxUint64 - version
//	_mem_wal/{shard}/wal/{position:020}.wal     one WalEntry, length-prefixed, CRC32C
//	_mem_wal/{shard}/sst/{gen:020}-{uuid}.parquet  flushed MemTable with an "_op" column
//
// # Versions and epochs
//
// Shard-manifest versions are dense and each is written put-if-absent, so
// every version has exactly one author. A writer claims a shard by
// publishing version v+1 with writer_epoch one above v's. Only the holder of
// the newest epoch publishes flushes; a maintenance job (trim) may publish a
// version that keeps writer_epoch, and the writer rebases its flush on it.
//
// # Fencing (Lance #6699)
//
// A writer whose epoch has been superseded must neither append to the WAL
// nor publish a flush. Three mechanisms together guarantee it:
//
//  1. Claim marker. After publishing its epoch and replaying, a new writer
//     writes an empty entry at the next WAL position. A stale writer only
//     ever writes at its own last position + 1, so it collides with the
//     marker (or an entry above it) before it could write past it, and a
//     collision with an entry of a higher epoch fences it: nothing landed.
//  2. Re-check after writing. After every WAL put lands, the writer checks
//     that its shard-manifest version is still the newest (one short
//     listing: trim deletes old versions, so probing v+1 could miss a
//     newer claim). Trim frees WAL positions below the
//     replay cursor, and a stalled writer could land an entry in a freed
//     position; the re-check turns that into ErrFenced, and replay never
//     reads below the cursor, so the entry is never applied.
//  3. Flushes publish with put-if-absent on the next shard-manifest version,
//     after checking that the newest version still carries the writer's
//     epoch.
//
// A wal configure that drops a shard seals it first: a version with the
// next epoch and status SEALED fences every writer the same way, and a
// sealed shard cannot be claimed, so the configure's "nothing is waiting"
// check runs when nothing can be added any more.
//
// An append that races a claim itself (its entry lands after the new writer
// listed the WAL but before its marker) may be replayed by the new writer
// even though the stale writer reports ErrFenced: like an ambiguous commit,
// a fenced append's records must be treated as possibly written.
//
// # Replay cursor (Lance #8293, #6767)
//
// replay_after_wal_position moves only over a contiguous run of WAL entries
// that are all inside published SSTables: a flush is published only if its
// first WAL position is the cursor + 1, and flushes are published in order,
// so a failed flush of generation N blocks N+1 rather than letting it move
// the cursor past N's entries. Replay decides what to apply from the cursor
// alone, never from whether the SSTable list is empty: a merge and a trim
// may have drained the list. A corrupt or missing entry above the cursor
// stops replay with an error; replay never skips data.
package memwal
