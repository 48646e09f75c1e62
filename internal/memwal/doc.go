// Package memwal holds LanceDB's MemWAL format: shard manifests and their
// bit-reversed names, WAL entry and generation naming (shard.go), the
// __lance_mem_wal system index's details with the compacted and catch-up
// positions (details.go), and the observation of a table's shards that
// tells the scheduler when flushed generations wait to be merged
// (Observer). The bucket transform of the sharding spec is in the leaf
// package bucketing.
package memwal
