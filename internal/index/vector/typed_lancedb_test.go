package vector

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// typedKind is an index LanceDB 0.39 builds over vectors of another item
// type than float32.
type typedKind struct {
	item, typ, distance string
	// variant names a configuration beyond the type (4bit: 4-bit PQ).
	variant string
	opts    map[string]any
	rows    func(lo, hi int64, tag string) []lancedb.Row
}

func (k typedKind) String() string { return k.item + "_" + k.typ + k.variant + "_" + k.distance }

// typedKinds are the typed indexes compactord encodes.
func typedKinds() []typedKind {
	out := []typedKind{
		{item: "uint8", typ: "ivf_flat", distance: "hamming", opts: map[string]any{"numPartitions": 4}, rows: lancedb.BinaryVectorRows},
	}
	for _, item := range []string{"float16", "float64"} {
		for _, typ := range []string{"ivf_flat", "ivf_pq", "ivf_rq", "ivf_hnsw_sq", "ivf_hnsw_pq"} {
			for _, d := range []string{"l2", "cosine", "dot"} {
				opts := map[string]any{"numPartitions": 4}
				if strings.HasSuffix(typ, "pq") {
					opts["numSubVectors"] = 4
				}
				out = append(out, typedKind{item: item, typ: typ, distance: d, opts: opts, rows: lancedb.VectorRows})
			}
		}
		out = append(out, typedKind{item: item, typ: "ivf_pq", variant: "4bit", distance: "l2",
			opts: map[string]any{"numPartitions": 4, "numSubVectors": 4, "numBits": 4}, rows: lancedb.VectorRows})
	}
	return out
}

// collect reads the vectors of fragments frags of the table in dir at
// its latest version.
func collect(t *testing.T, dir string, frags ...uint32) *Vectors {
	t.Helper()
	ctx := t.Context()
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mf, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range mf.Manifest.GetFields() {
		if f.GetName() == "vec" {
			v, err := CollectVectors(ctx, b, mf.Manifest.GetVersion(), f, roaring.BitmapOf(frags...))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no vec column")
	return nil
}

// samePlaces fails unless every row of want is in got, in the same
// partition with the same code.
func samePlaces(t *testing.T, got, want *Storage, what string) {
	t.Helper()
	w, g := rowPlaces(want), rowPlaces(got)
	bad := 0
	for a, p := range w {
		if q, ok := g[a]; !ok || q != p {
			if bad++; bad <= 3 {
				t.Errorf("row %x: partition %d code %x, %s partition %d code %x", a, q.part, q.code, what, p.part, p.code)
			}
		}
	}
	if bad > 0 || len(g) != len(w) {
		t.Fatalf("%d of %d rows differ from %s (%d encoded)", bad, len(w), what, len(g))
	}
}

// TestEncodeTypedMatchesLanceDB: for each index LanceDB builds over other
// vectors than float32 (binary vectors under hamming; float16 and float64
// vectors, 4-bit PQ and IVF_RQ included, RQ factors within 1e-5), EncodeBuild of the
// indexed rows with the index's centroids and quantizer puts every row in
// LanceDB's partition with LanceDB's code, and, on a table sized so that
// LanceDB's optimize() appends a delta with them, Encode of the appended
// rows does the same as that delta.
func TestEncodeTypedMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, k := range typedKinds() {
		t.Run(k.String(), func(t *testing.T) {
			n, per := int64(12000), int64(3000)
			if strings.HasPrefix(k.typ, "ivf_hnsw") {
				// lance never joins the partitions of a one-partition
				// index, and would join HNSW partitions of fewer than
				// 262144 rows.
				k.opts["numPartitions"] = 1
				n, per = 2000, 500
			}
			dir := t.TempDir()
			f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
			opts := map[string]any{"distanceType": k.distance}
			for o, v := range k.opts {
				opts[o] = v
			}
			steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchemaOf(k.item), k.rows(0, per, "a"))}
			for lo := per; lo < n; lo += per {
				steps = append(steps, lancedb.Add(k.rows(lo, lo+per, "a")))
			}
			steps = append(steps, lancedb.CreateVectorIndex("vec", k.typ, "vec_idx", opts), lancedb.Add(k.rows(n, n+1000, "b")))
			f.Run(t, steps...)
			base := segmentDirs(t, f.Dir)
			if len(base) != 1 {
				t.Fatalf("%d index segments", len(base))
			}
			x, err := ReadSubIndex(openLocal(t, base[0]+"/"+IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ReadStorage(openLocal(t, base[0]+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			seg := &Segment{Index: x, Storage: s}
			built, err := seg.EncodeBuild(collect(t, f.Dir, 0, 1, 2, 3))
			if err != nil {
				t.Fatal(err)
			}
			samePlaces(t, built, s, "LanceDB's index")
			if s.Quantizer == QuantRQ {
				sameRQFactors(t, built, s)
			}

			v := collect(t, f.Dir, 4)
			f.Run(t, lancedb.Open(), lancedb.Optimize(lancedb.OptimizeOpts{}))
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
			// optimize() moved the appended fragment, rows in order.
			frag := delta.RowIDs[0] >> 32
			for i, a := range v.Addrs {
				v.Addrs[i] = frag<<32 | a&0xffffffff
			}
			ns, err := seg.Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			samePlaces(t, ns, delta, "LanceDB's delta")
			if delta.Quantizer == QuantRQ {
				sameRQFactors(t, ns, delta)
			}
		})
	}
}
