// Package memwal holds LanceDB's MemWAL format as the daemon observes it:
// reading a table's shard manifests to tell the scheduler when flushed
// generations wait to be merged (Observer). The bucket transform of the
// sharding spec is in the leaf package bucketing.
package memwal
