package index

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// nullyRow: BasicSchema with nulls: s every 7th, cat every 11th, f every
// 13th id; cat has 4 values (low cardinality), f repeats per 2 ids.
func nullyRow(id int64) lancedb.Row {
	r := lancedb.Row{"id": id, "s": fmt.Sprintf("v%d", id), "cat": int32(id % 4), "f": float64(id / 2)}
	if id%7 == 0 {
		r["s"] = nil
	}
	if id%11 == 0 {
		r["cat"] = nil
	}
	if id%13 == 0 {
		r["f"] = nil
	}
	return r
}

func nullyRows(lo, hi int64) []lancedb.Row {
	var out []lancedb.Row
	for i := lo; i < hi; i++ {
		out = append(out, nullyRow(i))
	}
	return out
}

type pred struct {
	where string
	keep  func(lancedb.Row) bool
}

func num(r lancedb.Row, c string) (float64, bool) {
	switch v := r[c].(type) {
	case int64:
		return float64(v), true
	case int32:
		return float64(v), true
	case float64:
		return v, true
	}
	return math.NaN(), false
}

var typePreds = []pred{
	{"id = 9603", func(r lancedb.Row) bool { return r["id"].(int64) == 9603 }},
	{"id >= 4090 AND id < 4110", func(r lancedb.Row) bool { id := r["id"].(int64); return id >= 4090 && id < 4110 }},
	{"s = 'v9605'", func(r lancedb.Row) bool { return r["s"] == "v9605" }},
	{"s IN ('v12', 'v9501', 'v9700')", func(r lancedb.Row) bool { return r["s"] == "v12" || r["s"] == "v9501" || r["s"] == "v9700" }},
	{"s IS NULL AND id > 9400", func(r lancedb.Row) bool { return r["s"] == nil && r["id"].(int64) > 9400 }},
	{"cat = 2 AND id >= 9500", func(r lancedb.Row) bool { c, ok := num(r, "cat"); return ok && c == 2 && r["id"].(int64) >= 9500 }},
	{"cat IS NULL", func(r lancedb.Row) bool { return r["cat"] == nil }},
	{"f >= 4800.0 AND f < 4802.0", func(r lancedb.Row) bool { f, ok := num(r, "f"); return ok && f >= 4800 && f < 4802 }},
	{"f IS NULL AND id > 9000", func(r lancedb.Row) bool { return r["f"] == nil && r["id"].(int64) > 9000 }},
}

