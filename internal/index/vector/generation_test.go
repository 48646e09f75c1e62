package vector

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomVectors(n, dim int, seed uint64) *Vectors {
	r := rand.New(rand.NewPCG(seed, 1))
	v := &Vectors{Dim: dim}
	for i := range n {
		v.Addrs = append(v.Addrs, uint64(2*i))
		for range dim {
			v.Data = append(v.Data, float32(r.Float64()*4-1))
		}
	}
	return v
}

// roundTrip writes a copy's two files and reads them back.
func roundTrip(t *testing.T, x *SubIndex, s *Storage) (*SubIndex, *Storage) {
	t.Helper()
	var xb, sb bytes.Buffer
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteStorage(&sb, s); err != nil {
		t.Fatal(err)
	}
	rx, err := ReadSubIndex(bytes.NewReader(xb.Bytes()), int64(xb.Len()))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ReadStorage(bytes.NewReader(sb.Bytes()), int64(sb.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return rx, rs
}

// TestBuildGenerationCopy: a generation copy reads back as a
// one-partition IVF_HNSW_SQ segment under a zero centroid: SQ bounds the
// vectors' minimum and maximum, every code the vector's value over them,
// the rows' ids in order, and an HNSW graph of every row (level 0) whose
// exhaustive walk from the entry point reaches each of them.
func TestBuildGenerationCopy(t *testing.T) {
	for _, dist := range GenerationDistances {
		t.Run(dist, func(t *testing.T) {
			v := randomVectors(300, 8, 7)
			x, s, err := BuildGenerationCopy(v, dist)
			if err != nil {
				t.Fatal(err)
			}
			x, s = roundTrip(t, x, s)
			if x.Type != TypeIVFHNSWSQ || x.Distance != dist || s.Quantizer != QuantSQ || s.Distance != dist {
				t.Fatalf("copy is %s %s over %s %s storage", x.Type, x.Distance, s.Quantizer, s.Distance)
			}
			cent, dim := x.Centroids()
			if dim != 8 || len(cent) != 8 || slices.ContainsFunc(cent, func(c float32) bool { return c != 0 }) {
				t.Fatalf("centroids %v of dim %d, want one zero centroid", cent, dim)
			}
			lo, hi := slices.Min(v.Data), slices.Max(v.Data)
			if s.SQ.Bounds.Start != float64(lo) || s.SQ.Bounds.End != float64(hi) || s.SQ.NumBits != 8 || s.SQ.Dim != 8 {
				t.Fatalf("SQ %+v, want bounds [%v, %v]", s.SQ, lo, hi)
			}
			if !slices.Equal(s.RowIDs, v.Addrs) {
				t.Fatalf("row ids %v, want %v", s.RowIDs[:5], v.Addrs[:5])
			}
			codes := s.Columns[0].Children[0].Values
			for i, f := range v.Data {
				want := math.Round(float64(f-lo) / float64(hi-lo) * 255)
				if d := math.Abs(float64(codes[i]) - want); d > 1 {
					t.Fatalf("value %d (%v) has code %d, want about %v", i, f, codes[i], want)
				}
			}
			h := x.HNSW[0]
			if h.Params != (HNSWParams{MaxLevel: 7, M: 16, EfConstruction: 100, PrefetchDistance: 2}) {
				t.Fatalf("HNSW params %+v", h.Params)
			}
			if n := h.LevelOffsets[1] - h.LevelOffsets[0]; n != len(v.Addrs) {
				t.Fatalf("level 0 holds %d nodes, want %d", n, len(v.Addrs))
			}
			seen := map[uint32]bool{h.EntryPoint: true}
			queue := []uint32{h.EntryPoint}
			for len(queue) > 0 {
				n := queue[0]
				queue = queue[1:]
				nb := listU32(x.Columns[1], int(n))
				if len(nb) == 0 || len(nb) > 2*GenerationM {
					t.Fatalf("node %d has %d neighbours on level 0", n, len(nb))
				}
				for _, m := range nb {
					if !seen[m] {
						seen[m] = true
						queue = append(queue, m)
					}
				}
			}
			if len(seen) != len(v.Addrs) {
				t.Fatalf("level 0 reaches %d of %d nodes from the entry point", len(seen), len(v.Addrs))
			}
		})
	}
}

// TestBuildGenerationCopyRefuses: what LanceDB's flush builds no copy for,
// or no copy could hold, is an error, never a file.
func TestBuildGenerationCopyRefuses(t *testing.T) {
	v := randomVectors(10, 4, 1)
	if _, _, err := BuildGenerationCopy(v, "hamming"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("hamming: %v, want ErrUnsupported", err)
	}
	bad := randomVectors(10, 4, 1)
	bad.Data[5] = float32(math.NaN())
	if _, _, err := BuildGenerationCopy(bad, "l2"); err == nil {
		t.Error("a NaN value was encoded")
	}
	short := randomVectors(10, 4, 1)
	short.Data = short.Data[:39]
	if _, _, err := BuildGenerationCopy(short, "l2"); err == nil {
		t.Error("vectors of a ragged buffer were encoded")
	}
}
