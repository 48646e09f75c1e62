package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestRebuiltGraphSearchesAsLanceDBs: an IVF_HNSW_SQ index of one
// partition over 30 000 clustered 128-d rows (256 centres), built by
// LanceDB and then rebuilt by compactord (its own HNSW graph over the
// same codes), recalls the exact 10 nearest rows through LanceDB's search
// within 0.01 of LanceDB's own graph at the small search lists users
// query with (ef 10, 20, 40), not only with a list as long as the table.
func TestRebuiltGraphSearchesAsLanceDBs(t *testing.T) {
	lancedb.Require(t)
	const n, dim = 30000, 128
	r := rand.New(rand.NewPCG(1, 2))
	centres := make([][]float32, 256)
	for c := range centres {
		centres[c] = make([]float32, dim)
		for k := range dim {
			centres[c][k] = float32(r.NormFloat64())
		}
	}
	vec := func(id int64) []float32 {
		rr := rand.New(rand.NewPCG(uint64(id), 7))
		c := centres[rr.IntN(len(centres))]
		v := make([]float32, dim)
		for k := range dim {
			v[k] = c[k] + float32(rr.NormFloat64()*0.3)
		}
		return v
	}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "vec": vec(i)})
		}
		return out
	}
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "vec", Type: fmt.Sprintf("vector[%d]", dim), Nullable: true}}
	theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	theirs.Dir = filepath.Join(theirs.URI, "t.lance")
	theirs.Run(t, lancedb.Create(schema, rows(0, n/3)), lancedb.Add(rows(n/3, 2*n/3)), lancedb.Add(rows(2*n/3, n)), lancedb.CreateVectorIndex("vec", "ivf_hnsw_sq", "vec_idx", map[string]any{"numPartitions": 1}))
	ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	ours.Dir = filepath.Join(ours.URI, "t.lance")
	copyDir(t, theirs.Dir, ours.Dir)
	if res, err := Rebuild(t.Context(), openHandle(t, ours.Dir), "vec_idx", RebuildOptions{}); err != nil || len(res.Removed) != 1 {
		t.Fatalf("rebuild: %+v, %v", res, err)
	}
	query := func(id int64) []float32 { return vec(id + 5000000) }
	exact := vecSearchesOf(t, theirs, "l2", 1, true, 0, query)
	for _, ef := range []int{10, 20, 40} {
		a := recall(vecSearchesOf(t, theirs, "l2", 1, false, ef, query), exact)
		b := recall(vecSearchesOf(t, ours, "l2", 1, false, ef, query), exact)
		t.Logf("ef %d: recall@10 through LanceDB's graph %.3f, through compactord's %.3f", ef, a, b)
		if b < a-0.01 {
			t.Errorf("ef %d: compactord's graph recalls %.3f, LanceDB's %.3f: more than 0.01 less", ef, b, a)
		}
	}
}
