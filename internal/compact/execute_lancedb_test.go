package compact

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// fragmentRows is the physical rows of each fragment of the table at dir,
// in manifest order.
func fragmentRows(t *testing.T, dir string) []uint64 {
	t.Helper()
	h := openHandle(t, dir)
	head, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, f := range head.Manifest.GetFragments() {
		out = append(out, f.GetPhysicalRows())
	}
	return out
}

// TestExecuteSizesOutputsAsLanceDB: the same table compacted by LanceDB's
// optimize() and by compactord with the default options leaves the same
// fragments, of the same sizes. LanceDB spreads a group's rows evenly
// over as many fragments as the target (1 Mi) fits in them, so
//
//   - 24 fragments of 128 Ki rows, 10 % deleted: groups of 9 and 15
//     fragments (1 061 683 and 1 769 472 live rows), re-encoded, are one
//     fragment each;
//   - 9 fragments of 256 Ki rows, 10 % deleted: one group of 2 123 366
//     live rows is two fragments of 1 061 683;
//   - 11 fragments of 100 000 rows, none deleted: one group of 1 100 000
//     rows, copied page by page;
//
// not 1 Mi-row pieces.
func TestExecuteSizesOutputsAsLanceDB(t *testing.T) {
	in := lancedb.Require(t)
	db := t.TempDir()
	for _, c := range []struct {
		name           string
		rows, fragRows int
		del            int
		want           int // fragments LanceDB leaves, checked too
	}{
		{"deletes", 24 * 131072, 131072, 10, 2},
		{"even", 9 * 262144, 262144, 10, 2},
		{"small", 1100000, 100000, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var built struct{ Count int64 }
			benchNode(t, in, &built, "build", db, c.name, strconv.Itoa(c.rows), strconv.Itoa(c.fragRows), strconv.Itoa(c.del))
			src := filepath.Join(db, c.name+".lance")
			lanceName, oursDir := c.name+"-l", filepath.Join(db, c.name+"-c.lance")
			cpTree(t, src, filepath.Join(db, lanceName+".lance"))
			cpTree(t, src, oursDir)
			var opt struct{ Count int64 }
			benchNode(t, in, &opt, "optimize", db, lanceName)
			if opt.Count != built.Count {
				t.Fatalf("LanceDB's optimize left %d rows of %d", opt.Count, built.Count)
			}
			res, err := Run(t.Context(), openHandle(t, oursDir), DefaultOptions(), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil {
				t.Fatal("compactord compacted nothing")
			}
			theirs, ours := fragmentRows(t, filepath.Join(db, lanceName+".lance")), fragmentRows(t, oursDir)
			if len(theirs) != c.want {
				t.Errorf("LanceDB left fragments of %v rows, the test expects %d fragments", theirs, c.want)
			}
			if !slices.Equal(theirs, ours) {
				t.Fatalf("fragments of %v rows after LanceDB's optimize, of %v after compactord's", theirs, ours)
			}
			var a, b struct {
				Count       int64
				IDSum, Hash string
			}
			benchNode(t, in, &a, "digest", db, lanceName)
			benchNode(t, in, &b, "digest", db, c.name+"-c")
			if a != b {
				t.Fatalf("LanceDB reads its compaction as %+v, compactord's as %+v", a, b)
			}
			t.Logf("both sides: fragments of %v rows", ours)
		})
	}
}
