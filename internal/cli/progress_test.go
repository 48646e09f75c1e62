package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
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

// newTickClock starts a year from now, so that the versions the commands
// commit on it are newer than the ones committed before on the wall clock,
// and cleanup finds those old enough.
func newTickClock(step time.Duration) *tickClock {
	return &tickClock{now: time.Now().Add(365 * 24 * time.Hour), step: step}
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.011 }

// appendFragments appends n fragments of rows rows each, keys from 0.
func appendFragments(t *testing.T, dir string, n, rows int) {
	t.Helper()
	for i := range n {
		mustRun(t, "", "table", "append", dir, "--rows", fmt.Sprint(rows), "--start", fmt.Sprint(i*rows))
	}
}

// progressLines splits a command's JSON stderr into its progress lines and
// its final lines ("progress done"); any other line fails the test.
func progressLines(t *testing.T, stderr string) (prog, final []map[string]any) {
	t.Helper()
	for _, l := range jsonLines(t, stderr) {
		if l["component"] != "progress" || l["level"] != "info" {
			t.Fatalf("a line that is not progress on stderr: %v", l)
		}
		switch l["msg"] {
		case "progress":
			prog = append(prog, l)
		case "progress done":
			final = append(final, l)
		default:
			t.Fatalf("unexpected line %v", l)
		}
	}
	return prog, final
}

