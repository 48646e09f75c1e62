package vector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestTypedKernelsMatchLanceDB: the float16 and float64 l2 and dot
// kernels give, bit for bit, the distances LanceDB's exhaustive search
// reports between a query and every row of a table of 37-d vectors (two
// float16 chunks of 16 and a tail of 5; four float64 chunks of 8 and a
// tail of 5), so an argmin over centroids or codebook entries picks
// LanceDB's even on near ties.
func TestTypedKernelsMatchLanceDB(t *testing.T) {
	lancedb.Require(t)
	const dim, n = 37, 300
	r := rand.New(rand.NewPCG(1, 2))
	for _, item := range []string{"float16", "float64"} {
		t.Run(item, func(t *testing.T) {
			schema := append(append([]lancedb.Column{}, lancedb.BasicSchema...), lancedb.Column{Name: "vec", Type: fmt.Sprintf("fixed_size_list<%s,%d>", item, dim), Nullable: true})
			var rows []lancedb.Row
			for id := range int64(n) {
				row := lancedb.BasicRow(id, "v")
				v := make([]float32, dim)
				for k := range v {
					v[k] = float32(r.Float64()*4 - 2)
				}
				row["vec"] = v
				rows = append(rows, row)
			}
			// Multiples of 1/64 are exact in every float type: the query
			// LanceDB casts to the column's type is this one.
			query := make([]float32, dim)
			for k := range query {
				query[k] = float32(r.IntN(129)-64) / 64
			}
			dir := t.TempDir()
			f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
			f.Run(t, lancedb.Create(schema, rows))
			v := collect(t, f.Dir, 0)
			for _, d := range []string{"l2", "dot"} {
				out := f.Run(t, lancedb.Open(), lancedb.VectorSearch(lancedb.VectorQuery{Vector: query, Column: "vec", Limit: n,
					BypassIndex: true, DistanceType: d, Columns: []string{"id"}}))
				hits, err := out.Rows(1)
				if err != nil || len(hits) != n {
					t.Fatalf("%s search: %d rows, %v", d, len(hits), err)
				}
				bad := 0
				for _, h := range hits {
					id, _ := h.Int("id")
					want, _ := h.Float("_distance")
					var got float32
					if item == "float16" {
						x := v.Data[int(id)*dim : (int(id)+1)*dim]
						if got = l2F16(query, x); d == "dot" {
							got = dotDistF16(query, x)
						}
					} else {
						q64 := make([]float64, dim)
						for k, e := range query {
							q64[k] = float64(e)
						}
						x := v.Data64[int(id)*dim : (int(id)+1)*dim]
						if got = l2F64(q64, x); d == "dot" {
							got = dotDistF64(q64, x)
						}
					}
					if float64(got) != want {
						if bad++; bad <= 3 {
							t.Errorf("%s row %d: %v (bits %x), LanceDB %v (bits %x)", d, id, got, math.Float32bits(got), want, math.Float32bits(float32(want)))
						}
					}
				}
				if bad > 0 {
					t.Fatalf("%s: %d of %d distances differ from LanceDB's", d, bad, n)
				}
			}
		})
	}
}
