package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceMissingDataFileQuarantines: a Lance table with one data file
// moved aside halts after quarantine_after failures of the compaction that
// reads it, naming the file; a file-system not-found is not an outage to
// retry forever.
func TestLanceMissingDataFileQuarantines(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := lancedb.Deletes(t, dir)
	data, err := filepath.Glob(filepath.Join(f.Dir, "data", "*.lance"))
	if err != nil || len(data) == 0 {
		t.Fatalf("data files: %v %v", data, err)
	}
	// Every data file a compaction reads: whichever it opens first is gone.
	for _, p := range data {
		if err := os.Rename(p, p+".aside"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := baseConfig()
	cfg.Discover.URL = "file://" + dir
	cfg.Discover.Interval = time.Second
	cfg.Scheduler.PollInterval = 100 * time.Millisecond
	cfg.Scheduler.Schedule.Compact = "@every 1s"
	cfg.Scheduler.Retry.BaseBackoff = 50 * time.Millisecond
	cfg.Scheduler.Retry.MaxBackoff = 100 * time.Millisecond
	cfg.Scheduler.Retry.QuarantineAfter = 2
	r := run(t, cfg, daemon.Deps{})
	waitFor(t, "the table quarantined", 60*time.Second, func() bool {
		ts, ok := r.d.Scheduler().Table("t")
		return ok && ts.Halted != nil
	})
	ts, _ := r.d.Scheduler().Table("t")
	if msg := strings.ToLower(ts.Halted.Error); !strings.Contains(msg, ".lance") || !(strings.Contains(msg, "not found") || strings.Contains(msg, "no such file") || strings.Contains(msg, "missing")) {
		t.Errorf("halted with %+v, want the missing data file named", ts.Halted)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
