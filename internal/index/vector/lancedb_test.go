package vector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// kind is one vector index configuration LanceDB builds.
type kind struct {
	typ, distance string
	opts          map[string]any
	// variant names a configuration beyond the type (pq4: 4-bit PQ).
	variant string
}

func (k kind) String() string { return k.typ + k.variant + "_" + k.distance }

// allKinds are every index type LanceDB 0.39's Node API builds, with each
// distance type, sized for the 16-d test vectors.
func allKinds() []kind {
	base := []kind{
		{typ: "ivf_flat", opts: map[string]any{"numPartitions": 4}},
		{typ: "ivf_pq", opts: map[string]any{"numPartitions": 4, "numSubVectors": 4}},
		{typ: "ivf_pq", variant: "4bit", opts: map[string]any{"numPartitions": 4, "numSubVectors": 4, "numBits": 4}},
		{typ: "ivf_rq", opts: map[string]any{"numPartitions": 4}},
		{typ: "ivf_hnsw_sq", opts: map[string]any{"numPartitions": 2}},
		{typ: "ivf_hnsw_pq", opts: map[string]any{"numPartitions": 2, "numSubVectors": 4}},
	}
	var out []kind
	for _, b := range base {
		for _, d := range []string{"l2", "cosine", "dot"} {
			o := map[string]any{"distanceType": d}
			for k, v := range b.opts {
				o[k] = v
			}
			out = append(out, kind{typ: b.typ, distance: d, opts: o, variant: b.variant})
		}
	}
	return out
}

// indexedTable has LanceDB build table t in dir: ids 0..n-1 in fragments
// of per rows with lancedb.VectorOf vectors, a vector index vector_idx of
// kind k, then steps.
func indexedTable(t *testing.T, dir string, k kind, n, per int64, steps ...lancedb.Step) *lancedb.Fixture {
	t.Helper()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	prog := []lancedb.Step{lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, per, "a"))}
	for lo := per; lo < n; lo += per {
		prog = append(prog, lancedb.Add(lancedb.VectorRows(lo, min(n, lo+per), "a")))
	}
	prog = append(prog, lancedb.CreateVectorIndex("vec", k.typ, "vector_idx", k.opts))
	prog = append(prog, steps...)
	f.Results = f.Run(t, prog...)
	return f
}

// segmentDirs are the index directories of a table directory.
func segmentDirs(t *testing.T, tableDir string) []string {
	t.Helper()
	ds, err := filepath.Glob(filepath.Join(tableDir, "_indices", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func openLocal(t testing.TB, path string) (*os.File, int64) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fh, st.Size()
}
