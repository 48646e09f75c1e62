//go:build unix

package compact_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used: on a shared machine
// the benchmarks also report bytes per CPU-second, which other tenants do
// not skew the way they skew wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
