package vector

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestReadWriteLanceDBFiles decodes the two files of every index kind
// LanceDB builds, encodes them again and decodes the copy: the row ids,
// codes, partitions, centroids and parameters survive, and the PQ codes
// are those of each row's residual under the stored codebook (which
// checks the per-partition transposition).
func TestReadWriteLanceDBFiles(t *testing.T) {
	lancedb.Require(t)
	const n = 600
	for _, k := range allKinds() {
		t.Run(k.String(), func(t *testing.T) {
			f := indexedTable(t, t.TempDir(), k, n, 300)
			dirs := segmentDirs(t, f.Dir)
			if len(dirs) != 1 {
				t.Fatalf("%d index directories, want 1", len(dirs))
			}
			x, err := ReadSubIndex(openLocal(t, dirs[0]+"/"+IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			if want := upperType(k.typ); x.Type != want || x.Distance != k.distance {
				t.Fatalf("index type %s %s, want %s %s", x.Type, x.Distance, want, k.distance)
			}
			s, err := ReadStorage(openLocal(t, dirs[0]+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			if s.Quantizer != x.Quantizer() || s.Partitions() != len(x.IVF.GetLengths()) {
				t.Fatalf("storage %s with %d partitions under a %s index of %d", s.Quantizer, s.Partitions(), x.Type, len(x.IVF.GetLengths()))
			}
			ids := slices.Clone(s.RowIDs)
			slices.Sort(ids)
			for i, a := range ids {
				if want := uint64(i/300)<<32 | uint64(i%300); a != want {
					t.Fatalf("row address %d is %x, want %x (every row once)", i, a, want)
				}
			}
			if x.IsHNSW() {
				for p, h := range x.HNSW {
					if got, want := h.LevelOffsets[1]-h.LevelOffsets[0], int(s.IVF.GetLengths()[p]); got != want {
						t.Fatalf("partition %d: level 0 has %d nodes, storage %d rows", p, got, want)
					}
				}
			}
			if s.Quantizer == QuantPQ && k.distance == "l2" {
				checkPQResiduals(t, x, s)
			}
			if s.Quantizer == QuantRQ {
				checkRQCodes(t, x, s, k.distance)
			}
			var sb, xb bytes.Buffer
			if _, err := WriteStorage(&sb, s); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteSubIndex(&xb, x); err != nil {
				t.Fatal(err)
			}
			s2, err := ReadStorage(bytes.NewReader(sb.Bytes()), int64(sb.Len()))
			if err != nil {
				t.Fatal(err)
			}
			x2, err := ReadSubIndex(bytes.NewReader(xb.Bytes()), int64(xb.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s2.RowIDs, s.RowIDs) || !proto.Equal(s2.IVF, s.IVF) || !slices.Equal(s2.Columns[0].Children[0].Values, s.Columns[0].Children[0].Values) {
				t.Fatal("storage differs after a round trip")
			}
			if !proto.Equal(x2.IVF, x.IVF) || x2.Type != x.Type || len(x2.HNSW) != len(x.HNSW) || x2.Columns[0].Len != x.Columns[0].Len {
				t.Fatal("sub-index differs after a round trip")
			}
			for i, c := range x.Columns {
				if !slices.Equal(c.Values, x2.Columns[i].Values) || !slices.Equal(c.Offsets, x2.Columns[i].Offsets) {
					t.Fatalf("sub-index column %d differs after a round trip", i)
				}
			}
		})
	}
}

func upperType(typ string) string {
	switch typ {
	case "ivf_flat":
		return TypeIVFFlat
	case "ivf_pq":
		return TypeIVFPQ
	case "ivf_rq":
		return TypeIVFRQ
	case "ivf_hnsw_sq":
		return TypeIVFHNSWSQ
	case "ivf_hnsw_pq":
		return TypeIVFHNSWPQ
	}
	return ""
}

// checkPQResiduals checks that each row's PQ codes are the nearest
// codebook entries of its residual to its partition's centroid.
func checkPQResiduals(t *testing.T, x *SubIndex, s *Storage) {
	t.Helper()
	cent, dim := x.Centroids()
	m, k, w := s.PQ.NumSubVectors, s.PQ.entries(), s.PQ.codeBytes()
	sub := dim / m
	codes := s.Columns[0].Children[0].Values
	bad := 0
	for p, off := range s.IVF.GetOffsets() {
		for i := int(off); i < int(off)+int(s.IVF.GetLengths()[p]); i++ {
			a := s.RowIDs[i]
			v := lancedb.VectorOf(int64(a>>32)*300 + int64(uint32(a)))
			for j := range m {
				best, bd := 0, math.Inf(1)
				for c := range k {
					var d float64
					for e := range sub {
						r := float64(v[j*sub+e]) - float64(cent[p*dim+j*sub+e])
						q := r - float64(s.PQ.Codebook[(j*k+c)*sub+e])
						d += q * q
					}
					if d < bd {
						best, bd = c, d
					}
				}
				if s.PQ.code(codes[i*w:(i+1)*w], j) != best {
					bad++
				}
			}
		}
	}
	if total := len(s.RowIDs) * m; bad > total/100 {
		t.Fatalf("%d of %d PQ codes are not their residual's nearest codebook entry", bad, total)
	}
}

// checkRQCodes checks that each row's RQ code (unpacked) is the sign bits
// of its rotated residual to its partition's centroid (the vector
// normalized first for cosine).
func checkRQCodes(t *testing.T, x *SubIndex, s *Storage, distance string) {
	t.Helper()
	cent, dim := x.Centroids()
	signs := s.RQ.rotationSigns()
	w := s.Columns[0].Type.Size
	codes := s.Columns[0].Children[0].Values
	for p, off := range s.IVF.GetOffsets() {
		for i := int(off); i < int(off)+int(s.IVF.GetLengths()[p]); i++ {
			a := s.RowIDs[i]
			v := lancedb.VectorOf(int64(a>>32)*300 + int64(uint32(a)))
			if distance == "cosine" {
				v = normalize(v)
			}
			r := make([]float32, dim)
			for e := range dim {
				r[e] = v[e] - cent[p*dim+e]
			}
			fastRotate(r, signs)
			if got, want := codes[i*w:(i+1)*w], rqSignBits(r); !bytes.Equal(got, want) {
				t.Fatalf("row %x: RQ code %x, its rotated residual's signs %x", a, got, want)
			}
		}
	}
}
