package vector

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestEncodeMatchesLanceDB: EncodeBuild of the rows of an index LanceDB
// built, with its own centroids and quantizer (what a rebuild does),
// puts every row in the partition LanceDB chose, with the codes (FLAT:
// the stored vector, normalized for cosine) LanceDB wrote, for every
// kind but RQ (4-bit PQ included) and every distance type.
func TestEncodeMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, k := range allKinds() {
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
			if s.Quantizer == QuantRQ {
				sameRQFactors(t, ns, s)
			}
			var buf bytes.Buffer
			if _, err := WriteStorage(&buf, ns); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEncodeMatchesLanceDBDelta: on a table sized so that LanceDB's
// optimize() appends a delta segment with the index's centroids and
// quantizer (see the catch-up oracle tables), Encode of the appended rows
// puts every row in the partition of LanceDB's delta with its codes, for
// every kind but RQ and every distance type: dot PQ picks codebook
// entries by dot product there, and 4-bit PQ (whose search distances in
// LanceDB depend on the segments scanned, so only its codes can be
// compared) packs two codes a byte.
func TestEncodeMatchesLanceDBDelta(t *testing.T) {
	lancedb.Require(t)
	for _, k := range allKinds() {
		t.Run(k.String(), func(t *testing.T) {
			n, per := int64(12000), int64(3000)
			if strings.HasPrefix(k.typ, "ivf_hnsw") {
				// lance never joins the partitions of a one-partition
				// index, and would join HNSW partitions of fewer than
				// 262144 rows.
				k.opts["numPartitions"] = 1
				n, per = 2000, 500
			}
			f := indexedTable(t, t.TempDir(), k, n, per, lancedb.Add(lancedb.VectorRows(n, n+1000, "b")))
			base := segmentDirs(t, f.Dir)
			f.Run(t, lancedb.Open(), lancedb.Optimize(lancedb.OptimizeOpts{}))
			x, err := ReadSubIndex(openLocal(t, base[0]+"/"+IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ReadStorage(openLocal(t, base[0]+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			var delta *Storage
			for _, d := range segmentDirs(t, f.Dir) {
				if d == base[0] {
					continue
				}
				ds, err := ReadStorage(openLocal(t, d+"/"+StorageFile))
				if err != nil {
					t.Fatal(err)
				}
				if len(ds.RowIDs) == 1000 {
					delta = ds
				}
			}
			if delta == nil {
				t.Fatal("LanceDB's optimize() appended no delta segment of the 1000 new rows")
			}
			frag := delta.RowIDs[0] >> 32
			v := &Vectors{Dim: lancedb.VectorDim}
			for id := n; id < n+1000; id++ {
				v.Addrs = append(v.Addrs, frag<<32|uint64(id-n))
				v.Data = append(v.Data, lancedb.VectorOf(id)...)
			}
			ns, err := (&Segment{Index: x, Storage: s}).Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			want, got := rowPlaces(delta), rowPlaces(ns)
			bad := 0
			for a, w := range want {
				if g, ok := got[a]; !ok || g != w {
					if bad++; bad <= 3 {
						t.Errorf("row %x: %+v, LanceDB's delta %+v", a, g, w)
					}
				}
			}
			if bad > 0 || len(got) != len(want) {
				t.Fatalf("%d of %d rows differ (%d encoded)", bad, len(want), len(got))
			}
			if delta.Quantizer == QuantRQ {
				sameRQFactors(t, ns, delta)
			}
		})
	}
}

// sameRQFactors fails unless every row of got has want's RQ factors (add,
// scale, error; within 1e-5 of max(1, |factor|): lance sums in float32,
// and a dot add factor near 0 is a difference of terms near 1).
func sameRQFactors(t *testing.T, got, want *Storage) {
	t.Helper()
	at := map[uint64]int{}
	for i, a := range want.RowIDs {
		at[a] = i
	}
	for i, a := range got.RowIDs {
		j := at[a]
		for c := 1; c <= 3; c++ {
			g, w := f32(got.Columns[c].Values[4*i:]), f32(want.Columns[c].Values[4*j:])
			if math.Abs(float64(g-w)) > 1e-5*math.Max(1, math.Abs(float64(w))) {
				t.Fatalf("row %x: factor %d is %v, LanceDB's %v", a, c, g, w)
			}
		}
	}
}

// place is a storage row's partition and codes (FLAT: vector bytes).
type place struct {
	part int
	code string
}

func rowPlaces(s *Storage) map[uint64]place {
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
