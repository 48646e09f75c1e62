// Package faults holds what the reliability campaigns share
// (internal/testing/model, internal/testing/crash, internal/testing/concurrency):
// the soak budget and report line `make soak` collects, and the buckets that
// inject crashes (CrashBucket) and outages (OutageBucket) under a table.
package faults
