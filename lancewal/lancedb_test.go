package lancewal

import (
	"fmt"
	"testing"

	"github.com/compactord/compactord/internal/testutil/lancedb"
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
