// Package peakrss reads a process's own peak resident set size, for
// benchmarks that run the measured work in a child process.
//
// The parent's getrusage of a child cannot give the child's peak: Linux
// carries the parent's high-water mark across fork and exec (Go's os/exec
// forks with the parent's memory shared) into the child's ru_maxrss, so a
// child of a large test process reports at least the parent's peak. The
// child reads its own VmHWM instead and prints it.
package peakrss

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Self is this process's peak RSS in bytes (VmHWM of /proc/self/status),
// or -1 where the kernel does not report one.
func Self() int64 { return field("VmHWM:") }

// File is this process's resident file-backed pages (RssFile of
// /proc/self/status), bytes, or -1: for a Go binary, the pages of its own
// text and data that package initialisation and the runtime touched
// (23-28 MiB for compactord's, before it reads a byte of a table). They
// are shared, clean page cache, but VmHWM counts them.
func File() int64 { return field("RssFile:") }

// GoMapped is the memory Go's runtime has mapped for this process
// (runtime/metrics /memory/classes/total:bytes: heap, stacks, runtime
// structures, and pages handed back to the kernel but still mapped). The
// runtime never unmaps its heap, so read at the end of a run it bounds
// from above the anonymous memory the run held at any moment, where
// VmHWM adds the binary's own pages (File).
func GoMapped() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(s[0].Value.Uint64())
}

func field(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return parseField(string(b), name)
}

func parse(status string) int64 { return parseField(status, "VmHWM:") }

func parseField(status, name string) int64 {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == name && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb >= 0 {
				return kb << 10
			}
		}
	}
	return -1
}
