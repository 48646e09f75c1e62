package vector

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestSQGraphDistancesAreLanceDBs: the distance compactord builds an
// IVF_HNSW_SQ graph with (partitionVectors over LanceDB's own storage) is,
// bit for bit, the _distance LanceDB stored for every neighbour of every
// node of the graphs it built itself, for l2 and cosine.
func TestSQGraphDistancesAreLanceDBs(t *testing.T) {
	lancedb.Require(t)
	for _, k := range allKinds() {
		if k.typ != "ivf_hnsw_sq" || k.distance == "dot" {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			f := indexedTable(t, t.TempDir(), k, 3000, 3000)
			d := segmentDirs(t, f.Dir)[0]
			x, err := ReadSubIndex(openLocal(t, d+"/"+IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ReadStorage(openLocal(t, d+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			cent, dim := x.Centroids()
			checked := 0
			for p := range s.Partitions() {
				v, err := partitionVectors(s, cent[p*dim:(p+1)*dim], int(s.IVF.GetOffsets()[p]), int(s.IVF.GetLengths()[p]))
				if err != nil {
					t.Fatal(err)
				}
				if v.codes == nil {
					t.Fatalf("partition %d: the graph nodes are not the SQ codes", p)
				}
				off, n := int(x.IVF.GetOffsets()[p]), int(x.IVF.GetLengths()[p])
				for r := off; r < off+n; r++ {
					node := binary.LittleEndian.Uint32(x.Columns[0].Values[4*r:])
					ds := listF32(x.Columns[2], r)
					for i, nb := range listU32(x.Columns[1], r) {
						if got := v.d(node, nb); math.Float32bits(got) != math.Float32bits(ds[i]) {
							t.Fatalf("partition %d node %d neighbour %d: distance %v, LanceDB stored %v", p, node, nb, got, ds[i])
						}
						checked++
					}
				}
			}
			if checked < 1000 {
				t.Fatalf("only %d neighbour distances checked", checked)
			}
			t.Logf("%d neighbour distances equal LanceDB's", checked)
		})
	}
}
