package lancewal

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// vectorTable creates a table of id, a nullable vector[4] vec and s, with
// an unsharded MemWAL.
func vectorTable(t testing.TB) (*Table, *state) {
	t.Helper()
	ctx := t.Context()
	tbl, err := CreateTable(ctx, t.TempDir()+"/t.lance", []Column{
		{Name: "id", Type: "int64"}, {Name: "vec", Type: "fixed_size_list:float:4", Nullable: true}, {Name: "s", Type: "string", Nullable: true},
	}, "id")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	if _, err := tbl.EnableMemWAL(ctx, Config{Sharding: Unsharded}); err != nil {
		t.Fatal(err)
	}
	st, err := tbl.state(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, st
}

// TestVectorColumns: float32 vectors (given as float32 or float64 slices,
// slices of numbers as JSON decodes them, or null) go through the WAL, a new owner's replay and a flush unchanged;
// a vector of another width or element type, or with a NaN or infinite
// item, is refused in one line, as
// are vector columns of other items and a vector primary key.
func TestVectorColumns(t *testing.T) {
	ctx := t.Context()
	tbl, _ := vectorTable(t)
	w := mustWriter(t, tbl, int64(1))
	rows := []Row{
		{"id": int64(1), "vec": []float32{1, -2, 3.5, 0.25}, "s": "a"},
		{"id": int64(2), "vec": nil, "s": "b"},
		{"id": int64(3), "vec": []float64{0.5, 0.5, -1, 8}},
		{"id": int64(5), "vec": []any{json.Number("1.5"), 2.0, int64(-3), float32(0.5)}},
	}
	if err := w.Upsert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Row{
		"short vector":  {"id": int64(4), "vec": []float32{1, 2, 3}},
		"int vector":    {"id": int64(4), "vec": []int{1, 2, 3, 4}},
		"scalar vector": {"id": int64(4), "vec": float32(1)},
		"string item":   {"id": int64(4), "vec": []any{1.0, "2", 3.0, 4.0}},
		"NaN item":      {"id": int64(4), "vec": []float32{1, float32(math.NaN()), 3, 4}},
		"infinite item": {"id": int64(4), "vec": []float64{1, 2, math.Inf(1), 4}},
	} {
		err := w.Upsert(ctx, []Row{r})
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "vec") {
			t.Errorf("%s: %v, want a one-line error naming the column", name, err)
		}
	}
	// The next owner replays the entry; its flush holds the vectors.
	w.Abandon()
	w = mustWriter(t, tbl, int64(1))
	g, err := w.Flush(ctx)
	if err != nil || g == nil || g.Rows != 4 {
		t.Fatalf("flush after replay: %+v, %v", g, err)
	}
	gb := storage.Sub(tbl.b, memwal.GenerationDir(w.Shard(), g.Path))
	var field *pb.Field
	for _, c := range w.st.cols {
		if c.field.GetName() == "vec" {
			field = c.field
		}
	}
	v, err := vector.CollectVectors(ctx, gb, 1, field, roaring.BitmapOf(0))
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, -2, 3.5, 0.25, 0.5, 0.5, -1, 8, 1.5, 2, -3, 0.5}
	if !slices.Equal(v.Addrs, []uint64{0, 2, 3}) || !slices.Equal(v.Data, want) {
		t.Fatalf("the generation's vectors: rows %v %v, want rows [0 2 3] %v", v.Addrs, v.Data, want)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	for name, cols := range map[string][]Column{
		"double items": {{Name: "id", Type: "int64"}, {Name: "v", Type: "fixed_size_list:double:4"}},
		"no width":     {{Name: "id", Type: "int64"}, {Name: "v", Type: "fixed_size_list:float:0"}},
	} {
		_, err := CreateTable(ctx, t.TempDir()+"/x.lance", cols, "id")
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line refusal", name, err)
		}
	}
	vk, err := CreateTable(ctx, t.TempDir()+"/k.lance", []Column{{Name: "v", Type: "fixed_size_list:float:2"}}, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer vk.Close()
	if _, err := vk.Config(ctx); err == nil || !strings.Contains(err.Error(), "vector") {
		t.Errorf("a vector primary key: %v", err)
	}
}

// TestVectorCopyRows: a generation's vector copy holds the rows that are
// neither tombstones nor null or non-finite vectors (a replayed entry may
// hold one), by their offsets in the generation,
// with the metadata LanceDB gives its copies; a generation with no such
// row gets no copy.
func TestVectorCopyRows(t *testing.T) {
	ctx := t.Context()
	tbl, st := vectorTable(t)
	col := st.cols[1]
	ch := newChunk(col, 4)
	nan := float32(math.NaN())
	for _, v := range [][]float32{{1, 2, 3, 4}, {0, 0, 0, 0}, nil, {4, 3, 2, 1}, {nan, 1, 1, 1}} {
		var x any
		if v != nil {
			x = v
		}
		if err := ch.add(x); err != nil {
			t.Fatal(err)
		}
	}
	tomb := []bool{false, true, false, false, false}
	like := &pb.IndexMetadata{Name: "vec_idx", Fields: []int32{col.field.GetId()}}
	vc := &vectorCopy{name: "vec_idx", col: 1, distance: "cosine", like: like}
	gb := storage.Sub(tbl.b, "gen/")
	ix, err := writeVectorCopy(ctx, gb, vc, ch, tomb, 42)
	if err != nil {
		t.Fatal(err)
	}
	bm, _, err := meta.FragmentBitmap(ix)
	if err != nil || ix.GetName() != "vec_idx" || !slices.Equal(ix.GetFields(), like.Fields) || ix.GetDatasetVersion() != 1 ||
		ix.GetIndexVersion() != 1 || ix.GetCreatedAt() != 42 || ix.GetIndexDetails().GetTypeUrl() != vector.TypeURLDetails ||
		len(ix.GetIndexDetails().GetValue()) != 0 || !slices.Equal(bm.ToArray(), []uint32{0}) {
		t.Fatalf("copy metadata %v (bitmap %v, %v)", ix, bm, err)
	}
	key := meta.IndexDir(meta.UUIDString(ix.GetUuid())) + vector.StorageFile
	a, err := gb.Attributes(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := vector.ReadStorage(storage.NewReaderAt(ctx, gb, key, a.Size), a.Size)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.RowIDs, []uint64{0, 3}) || s.Distance != "cosine" {
		t.Fatalf("copy rows %v (%s), want [0 3] (cosine)", s.RowIDs, s.Distance)
	}
	if ix, err := writeVectorCopy(ctx, gb, vc, ch, []bool{true, true, false, true, false}, 42); err != nil || ix != nil {
		t.Fatalf("a generation of tombstones and null vectors: copy %v, %v; want none", ix, err)
	}
}

// FuzzReplayVectors: any bytes as a WAL entry of a table with a vector
// column decode to rows or fail, never panic (seeded with the writer's own
// entries).
func FuzzReplayVectors(f *testing.F) {
	_, st := vectorTable(f)
	m := newMemtable(st)
	b, err := m.build([]Row{{"id": int64(1), "vec": []float32{1, 2, 3, 4}}, {"id": int64(2), "s": "x"}}, false)
	if err != nil {
		f.Fatal(err)
	}
	data, err := b.walEntry(1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMemtable(st)
		bs, err := m.decodeEntry(data)
		if err != nil {
			return
		}
		for _, b := range bs {
			if _, err := b.walEntry(1); err != nil {
				t.Fatalf("a decoded entry does not encode: %v", err)
			}
		}
	})
}
