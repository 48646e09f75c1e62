package peakrss

import "testing"

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
