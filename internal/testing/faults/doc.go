// Package faults injects storage failures for tests. Faulty wraps a bucket
// and fails, delays or blocks the calls its rules match (unit tests use it
// to park an operation at a known point or lose a write's response); the
// reliability campaigns (internal/testing/model, internal/testing/crash,
// internal/testing/concurrency) add the buckets that inject crashes
// (CrashBucket) and outages (OutageBucket) under a table, and the soak
// budget and report line `make soak` collects. It lives with the harnesses
// so that no product binary carries fault injection.
package faults
