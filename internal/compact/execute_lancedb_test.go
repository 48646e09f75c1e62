package compact

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/verify"
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

// TestExecuteWideVectorsWithLanceDB: a table of id and a 768-d float32
// vector (LanceDB stores the vectors full-zip), four fragments with a row
// in ten deleted, compacted by compactord reads in LanceDB as the same
// rows, vectors included, as the copy LanceDB's optimize() compacted, and
// passes a deep verify. Without nulls the vector pages are the rows'
// bytes back to back (3 072 bytes a row, no control word: read and
// written without a decode) in pages of about WidePageBytes; with null
// vectors every row carries a one-byte control word, and takes the
// general full-zip decode and encode.
func TestExecuteWideVectorsWithLanceDB(t *testing.T) {
	in := lancedb.Require(t)
	db := t.TempDir()
	for _, c := range []struct {
		shape  string
		stride uint64 // bytes of a row in the output's vector pages
	}{
		{"wide", 3072},
		{"wide,nulls", 3073},
	} {
		t.Run(c.shape, func(t *testing.T) {
			name := "t" + strconv.Itoa(len(c.shape))
			var built struct{ Count int64 }
			benchNode(t, in, &built, "build", db, name, "6000", "1500", "10", c.shape)
			src := filepath.Join(db, name+".lance")
			lanceName, oursName := name+"-l", name+"-c"
			oursDir := filepath.Join(db, oursName+".lance")
			cpTree(t, src, filepath.Join(db, lanceName+".lance"))
			cpTree(t, src, oursDir)
			var opt struct{ Count int64 }
			benchNode(t, in, &opt, "optimize", db, lanceName)
			if opt.Count != built.Count || built.Count != 5400 {
				t.Fatalf("LanceDB built %d rows and its optimize left %d; want 5400", built.Count, opt.Count)
			}
			res, err := Run(t.Context(), openHandle(t, oursDir), DefaultOptions(), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || res.Stats.RowsRewritten != 5400 || res.Stats.FragmentsOut != 1 {
				t.Fatalf("compaction: committed %v, stats %+v; want 5400 rows rewritten into one fragment", res.Commit != nil, res.Stats)
			}
			var a, b struct {
				Count       int64
				IDSum, Hash string
			}
			benchNode(t, in, &a, "digest", db, lanceName)
			benchNode(t, in, &b, "digest", db, oursName)
			if a != b || a.Count != 5400 {
				t.Fatalf("LanceDB reads its compaction as %+v, compactord's as %+v", a, b)
			}
			rep, err := verify.Run(t.Context(), openHandle(t, oursDir).Bucket, verify.Options{Deep: true})
			if err != nil || !rep.OK() {
				t.Fatalf("deep verify: %v %+v", err, rep)
			}
			head, _, err := meta.ReadLatest(t.Context(), openHandle(t, oursDir).Bucket)
			if err != nil {
				t.Fatal(err)
			}
			frags := head.Manifest.GetFragments()
			if len(frags) != 1 {
				t.Fatalf("%d fragments after compaction", len(frags))
			}
			fh, err := os.Open(filepath.Join(oursDir, "data", frags[0].GetFiles()[0].GetPath()))
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			st, err := fh.Stat()
			if err != nil {
				t.Fatal(err)
			}
			f, err := file.Open(fh, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			vec := f.Schema.Field("vec")
			pages := f.Columns[vec.Column].GetPages()
			// 5 400 rows of 3 KiB: pages of about 2 MiB, not 64 of 256 KiB.
			if len(pages) > 12 {
				t.Errorf("%d vector pages; want at most 12 (WidePageBytes)", len(pages))
			}
			for i, p := range pages {
				if len(p.GetBufferSizes()) != 1 || p.GetBufferSizes()[0] != p.GetLength()*c.stride {
					t.Errorf("vector page %d: %d rows in buffers of %v bytes; want one buffer of %d bytes a row", i, p.GetLength(), p.GetBufferSizes(), c.stride)
				}
			}
		})
	}
}
