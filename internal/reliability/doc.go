// Package reliability holds what the reliability campaigns share
// (internal/lancemodel, internal/lancecrash, internal/lanceconcurrency):
// the soak budget and report line `make soak` collects, and the buckets that
// inject crashes (CrashBucket) and outages (OutageBucket) under a table.
package reliability
