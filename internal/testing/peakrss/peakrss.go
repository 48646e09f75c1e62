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
	"strconv"
	"strings"
)

// Self is this process's peak RSS in bytes (VmHWM of /proc/self/status),
// or -1 where the kernel does not report one.
func Self() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return parse(string(b))
}

func parse(status string) int64 {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb >= 0 {
				return kb << 10
			}
		}
	}
	return -1
}