// TestTypesDeletesNullsByLanceDB: a table of 9 500 rows (two fragments,
// nulls in every indexed column, every id ending in 3 deleted) with btree
// indexes on int64, utf8 and float64 columns and a bitmap on a 4-valued
// int32 column. The segments LanceDB builds hold exactly the entries ours
// hold for the same rows (values, nulls, row addresses, page lookup over
// 3 pages). Then rows are appended and some deleted in the new fragment:
// catch-up deltas make LanceDB report 0 unindexed rows and answer indexed
// filters (equality, ranges, IN, IS NULL) with the model's rows.
func TestTypesDeletesNullsByLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	model := map[int64]lancedb.Row{}
	for i := int64(0); i < 9500; i++ {
		if i%10 != 3 {
			model[i] = nullyRow(i)
		}
	}
	idx := []struct{ col, typ, name string }{{"id", "btree", "id_idx"}, {"s", "btree", "s_idx"}, {"f", "btree", "f_idx"}, {"cat", "bitmap", "cat_idx"}}
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, nullyRows(0, 9000)), lancedb.Add(nullyRows(9000, 9500)), lancedb.Delete("id % 10 = 3")}
	for _, x := range idx {
		steps = append(steps, lancedb.CreateIndex(x.col, x.typ, x.name))
	}
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: steps})
	tdir := filepath.Join(dir, "t.lance")
	h := openHandle(t, tdir)
	read, _, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range idx {
		segs := meta.FindIndex(read.Indices, x.name)
		if len(segs) != 1 {
			t.Fatalf("%s: %d segments", x.name, len(segs))
		}
		frags, _, _ := meta.FragmentBitmap(segs[0])
		tf := fieldByID(read.Manifest, segs[0].GetFields()[0])
		e, err := Collect(t.Context(), h.Bucket, read.Manifest.GetVersion(), tf, frags)
		if err != nil {
			t.Fatal(err)
		}
		if e.Len() != len(model) {
			t.Fatalf("%s: collected %d rows, want %d", x.name, e.Len(), len(model))
		}
		// LanceDB's sort leaves ties (nulls, repeated values) in scan
		// order across parallel fragments; compare in (value, address)
		// order.
		theirs := loadEntries(t, tdir, segs[0]).Sorted()
		if ok, d := e.Sorted().Equal(theirs); !ok {
			t.Errorf("%s: the table's rows vs LanceDB's segment: %s", x.name, d)
		}
		out := t.TempDir()
		w, err := WriteSegment(t.Context(), openBucket(t, out), x.typ, tf, e)
		if err != nil {
			t.Fatal(err)
		}
		like := segs[0]
		mine := loadEntries(t, out, metaLike{like, w}.ix()).Sorted()
		if ok, d := mine.Equal(theirs); !ok {
			t.Errorf("%s: our segment vs LanceDB's: %s", x.name, d)
		}
		if x.typ == "btree" {
			ob := readBTreeDir(t, filepath.Join(out, "_indices", meta.UUIDString(w.UUID)))
			tb := readBTreeDir(t, segmentDir(tdir, segs[0]))
			if len(ob.Pages) != len(tb.Pages) || len(tb.Pages) != 3 {
				t.Fatalf("%s: %d pages, LanceDB's %d (want 3)", x.name, len(ob.Pages), len(tb.Pages))
			}
			for i := range tb.Pages {
				o, th := ob.Pages[i], tb.Pages[i]
				if o.Index != th.Index || o.NullCount != th.NullCount || !sameValue(o.Min, th.Min) || !sameValue(o.Max, th.Max) {
					t.Errorf("%s: page %d = %d/%d nulls, LanceDB's %d/%d", x.name, i, o.Index, o.NullCount, th.Index, th.NullCount)
				}
			}
		}
	}

	// New rows, some deleted in the new fragment, then catch-up.
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: []lancedb.Step{
		lancedb.Add(nullyRows(9500, 9800)), lancedb.Delete("id >= 9600 AND id < 9603"),
	}})
	for i := int64(9500); i < 9800; i++ {
		if !(i >= 9600 && i < 9603) {
			model[i] = nullyRow(i)
		}
	}
	res, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Indices) != len(idx) {
		t.Fatalf("catch-up: %+v", res)
	}
	for _, ir := range res.Indices {
		if ir.Rows != 297 || ir.Rebuilt {
			t.Errorf("%s: delta of %d rows (want 297), rebuilt %v", ir.Name, ir.Rows, ir.Rebuilt)
		}
	}
	var st []lancedb.Step
	for _, x := range idx {
		st = append(st, lancedb.IndexStats(x.name))
	}
	for _, p := range typePreds {
		st = append(st, lancedb.ReadRows(lancedb.ReadOpts{Where: p.where}))
	}
	out := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: st})
	for i, x := range idx {
		s := stats(t, out, i)
		if s.NumUnindexedRows != 0 || s.NumIndexedRows != int64(len(model)) {
			t.Errorf("%s: %d indexed, %d unindexed (want %d, 0)", x.name, s.NumIndexedRows, s.NumUnindexedRows, len(model))
		}
	}
	for k, p := range typePreds {
		var wantIDs []int64
		for id, r := range model {
			if p.keep(r) {
				wantIDs = append(wantIDs, id)
			}
		}
		slices.Sort(wantIDs)
		if got := idsOf(t, out, len(idx)+k); !sameIDs(got, wantIDs) {
			t.Errorf("where %s: %v, want %v", p.where, got, wantIDs)
		}
		if len(wantIDs) == 0 {
			t.Errorf("where %s selects nothing; the test is weak", p.where)
		}
	}
}
