package merge_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// A job larger than Config.LocateBatchKeys locates its base rows in
// several passes (bounded memory) and lands exactly what one pass lands:
// the same table, the same counters. New fragments roll at
// MaxRowsPerFragment and hold the upserts in key order.
func TestMergeInBatches(t *testing.T) {
	type outcome struct {
		res  merge.Result
		rows ref
	}
	run := func(t *testing.T, batch int) outcome {
		ctx := t.Context()
		tb := openTable(t, "mem://", nil)
		tb.MaxRowsPerFragment = 7
		want := createTable(t, tb, 120, 40, "s0")
		rng := rand.New(rand.NewPCG(3, 5))
		for g := range 3 {
			recs := randomRecords(rng, 50, 200, fmt.Sprintf("g%d", g))
			writeGeneration(t, tb.Bucket, "s0", recs)
			want.apply(recs)
		}
		mg, err := merge.New(merge.Config{LocateBatchKeys: batch}, tb)
		if err != nil {
			t.Fatal(err)
		}
		res, err := mg.Run(ctx, "s0")
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			t.Fatalf("results %+v", res)
		}
		got := scan(t, tb)
		equalRef(t, got, want)
		m := latest(t, tb)
		var ids []int64
		for _, f := range m.Fragments[len(m.Fragments)-res[0].NewFragments:] {
			if f.PhysicalRows > 7 {
				t.Fatalf("new fragment %d holds %d rows, more than MaxRowsPerFragment", f.Id, f.PhysicalRows)
			}
			err := table.ScanFragment(ctx, tb.Bucket, m.Schema, f, func(_ uint32, r table.Row) error {
				ids = append(ids, r[0].(int64))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !slices.IsSorted(ids) {
			t.Fatalf("upserts not written in key order: %v", ids)
		}
		r := res[0]
		r.Elapsed, r.Version, r.ReadVersion, r.Lookup = 0, 0, 0, ""
		return outcome{r, got}
	}
	one := run(t, 0)
	if one.res.Inserted == 0 || one.res.Updated == 0 || one.res.Deleted == 0 {
		t.Fatalf("the data should exercise inserts, updates and deletes: %+v", one.res)
	}
	for _, batch := range []int{1, 2, 13} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			if got := run(t, batch); got.res != one.res {
				t.Fatalf("batch %d: %+v, one pass: %+v", batch, got.res, one.res)
			}
		})
	}
}

// rewriteSSTable replaces an SSTable object by the rows edit returns,
// written with the file's own schema.
func rewriteSSTable(t *testing.T, b storage.Bucket, path string, size uint64, edit func(rows []parquet.Row, opCol int) []parquet.Row) {
	t.Helper()
	ctx := t.Context()
	f, err := table.OpenParquet(ctx, b, path, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	var rows []parquet.Row
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, 16)
		for {
			n, err := rr.ReadRows(buf)
			for _, r := range buf[:n] {
				rows = append(rows, r.Clone())
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		_ = rr.Close()
	}
	leaf, _ := f.Schema().Lookup(memwal.OpColumn)
	var out bytes.Buffer
	w := parquet.NewWriter(&out, f.Schema())
	if _, err := w.WriteRows(edit(rows, leaf.ColumnIndex)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, path, out.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// A corrupt SSTable fails the job with table.ErrCorrupt, commits nothing
// and leaves no new data file behind.
func TestMergeRejectsCorruptSSTable(t *testing.T) {
	cases := map[string]struct {
		edit func(rows []parquet.Row, opCol int) []parquet.Row
		want string
	}{
		"keys out of order": {func(rows []parquet.Row, _ int) []parquet.Row {
			slices.Reverse(rows)
			return rows
		}, "keys not strictly ascending"},
		"unknown op": {func(rows []parquet.Row, opCol int) []parquet.Row {
			rows[1][opCol] = parquet.ByteArrayValue([]byte("merge")).Level(0, 0, opCol)
			return rows
		}, `has _op "merge"`},
		"missing rows": {func(rows []parquet.Row, _ int) []parquet.Row { return rows[:2] }, "shard manifest says 4"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			tb := openTable(t, "mem://", nil)
			createTable(t, tb, 10, 10, "s0")
			sst := writeGeneration(t, tb.Bucket, "s0", []memwal.Record{
				{Op: memwal.Upsert, Row: row(1, "a")}, {Op: memwal.Upsert, Row: row(4, "b")},
				{Op: memwal.Delete, Row: table.Row{int64(6), nil, nil}}, {Op: memwal.Upsert, Row: row(20, "c")},
			})
			rewriteSSTable(t, tb.Bucket, sst.Path, sst.Bytes, c.edit)
			// The shard manifest records the original size; the rewritten
			// object's size must be readable, so look it up.
			attrs, err := tb.Bucket.Attributes(ctx, sst.Path)
			if err != nil {
				t.Fatal(err)
			}
			sst.Bytes = uint64(attrs.Size)
			before := latest(t, tb)
			dataBefore := listKeys(t, tb.Bucket, table.DataDir)
			mg := newMerger(t, tb)
			head, jobs, _, err := mg.PlanLatest(ctx, "s0")
			if err != nil || len(jobs) != 1 {
				t.Fatalf("plan: %v %v", jobs, err)
			}
			jobs[0].SSTables[0].Bytes = sst.Bytes
			_, err = mg.Execute(ctx, jobs[0])
			if !errors.Is(err, table.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrCorrupt with %q", err, c.want)
			}
			if v := latest(t, tb).Version; v != before.Version || head.Version != before.Version {
				t.Fatalf("version moved to %d", v)
			}
			if after := listKeys(t, tb.Bucket, table.DataDir); !slices.Equal(after, dataBefore) {
				t.Fatalf("data files left behind: %v, before %v", after, dataBefore)
			}
		})
	}
}
