package peakrss

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestParse(t *testing.T) {
	for status, want := range map[string]int64{
		"Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n": 1234 << 10,
		"VmHWM:\t12 MB\n": -1,
		"VmHWM:\tx kB\n":  -1,
		"VmHWM:\t-5 kB\n": -1,
		"Name:\tx\n":      -1,
		"":                -1,
	} {
		if got := parse(status); got != want {
			t.Errorf("parse(%q) = %d, want %d", status, got, want)
		}
	}
}

// A process that has touched 64 MiB has a peak at least that large.
func TestSelfSeesTouchedMemory(t *testing.T) {
	before := Self()
	if before <= 0 {
		t.Skip("no VmHWM in /proc/self/status")
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		if i%4096 == 0 {
			buf[i] = 1
		}
	}
	if got := Self(); got < 64<<20 {
		t.Fatalf("peak %d bytes after touching 64 MiB", got)
	}
	_ = buf[len(buf)-1]
}

// GoMapped stays at or above the largest heap the process held, after
// the heap is collected and handed back to the kernel: the bound the
// benchmarks print beside VmHWM. File sees the binary's own pages.
func TestGoMappedKeepsThePeak(t *testing.T) {
	if File() <= 0 {
		t.Skip("no RssFile in /proc/self/status")
	}
	buf := make([]byte, 96<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	if got := GoMapped(); got < 96<<20 {
		t.Fatalf("GoMapped %d bytes while 96 MiB is live", got)
	}
	buf = nil
	runtime.GC()
	debug.FreeOSMemory()
	if got := GoMapped(); got < 96<<20 {
		t.Fatalf("GoMapped %d bytes after the 96 MiB was collected and released", got)
	}
}
