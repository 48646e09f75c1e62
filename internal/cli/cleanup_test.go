package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	r := runAt(t, clock.Real(), "", args...)
	return r.code, r.stdout, r.stderr
}

// runCLIYearOn is runCLI a year from now.
func runCLIYearOn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	r := runAt(t, yearOn(), "", args...)
	return r.code, r.stdout, r.stderr
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func TestLanceCleanupCLI(t *testing.T) {
	dir := lancedb.CorpusDir(t, "tagged")
	n := countFiles(t, dir)
	code, out, stderr := runCLIYearOn(t, "cleanup", dir, "--dry-run", "--retain-versions", "1", "--older-than", "0s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan struct {
		Versions []struct {
			Version uint64
			Delete  bool
			Reason  string
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Versions) != 3 {
		t.Fatalf("plan %s: %v", out, err)
	}
	for _, v := range plan.Versions {
		if v.Reason == "" || (v.Version <= 2 && v.Reason != "tagged") {
			t.Errorf("version %d: %s", v.Version, v.Reason)
		}
	}
	if countFiles(t, dir) != n {
		t.Fatal("dry run changed the table")
	}
	code, out, stderr = runCLIYearOn(t, "cleanup", dir, "--retain-versions", "1", "--older-than", "0s")
	if code != 0 || !strings.Contains(out, `"format":"lance"`) {
		t.Fatalf("exit %d: %s %s", code, out, stderr)
	}
	// A corrupt manifest: one line, non-zero, nothing deleted.
	dir = lancedb.CorpusDir(t, "plain")
	p := filepath.Join(dir, "_versions", "18446744073709551614.manifest")
	data, _ := os.ReadFile(p)
	data[len(data)/2] ^= 0xff
	data[len(data)/2+1] ^= 0xff
	_ = os.WriteFile(p, data, 0o644)
	n = countFiles(t, dir)
	code, _, stderr = runCLIYearOn(t, "cleanup", dir, "--retain-versions", "1", "--older-than", "1h", "--min-age", "1h")
	if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || countFiles(t, dir) != n {
		t.Fatalf("corrupt manifest: exit %d, stderr %q, files %d→%d", code, stderr, n, countFiles(t, dir))
	}
}

func TestLanceTrimCLI(t *testing.T) {
	dir := lancedb.CorpusDir(t, "memwal_4")
	code, out, stderr := runCLI(t, "trim", dir, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Plan struct {
			Generations []struct {
				Delete bool
				Reason string
			}
		}
		DryRun bool `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.DryRun || len(res.Plan.Generations) == 0 {
		t.Fatalf("%s: %v", out, err)
	}
	for _, g := range res.Plan.Generations {
		if g.Delete || g.Reason != "not_merged" {
			t.Errorf("generation %+v", g)
		}
	}
}

// TestCleanupMinAgeBelowTheFloorWarns: a --min-age or --older-than below
// the floor the daemon enforces runs (the operator's choice) with one
// warning line that names the hazard; at the floor there is none.
func TestCleanupMinAgeBelowTheFloorWarns(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10")
	r := run(t, "", "cleanup", dir, "--min-age", "0s")
	if r.code != 0 || !strings.Contains(r.stderr, "--min-age is below the floor") || !strings.Contains(r.stderr, "in flight") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("--min-age 0s: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, "", "cleanup", dir, "--min-age", "1h"); r.code != 0 || r.stderr != "" {
		t.Errorf("--min-age 1h: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, "", "cleanup", dir, "--older-than", "59m")
	if r.code != 0 || !strings.Contains(r.stderr, "--older-than is below the floor") || !strings.Contains(r.stderr, "conflicts") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("--older-than 59m: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, "", "cleanup", dir, "--older-than", "1h", "--min-age", "1h"); r.code != 0 || r.stderr != "" {
		t.Errorf("--older-than 1h: exit %d, stderr %q", r.code, r.stderr)
	}
}
