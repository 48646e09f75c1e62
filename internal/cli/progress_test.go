package cli

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/scheduler/clock"
)

// tickClock moves step forward at every reading: each batch a job reports
// then takes step of (fake) time, so a job's progress lines come at known
// points, with no sleep and no wall clock.
type tickClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *tickClock) NewTimer(time.Duration) clock.Timer { panic("progress reporters need no timer") }

func withTickClock(t *testing.T, step time.Duration) {
	t.Helper()
	progressClock = &tickClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: step}
	t.Cleanup(func() { progressClock = nil })
}

// jsonLines parses stderr as JSON log lines; every line must be one.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stderr line %q is not a JSON log line: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.011 }

// A one-shot compact of 20 fragments reports one row group (here one
// fragment) at a time, one (fake) second each: with a 5 s interval the
// progress lines come every 5 s, never more often, with rows and bytes
// done, the rate and the ETA, then a final line with the totals and the
// duration; nothing else reaches stderr, even with --log-level error
// (which hides the components' logs, not progress).
func TestCompactLogsProgress(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 20, 10)
	withTickClock(t, time.Second)
	r := run(t, "", "compact", dir, "--target-rows", "1000", "--log-format", "json", "--log-level", "error")
	if r.code != 0 {
		t.Fatalf("compact: exit %d: %s", r.code, r.stderr)
	}
	lines := jsonLines(t, r.stderr)
	var prog []map[string]any
	var final map[string]any
	for _, l := range lines {
		if l["component"] != "progress" || l["level"] != "info" {
			t.Fatalf("a line that is not progress on stderr: %v", l)
		}
		switch l["msg"] {
		case "progress":
			prog = append(prog, l)
		case "progress done":
			if final != nil {
				t.Fatal("two final lines")
			}
			final = l
		default:
			t.Fatalf("unexpected line %v", l)
		}
	}
	// Start reads the clock at 1 s, the 20 row groups at 2..21 s: lines
	// at 5, 10, 15, 20 s of work; the end at 21 s.
	if len(prog) != 4 || final == nil {
		t.Fatalf("%d progress lines and final %v, want 4 and one:\n%s", len(prog), final, r.stderr)
	}
	var prev float64
	for i, l := range prog {
		el, done := l["elapsed_seconds"].(float64), l["rows_done"].(float64)
		if i > 0 && el-prev < 5 {
			t.Fatalf("line %d %v s after the previous one (interval 5 s)", i, el-prev)
		}
		prev = el
		if l["phase"] != "compact" || l["rows_total"].(float64) != 200 || done != 10*el {
			t.Fatalf("line %d: %v", i, l)
		}
		rate := l["rate_rows_per_s"].(float64)
		if !near(rate, done/el) || !near(l["rate_bytes_per_s"].(float64), l["bytes_done"].(float64)/el) {
			t.Fatalf("line %d: rates %v", i, l)
		}
		if eta := l["eta_seconds"].(float64); !near(eta, (200-done)/rate) {
			t.Fatalf("line %d: eta %v, want %v", i, eta, (200-done)/rate)
		}
	}
	if final["rows_done"].(float64) != 200 || final["duration_seconds"].(float64) != 21 ||
		final["bytes_done"] != final["bytes_total"] || final["bytes_total"].(float64) <= 0 {
		t.Fatalf("final line %v", final)
	}
	// The command's own output is unchanged.
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out["rows"].(float64) != 200 {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
}

// The console format (the default) prints the same lines; the interval is
// a flag, and 0 turns progress off.
func TestProgressConsoleAndInterval(t *testing.T) {
	withTickClock(t, time.Second)
	dir := newTable(t)
	r := run(t, "", "table", "append", dir, "--rows", "10000", "--progress-interval", "2s")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	ls := strings.Split(strings.TrimSpace(r.stderr), "\n")
	// 10 batches of 1 024 rows and one data file, a second each: a line
	// every 2 s, then the final line.
	if len(ls) != 6 {
		t.Fatalf("%d stderr lines, want 5 progress and a final one:\n%s", len(ls), r.stderr)
	}
	for _, l := range ls[:5] {
		if !strings.Contains(l, "\tINFO\tprogress\t") || !strings.Contains(l, `"phase": "table append"`) || !strings.Contains(l, `"rows_total": 10000`) {
			t.Fatalf("console progress line %q", l)
		}
	}
	if !strings.Contains(ls[5], "\tINFO\tprogress done\t") || !strings.Contains(ls[5], `"rows_done": 10000`) {
		t.Fatalf("final line %q", ls[5])
	}

	r = run(t, "", "table", "append", dir, "--rows", "10000", "--start", "10000", "--progress-interval", "0")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--progress-interval 0: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, "", "table", "append", dir, "--rows", "1", "--progress-interval", "-1s"); r.code != 2 {
		t.Fatalf("a negative interval: exit %d %q", r.code, r.stderr)
	}
}
