// Package lancewal writes Lance tables through their MemWAL, as LanceDB's
// own writers do, so a Go service can write a Lance table without Rust.
// What it writes, LanceDB's LSM view reads; compactord merges it into the
// base table; and its fencing interoperates with LanceDB's writers: either
// side claiming a shard fences the other.
//
// A table's MemWAL (its __lance_mem_wal system index, which LanceDB's
// setLsmWriteSpec installs and EnableMemWAL can install) routes every
// primary key to one shard: one shard for an unsharded spec, or one of N by
// a murmur3 hash of the key for a bucket spec (integer keys; LanceDB's
// hash of string keys is not matched, so string keys need an unsharded spec). Each shard has one owner at
// a time, a Writer:
//
//   - OpenWriter claims the shard: it writes the shard's next manifest with
//     the next writer epoch (put-if-absent, so of two claims one wins), puts
//     a fence sentinel at the next WAL position (where the previous owner
//     would append next, so its append collides and it learns it was
//     fenced), and replays the WAL entries no generation covers yet. It
//     claims nothing on a table whose metadata says more than the writer
//     models: writer feature flags or MemWAL details fields of a newer
//     Lance, or a maintained index that is neither a btree, a vector
//     index of distance l2, cosine or dot, nor a full-text index whose
//     tokenizer compactord reproduces (fts.NewTokenizer: a generation
//     without its copy, or with one tokenized otherwise, would hide or
//     mis-rank rows for that index's LSM readers). maintain_all_indexes
//     (Lance 13.1) makes every index maintained.
//   - Upsert and Delete append one WAL entry each (an Arrow IPC stream of
//     the table's columns plus _tombstone, tagged with the writer epoch);
//     the call returns once the entry is durable. Rows are buffered in a
//     MemTable.
//   - Flush writes the MemTable as the shard's next generation (a Lance
//     dataset of one fragment holding each key's newest write, copies of
//     the maintained btree, vector and full-text indexes, the _pk_index btree and
//     bloom_filter.bin, laid out as LanceDB 0.39 flushes one) and then the
//     shard manifest that lists it and moves the WAL replay position past
//     it. A vector index's copy is what LanceDB's flush writes for any
//     vector index type: a one-partition IVF_HNSW_SQ segment over the
//     generation's non-null vectors, SQ bounds from those vectors, its
//     HNSW graph built at the flush (the flush's main cost on a vector
//     table; LanceDB's LSM vector search reads a generation only through
//     it).
//   - A flush does not block writes: it freezes the MemTable under the
//     writer's lock and hands writes a new one, builds and writes the
//     generation without the lock, and takes it again only to publish the
//     shard manifest. Frozen MemTables become generations one at a time,
//     in freeze order (each moves the WAL replay position only past the
//     entries it holds); one whose flush fails stays buffered for the next
//     Flush or Close. MaxRows and MaxBytes freeze the MemTable and flush it
//     in the background, and MaxUnflushedBytes holds writes back while
//     frozen MemTables wait, as LanceDB's writer does.
//
// Columns may be booleans, integers, floats, strings, binaries, dates,
// timestamps and float32 vectors (fixed_size_list:float:d, written as
// []float32 or []float64 of length d, or nil); other types are refused.
//
// Readers see a row once its generation is in the shard manifest; a WAL
// entry not yet flushed is durable but invisible until the shard's next
// owner replays and flushes it (LanceDB's readers do not read the WAL).
//
// Files:
//   - table.go: opening a table, its MemWAL configuration, key routing
//   - create.go: creating a table and its scalar indexes
//   - writer.go: claiming, fencing, WAL entries, replay
//   - memtable.go, columns.go: buffered rows and their Arrow and Lance forms
//   - flush.go: freezing MemTables, background flushes, generations
//   - fts.go: a generation's copy of a maintained full-text index
//   - vector.go, vectorcol.go: vector index copies, vector columns
//   - hash.go: shard ids, bucket hashing, the bloom filter
package lancewal
