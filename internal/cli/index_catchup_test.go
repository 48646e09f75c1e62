package cli

import (
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceIndexCatchupCreditCLI: after merge, catch-up and an inline
// compaction (whose Rewrite remaps id_idx and carries its catch-up
// position forward), index catchup has nothing to index and nothing to
// record; trim --reader-grace 0s then deletes every generation, verify
// --deep finds every invariant holding, and LanceDB reads the same rows.
// (A record that lags behind a covering index, which catch-up raises in a
// record-only commit, is index.TestCatchUpCredit's.)
func TestLanceIndexCatchupCreditCLI(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 2, 3)
	if r := run(t, "", "merge", f.Dir); r.code != 0 || strings.Count(r.stdout, "\"generations\":[1,2,3]") != 2 {
		t.Fatalf("merge: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if m := runDoc(t, "index", "catchup", f.Dir); m["committed"] != true {
		t.Fatalf("catch-up of the merged fragments: %v", m)
	}
	runDoc(t, "compact", f.Dir, "--defer-remap=false", "--target-rows", "1000")
	if r := run(t, "", "trim", f.Dir, "--reader-grace", "0s", "--dry-run"); r.code != 0 || strings.Contains(r.stdout, `"reason":"index_lag"`) {
		t.Fatalf("trim after the inline compaction: exit %d, want no generation kept for index_lag: %s %s", r.code, r.stdout, r.stderr)
	}
	if m := runDoc(t, "index", "catchup", f.Dir); m["committed"] != false {
		t.Fatalf("catch-up after the compaction: %v (want nothing committed)", m)
	}
	tr := runDoc(t, "trim", f.Dir, "--reader-grace", "0s")
	if g, _ := tr["deleted_generations"].(float64); int(g) != 6 {
		t.Fatalf("trim: %v (want the 6 generations of 2 shards deleted)", tr)
	}
	if r := run(t, "", "verify", f.Dir, "--deep"); r.code != 0 {
		t.Fatalf("verify --deep: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	rows, err := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)})).Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := lancedb.DiffByID(got, f.Want); d != "" {
		t.Fatalf("LanceDB after trim: %s", d)
	}
}
