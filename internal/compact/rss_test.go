package compact_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
)

// TestPeakRSS builds COMPACTORD_RSS_FRAGMENTS fragments of 1 Mi rows (about
// 34 MB each; 30 is about 1 GB) with 10% of the rows deleted, then
// compacts them in a child process and reports the child's peak resident
// set size: the building process holds rows in memory, the compacting one
// only what the compaction needs. A measurement, not a unit test: it runs
// only when the variable is set.
func TestPeakRSS(t *testing.T) {
	if dir := os.Getenv("COMPACTORD_RSS_DIR"); dir != "" {
		compactForRSS(t, dir)
		return
	}
	n, _ := strconv.Atoi(os.Getenv("COMPACTORD_RSS_FRAGMENTS"))
	if n == 0 {
		t.Skip("set COMPACTORD_RSS_FRAGMENTS to measure")
	}
	url := "file://" + t.TempDir()
	if keep := os.Getenv("COMPACTORD_RSS_KEEP"); keep != "" {
		url = "file://" + keep
	}
	_, bytes := benchTableAt(t, url, n, 1<<20, 0.10)
	t.Logf("built %d MB at %s", bytes>>20, url)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeakRSS$", "-test.v")
	cmd.Env = append(os.Environ(), "COMPACTORD_RSS_DIR="+url)
	out, err := cmd.CombinedOutput()
	t.Logf("child: %s", out)
	if err != nil {
		t.Fatal(err)
	}
}

func compactForRSS(t *testing.T, url string) {
	ctx := context.Background()
	b, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cm, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := compact.New(compact.Config{TargetRowsPerFragment: 4 << 20, DeletionThreshold: 0.05, Parallelism: 4}, ops.NewTable(b, cm, nil, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, jobs, err := c.Plan(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := c.Execute(ctx, read, jobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted %d MB (%d groups, parallelism 4) in %v; peak RSS %d MiB", p.Stats.BytesRead>>20, len(jobs), time.Since(start), maxRSS()>>20)
	c.Abort(ctx, p)
}

// maxRSS is the peak resident set of this process image. On Linux it reads
// VmHWM: getrusage's maxrss survives exec, so a child would report the
// building parent's peak.
func maxRSS() int64 {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10
}
