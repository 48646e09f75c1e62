// Package model is the randomized model-based test of compactord
// (docs/reliability.md). Run drives random appends, deletes, MemWAL
// writes, flushes, writer restarts and steals, merges, compactions
// (deferred and inline), index builds, catch-ups, remaps and FRI trims,
// MemWAL reconfiguration, trims and cleanups against a table, decorated
// with injected storage faults (storage.Faulty, OutageBucket), simulated
// crashes (CrashBucket) and lost races, and after every step checks the
// table against Ref, an independent in-memory model, and runs verify
// with the deep index check.
//
// Ref, the read helpers (ScanLatest, SyncShards, SyncWAL,
// CheckShardDurable) and CheckIndices are shared with the crash and
// concurrency campaigns.
package model
