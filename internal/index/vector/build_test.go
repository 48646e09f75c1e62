package vector

import (
	"bytes"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestEncodeMatchesLanceDB: encoding the rows of an index LanceDB built
// with its own centroids and quantizer (what catch-up does with new rows)
// puts every row in the partition LanceDB chose, with the codes (FLAT:
// the stored vector, normalized for cosine) LanceDB wrote, for every
// kind but RQ and every distance type.
func TestEncodeMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, k := range allKinds() {
		if k.typ == "ivf_rq" {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			f := indexedTable(t, t.TempDir(), k, 600, 300)
			dir := segmentDirs(t, f.Dir)[0]
			x, err := ReadSubIndex(openLocal(t, dir+"/"+IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ReadStorage(openLocal(t, dir+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			seg := &Segment{Index: x, Storage: s}
			v := &Vectors{Dim: lancedb.VectorDim}
			for id := int64(0); id < 600; id++ {
				v.Addrs = append(v.Addrs, uint64(id/300)<<32|uint64(id%300))
				v.Data = append(v.Data, lancedb.VectorOf(id)...)
			}
			ns, err := seg.EncodeBuild(v)
			if err != nil {
				t.Fatal(err)
			}
			type place struct {
				part int
				code string
			}
			places := func(s *Storage) map[uint64]place {
				out := map[uint64]place{}
				c := s.Columns[0]
				w := c.Type.Size * max(1, c.Children[0].Type.ByteWidth())
				for p, off := range s.IVF.GetOffsets() {
					for i := int(off); i < int(off)+int(s.IVF.GetLengths()[p]); i++ {
						out[s.RowIDs[i]] = place{p, string(c.Children[0].Values[i*w : (i+1)*w])}
					}
				}
				return out
			}
			want, got := places(s), places(ns)
			bad := 0
			for a, w := range want {
				if g, ok := got[a]; !ok || g.part != w.part || g.code != w.code {
					if bad++; bad <= 3 {
						t.Errorf("row %x: partition %d codes %x, LanceDB's partition %d codes %x", a, g.part, g.code, w.part, w.code)
					}
				}
			}
			if bad > 0 || len(got) != len(want) {
				t.Fatalf("%d of %d rows differ (%d encoded)", bad, len(want), len(got))
			}
			var buf bytes.Buffer
			if _, err := WriteStorage(&buf, ns); err != nil {
				t.Fatal(err)
			}
		})
	}
}
