package cleanup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceWriterInFlightNeedsTheVersionsAfterItsRead is why older_than
// has a floor (InFlightFloor). A LanceDB writer whose table handle read
// version r commits its compaction (optimize's Rewrite) after an upsert
// superseded a row of a fragment it rewrites. LanceDB classifies the
// commit only against the versions it still finds listed: with the
// upsert's version kept, the Rewrite is refused as a conflict and the key
// stays single; with that version cleaned up (older_than 0s,
// below the floor), the Rewrite lands over it and the superseded row comes
// back, the key live twice. The daemon refuses the second configuration.
func TestLanceWriterInFlightNeedsTheVersionsAfterItsRead(t *testing.T) {
	lancedb.Require(t)
	for _, tc := range []struct {
		name      string
		olderThan time.Duration
		wantTwice bool
	}{
		{"older_than at the floor", InFlightFloor, false},
		{"older_than 0s", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rows := func(lo, hi int64, tag string) []lancedb.Row {
				var out []lancedb.Row
				for i := lo; i < hi; i++ {
					out = append(out, lancedb.Row{"id": i, "s": tag})
				}
				return out
			}
			schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "s", Type: "utf8"}}
			lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
				lancedb.Create(schema, rows(0, 100, "a")), lancedb.Add(rows(100, 200, "a")), lancedb.Add(rows(200, 300, "a"))}})

			// The stale writer: reads the table, then waits while the
			// test commits and cleans up, then runs optimize().
			ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
			done := make(chan programResult, 1)
			go func() {
				res, err := lancedb.Run(t, lancedb.Program{URI: dir, StaleHandles: true, ContinueOnError: true, Steps: []lancedb.Step{
					lancedb.Open(), lancedb.Signal(ready), lancedb.WaitFor(goOn, 2*time.Minute), lancedb.Optimize(lancedb.OptimizeOpts{})}})
				done <- programResult{res, err}
			}()
			waitFile(t, ready, done)

			// An upsert of key 5 (deleting its row in fragment 0), then an
			// append, so the upsert's version is not the latest.
			lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
				lancedb.MergeInsert("id", rows(5, 6, "b")), lancedb.Add(rows(1000, 1001, "c"))}})
			b := open(t, filepath.Join(dir, "t.lance"))
			cfg := DefaultConfig()
			cfg.RetainVersions, cfg.OlderThan = 1, tc.olderThan
			res, err := Run(context.Background(), b, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("cleanup deleted %d versions", res.DeletedVersions)
			if err := os.WriteFile(goOn, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			o := <-done
			if o.res == nil {
				t.Fatal(o.err)
			}
			// With the upsert's version there, LanceDB refuses the Rewrite
			// (the upsert touched a fragment it rewrites); without it, the
			// Rewrite lands.
			optErr := o.res.Err(3)
			if refused := strings.Contains(optErr, "Retryable commit conflict"); refused == tc.wantTwice || (optErr != "" && !refused) {
				t.Fatalf("the stale writer's optimize after a cleanup of %d versions: %q", res.DeletedVersions, firstLine(optErr))
			}

			got := lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 5"})}})
			five, err := got.Rows(0)
			if err != nil {
				t.Fatal(err)
			}
			if twice := len(five) == 2; twice != tc.wantTwice || len(five) == 0 || len(five) > 2 {
				t.Fatalf("key 5 is live %d times after the stale writer's optimize (cleanup deleted %d versions): %v", len(five), res.DeletedVersions, five)
			}
			if !tc.wantTwice && five[0]["s"] != "b" {
				t.Fatalf("key 5 is %v, want the upsert's row", five[0])
			}
		})
	}
}

type programResult struct {
	res *lancedb.Results
	err error
}

// waitFile polls for the file at path; the program ending first (done)
// is a failure.
func waitFile(t *testing.T, path string, done <-chan programResult) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case o := <-done:
			t.Fatalf("the LanceDB program ended before signalling %s: %v %v", path, o.err, o.res)
		case <-deadline:
			t.Fatalf("no %s after 2 minutes", path)
		case <-tick.C:
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
