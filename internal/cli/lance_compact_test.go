package cli

import (
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testutil/lancedb"
)

// TestLanceCompactCLI: --dry-run prints the groups and changes nothing;
// compact lands one Rewrite with the fully deleted fragment recorded as
// removed, LanceDB reads the same rows, and a second run finds nothing.
func TestLanceCompactCLI(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Deletes(t, "")
	files := snapshot(t, f.Dir)
	code, out, stderr := runCLI(t, "compact", f.Dir, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	plan := jsonLines(t, out)
	if len(plan) != 1 || plan[0]["dry_run"] != true || len(plan[0]["groups"].([]any)) != 1 {
		t.Fatalf("dry run: %s", out)
	}
	if got := snapshot(t, f.Dir); strings.Join(got, "\n") != strings.Join(files, "\n") {
		t.Fatal("the dry run changed the table")
	}
	code, out, stderr = runCLI(t, "compact", f.Dir)
	if code != 0 {
		t.Fatalf("compact: exit %d: %s", code, stderr)
	}
	res := jsonLines(t, out)
	if len(res) != 1 || res[0]["groups"] != float64(1) || res[0]["version"].(float64) <= float64(f.Version) {
		t.Fatalf("compact: %s", out)
	}
	got := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := got.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	byID, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := lancedb.DiffByID(byID, f.Want); d != "" {
		t.Fatalf("LanceDB after compact: %s", d)
	}
	code, out, stderr = runCLI(t, "compact", f.Dir)
	if code != 0 || !strings.Contains(out, `"groups":0`) {
		t.Fatalf("second compact: exit %d: %s %s", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "compact", f.Dir, "--defer-remap=false"); code == 0 || !strings.Contains(stderr, "inline") {
		t.Fatalf("inline remap: exit %d: %s", code, stderr)
	}
}
