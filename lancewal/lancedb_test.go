package lancewal

import (
	"fmt"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func goRows(lo, hi int64, tag string) []Row {
	var out []Row
	for id := lo; id < hi; id++ {
		out = append(out, Row{"id": id, "s": fmt.Sprintf("%s%d", tag, id), "cat": int32(id % 4), "f": float64(id) / 2})
	}
	return out
}

func putModel(m map[int64]string, rows []Row) {
	for _, r := range rows {
		m[r["id"].(int64)] = r["s"].(string)
	}
}

func lsmView(t *testing.T, f *lancedb.Fixture) map[int64]string {
	t.Helper()
	res := f.Run(t, lancedb.Open(), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
	rows, err := res.Rows(1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLanceDBReadsGoGeneration: on a table LanceDB configured and wrote a
// generation to, the Go writer claims the shard, upserts and deletes, and
// flushes; LanceDB's LSM view then reads the model (LanceDB's rows, the
// Go writer's newer values, its deletes hidden).
func TestLanceDBReadsGoGeneration(t *testing.T) {
	lancedb.Require(t)
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			f := lancedb.MemWAL(t, "", shards, 1)
			ctx := t.Context()
			tbl, err := OpenTable(ctx, f.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			want := map[int64]string{}
			for k, v := range f.Want {
				want[k] = v
			}
			writers := map[string]*Writer{}
			writerFor := func(key int64) *Writer {
				s, err := tbl.ShardFor(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if w := writers[s]; w != nil {
					return w
				}
				w, err := tbl.OpenWriter(ctx, s, WriterOptions{})
				if err != nil {
					t.Fatal(err)
				}
				writers[s] = w
				return w
			}
			rows := append(goRows(0, 3, "go-"), goRows(500, 510, "go-")...)
			for _, r := range rows {
				if err := writerFor(r["id"].(int64)).Upsert(ctx, []Row{r}); err != nil {
					t.Fatal(err)
				}
			}
			putModel(want, rows)
			// A key written twice in one generation: the second wins.
			again := goRows(501, 502, "again-")
			if err := writerFor(501).Upsert(ctx, again); err != nil {
				t.Fatal(err)
			}
			putModel(want, again)
			for _, k := range []int64{3, 10, 502} {
				if err := writerFor(k).Delete(ctx, []any{k}); err != nil {
					t.Fatal(err)
				}
				delete(want, k)
			}
			for _, w := range writers {
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
				t.Fatalf("LanceDB's LSM view after the Go writer's flush:\n%s", d)
			}
		})
	}
}

// TestLanceDBOpensGoTable: a table the Go API created, indexed and
// configured is one LanceDB opens: it lists the btree, reports the write
// spec, reads the flushed rows through its LSM view, and its own MemWAL
// writer writes the table after the Go writer (claiming the shard).
func TestLanceDBOpensGoTable(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	dir := t.TempDir()
	tbl, err := CreateTable(ctx, dir+"/t.lance", []Column{
		{Name: "id", Type: "int64"}, {Name: "s", Type: "string", Nullable: true},
		{Name: "cat", Type: "int32", Nullable: true}, {Name: "f", Type: "double", Nullable: true},
	}, "id")
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if err := tbl.CreateIndex(ctx, "id_idx", "id", BTree); err != nil {
		t.Fatal(err)
	}
	cfg, err := tbl.EnableMemWAL(ctx, Config{Sharding: Bucket, Column: "id", NumBuckets: 3, MaintainedIndexes: []string{"id_idx"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	rows := goRows(0, 40, "go-")
	writers := map[string]*Writer{}
	for _, r := range rows {
		s, err := cfg.ShardFor(r["id"])
		if err != nil {
			t.Fatal(err)
		}
		if writers[s] == nil {
			if writers[s], err = tbl.OpenWriter(ctx, s, WriterOptions{MaxRows: 5}); err != nil {
				t.Fatal(err)
			}
		}
		if err := writers[s].Upsert(ctx, []Row{r}); err != nil {
			t.Fatal(err)
		}
	}
	putModel(want, rows)
	for _, w := range writers {
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
	res := f.Run(t, lancedb.GetLsmWriteSpec(), lancedb.ListIndices())
	spec, err := res.LsmWriteSpec(0)
	if err != nil {
		t.Fatal(err)
	}
	if spec == nil || spec.SpecType != "bucket" || spec.Column != "id" || spec.NumBuckets != 3 || fmt.Sprint(spec.MaintainedIndexes) != "[id_idx]" {
		t.Fatalf("LanceDB reads the spec as %+v", spec)
	}
	if ixs, err := res.Indices(1); err != nil || len(ixs) != 1 || ixs[0].Name != "id_idx" || ixs[0].IndexType != "BTree" {
		t.Fatalf("LanceDB lists indices %+v (%v)", ixs, err)
	}
	if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
		t.Fatalf("LSM view of the Go-made table:\n%s", d)
	}
	more := lanceRows(goRows(35, 45, "ldb-"))
	f.Run(t, lancedb.MergeInsert("id", more), lancedb.CloseLsmWriters())
	putModel(want, goRows(35, 45, "ldb-"))
	if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
		t.Fatalf("LSM view after LanceDB wrote the Go-made table:\n%s", d)
	}
}

// TestStringKeys: on a table LanceDB keys by a utf8 column (unsharded),
// the Go writer's newer values replace LanceDB's in its LSM view, never sit
// beside them (its string bloom filter and _pk_index serve LanceDB's
// reader), its deletes hide keys, and LanceDB's writer then writes over the
// Go writer's shard. Bucket sharding by a string key is refused: LanceDB
// does not route strings by murmur3 of their bytes.
func TestStringKeys(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	dir := t.TempDir()
	schema := []lancedb.Column{{Name: "k", Type: "utf8"}, {Name: "s", Type: "utf8", Nullable: true}}
	krows := func(lo, hi int, tag string) ([]lancedb.Row, []Row) {
		var l []lancedb.Row
		var g []Row
		for i := lo; i < hi; i++ {
			k := fmt.Sprintf("key-%d", i)
			l = append(l, lancedb.Row{"k": k, "s": tag + k})
			g = append(g, Row{"k": k, "s": tag + k})
		}
		return l, g
	}
	want := map[string]string{}
	put := func(rows []Row) {
		for _, r := range rows {
			want[r["k"].(string)] = r["s"].(string)
		}
	}
	l0, g0 := krows(0, 30, "ldb-")
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
	f.Run(t, lancedb.Create(schema, l0), lancedb.CreateIndex("k", "btree", "k_idx"), lancedb.SetPrimaryKey("k"),
		lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"k_idx"}}))
	put(g0)
	l1, g1 := krows(0, 12, "ldb1-")
	f.Run(t, lancedb.MergeInsert("k", l1), lancedb.CloseLsmWriters())
	put(g1)

	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, err := tbl.ShardFor(ctx, "key-3")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, g2 := krows(6, 20, "go-")
	if err := w.Upsert(ctx, g2); err != nil {
		t.Fatal(err)
	}
	put(g2)
	for _, k := range []string{"key-8", "key-25"} {
		if err := w.Delete(ctx, []any{k}); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l3, g3 := krows(15, 22, "ldb3-")
	f.Run(t, lancedb.MergeInsert("k", l3), lancedb.CloseLsmWriters())
	put(g3)
	res := f.Run(t, lancedb.Open(), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true), SortBy: []string{"k"}}))
	rows, err := res.Rows(1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		k := r.Str("k")
		if _, dup := got[k]; dup {
			t.Fatalf("key %s read twice", k)
		}
		got[k] = r.Str("s")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("LSM view\n got %v\nwant %v", got, want)
	}

	cfg := &Config{Sharding: Bucket, NumBuckets: 3}
	pk, _ := newColumn(&pb.Field{Name: "k", LogicalType: "string"})
	cfg.pk = &pk
	if _, err := cfg.ShardFor("key-1"); err == nil {
		t.Error("bucket routing of a string key was accepted")
	}
}