// A one-shot compact of a Lance table's 20 fragments reports one fragment
// at a time (all are copied whole), one (fake) second each: with a 5 s
// interval the progress lines come every 5 s, never more often, with rows
// and bytes done out of the plan's totals, the rate and the ETA, then a
// final line with the totals and the duration; nothing else reaches
// stderr, even with --log-level error (which hides the components' logs,
// not progress).
func TestLanceCompactLogsProgress(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 20, 10)
	tc := newTickClock(time.Second)
	r := runAt(t, tc, "", "compact", dir, "--target-rows", "1000", "--log-format", "json", "--log-level", "error")
	if r.code != 0 {
		t.Fatalf("compact: exit %d: %s", r.code, r.stderr)
	}
	prog, finals := progressLines(t, r.stderr)
	// Start reads the clock at 1 s, the 20 fragments at 2..21 s: lines
	// at 5, 10, 15, 20 s of work; the end at 21 s, plus the readings of
	// the commit, which runs on the same clock (the fragment-reuse entry,
	// the manifest's timestamp): a few whole seconds more.
	if len(prog) != 4 || len(finals) != 1 {
		t.Fatalf("%d progress lines and %d final ones, want 4 and 1:\n%s", len(prog), len(finals), r.stderr)
	}
	final := finals[0]
	var prev float64
	for i, l := range prog {
		el, done := l["elapsed_seconds"].(float64), l["rows_done"].(float64)
		if i > 0 && el-prev < 5 {
			t.Fatalf("line %d %v s after the previous one (interval 5 s)", i, el-prev)
		}
		prev = el
		if l["phase"] != "compact" || l["rows_total"].(float64) != 200 || done != 10*el ||
			l["bytes_done"].(float64) <= 0 || l["bytes_done"].(float64) > l["bytes_total"].(float64) {
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
	if d := final["duration_seconds"].(float64); d != math.Trunc(d) || d < 21 || d > 26 {
		t.Fatalf("final line %v: duration %v s, want 21 s of the tick clock and a few commit readings", final, d)
	}
	if final["phase"] != "compact" || final["rows_done"].(float64) != 200 ||
		final["bytes_done"] != final["bytes_total"] || final["bytes_total"].(float64) <= 0 {
		t.Fatalf("final line %v", final)
	}
	// The command's own output is unchanged.
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out["groups"].(float64) != 1 {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
}

// The console format (the default) prints the same lines; the interval is
// a flag, and 0 turns progress off.
func TestLanceProgressConsoleAndInterval(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 10, 10)
	src := t.TempDir()
	copyDir(t, dir, src)
	tc := newTickClock(time.Second)
	r := runAt(t, tc, "", "compact", dir, "--target-rows", "1000", "--progress-interval", "2s")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	ls := strings.Split(strings.TrimSpace(r.stderr), "\n")
	// Start at 1 s, the 10 fragments at 2..11 s: a line every 2 s (at
	// 3, 5, 7, 9, 11 s), then the final line.
	if len(ls) != 6 {
		t.Fatalf("%d stderr lines, want 5 progress and a final one:\n%s", len(ls), r.stderr)
	}
	for _, l := range ls[:5] {
		if !strings.Contains(l, "\tINFO\tprogress\t") || !strings.Contains(l, `"phase": "compact"`) || !strings.Contains(l, `"rows_total": 100`) {
			t.Fatalf("console progress line %q", l)
		}
	}
	if !strings.Contains(ls[5], "\tINFO\tprogress done\t") || !strings.Contains(ls[5], `"rows_done": 100`) {
		t.Fatalf("final line %q", ls[5])
	}

	r = runAt(t, tc, "", "compact", src, "--target-rows", "1000", "--progress-interval", "0")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, `"groups":1`) {
		t.Fatalf("--progress-interval 0: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runAt(t, tc, "", "compact", src, "--progress-interval", "-1s"); r.code != 2 {
		t.Fatalf("a negative interval: exit %d %q", r.code, r.stderr)
	}
}

// Every long Lance job of the command line reports its phase: table
// append, index create, wal write, merge, index catch-up, trim, compact,
// index remap, cleanup (reading the manifests, then deleting) and verify. With a 1 s interval and a
// clock a second further at every reading, each report is a line; every
// phase ends with a final line whose counts reach its total where the
// total is known up front.
func TestLanceJobsReportProgress(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 6, 10)
	tc := newTickClock(time.Second)
	// finals runs a command and returns its final lines by phase, in
	// order, checking that each phase logged progress lines first.
	finals := func(args ...string) (phases []string, by map[string]map[string]any) {
		t.Helper()
		r := runAt(t, tc, "", append(args, "--log-format", "json", "--progress-interval", "1s")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		prog, fin := progressLines(t, r.stderr)
		by = map[string]map[string]any{}
		seen := map[string]bool{}
		for _, l := range prog {
			seen[l["phase"].(string)] = true
		}
		for _, l := range fin {
			p := l["phase"].(string)
			if !seen[p] {
				t.Errorf("%v: phase %q has a final line and no progress line:\n%s", args, p, r.stderr)
			}
			phases = append(phases, p)
			by[p] = l
		}
		return phases, by
	}
	num := func(l map[string]any, k string) float64 { f, _ := l[k].(float64); return f }
	complete := func(what string, l map[string]any, rows float64) {
		t.Helper()
		if l == nil {
			t.Fatalf("%s: no final line", what)
		}
		if num(l, "rows_total") != rows || num(l, "rows_done") != rows {
			t.Errorf("%s: final line %v, want %v rows of %v", what, l, rows, rows)
		}
	}

	// A copy of the table takes a larger append, of several batches.
	big := t.TempDir()
	copyDir(t, dir, big)
	_, by := finals("table", "append", big, "--rows", "5000", "--start", "1000")
	complete("table append", by["table append"], 5000)

	_, by = finals("index", "create", dir, "--name", "id_idx", "--column", "id", "--type", "btree")
	complete("index create", by["index create"], 60)

	mustRun(t, "", "wal", "configure", dir, "--maintain", "id_idx")
	for _, start := range []string{"100", "130"} {
		_, by = finals("wal", "write", dir, "--rows", "30", "--start", start, "--flush")
		complete("wal write", by["wal write"], 30)
	}
	// The generations' 60 rows read, then the key column of the base
	// table's 60 rows scanned.
	_, by = finals("merge", dir)
	complete("merge", by["merge"], 120)
	if num(by["merge"], "bytes_done") <= 0 {
		t.Errorf("merge: no bytes counted: %v", by["merge"])
	}

	// The merged fragment (the MemWAL's maintained copy is not a segment
	// of the base table's index) is what catch-up indexes.
	_, by = finals("index", "catchup", dir)
	complete("index catchup", by["index catchup"], 60)

	// Merged and caught up, the two generations' objects go.
	_, by = finals("trim", dir, "--reader-grace", "0s")
	if l := by["trim"]; l == nil || num(l, "rows_total") < 2 || num(l, "bytes_total") <= 0 {
		t.Errorf("trim: final line %v, want the generations' objects", l)
	} else {
		complete("trim", l, num(l, "rows_total"))
		if num(l, "bytes_done") != num(l, "bytes_total") {
			t.Errorf("trim: final line %v", l)
		}
	}

	// The six appended fragments (one index segment covers them all;
	// the merged one, covered by the catch-up's segment, stays alone),
	// the remap deferred for index remap's phase below.
	_, by = finals("compact", dir, "--target-rows", "1000", "--defer-remap=true")
	complete("compact", by["compact"], 60)

	_, by = finals("index", "remap", dir)
	if l := by["index remap"]; l == nil || num(l, "rows_done") < 60 {
		t.Errorf("index remap: final line %v, want at least id_idx's 60 entries", l)
	}

	phases, by := finals("cleanup", dir, "--retain-versions", "1", "--older-than", "1h", "--min-age", "1h")
	if strings.Join(phases, ",") != "cleanup read,cleanup" {
		t.Fatalf("cleanup phases %v, want reading the manifests then deleting", phases)
	}
	versions := num(by["cleanup read"], "rows_total")
	complete("cleanup read", by["cleanup read"], versions)
	if versions < 5 || num(by["cleanup read"], "bytes_done") != num(by["cleanup read"], "bytes_total") {
		t.Errorf("cleanup read: %v", by["cleanup read"])
	}
	deleted := num(by["cleanup"], "rows_total")
	complete("cleanup", by["cleanup"], deleted)
	if deleted < versions-1 || num(by["cleanup"], "bytes_done") != num(by["cleanup"], "bytes_total") {
		t.Errorf("cleanup: %v (read %v versions)", by["cleanup"], versions)
	}

	_, by = finals("verify", dir)
	if l := by["verify"]; l == nil || num(l, "rows_done") <= 0 || num(l, "bytes_done") <= 0 {
		t.Errorf("verify: final line %v", l)
	}
}
