package index_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func openTable(t *testing.T, url string) *ops.Table {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(b, c, nil, nil)
}

func newTable(t *testing.T, url string) *ops.Table {
	t.Helper()
	tb := openTable(t, url)
	s, err := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return tb
}

// appendFragment appends keys [start, start+n) as one fragment; cat is
// "c<id%8>", val is id/2.
func appendFragment(t *testing.T, tb *ops.Table, start, n int64) {
	t.Helper()
	rows := make([]table.Row, 0, n)
	for k := start; k < start+n; k++ {
		rows = append(rows, table.Row{k, fmt.Sprintf("c%d", k%8), float64(k / 2)})
	}
	if _, err := tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

func head(t *testing.T, tb *ops.Table) *pb.Manifest {
	t.Helper()
	m, err := table.ReadLatest(context.Background(), tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expected scans every live row of m and returns the addresses whose column
// col satisfies match.
func expected(t *testing.T, tb *ops.Table, m *pb.Manifest, col int, match func(any) bool) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range m.Fragments {
		err := table.ScanFragment(context.Background(), tb.Bucket, m.Schema, f, func(off uint32, r table.Row) error {
			if match(r[col]) {
				out = append(out, table.RowAddr(f.Id, off))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func lookup(t *testing.T, tb *ops.Table, name, key string, opts index.LookupOptions) *index.LookupResult {
	t.Helper()
	r, err := index.Lookup(context.Background(), tb.Bucket, head(t, tb), name, key, opts)
	if err != nil {
		t.Fatalf("lookup %s=%s: %v", name, key, err)
	}
	return r
}

func mustCreate(t *testing.T, tb *ops.Table, name, col, typ string) {
	t.Helper()
	if _, err := index.Create(context.Background(), tb, index.Spec{Name: name, Column: col, Type: typ}, index.BuildConfig{}); err != nil {
		t.Fatalf("create index %s: %v", name, err)
	}
}

func TestCreateAndLookup(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		tb := newTable(t, url)
		for i := int64(0); i < 4; i++ {
			appendFragment(t, tb, i*100, 100)
		}
		mustCreate(t, tb, "by_id", "id", index.TypeBTree)
		mustCreate(t, tb, "by_cat", "cat", index.TypeBitmap)
		mustCreate(t, tb, "cat_tree", "cat", index.TypeBTree)
		mustCreate(t, tb, "by_val", "val", index.TypeBTree)
		m := head(t, tb)

		r := lookup(t, tb, "by_id", "123", index.LookupOptions{Rows: true})
		if len(r.Matches) != 1 || r.Matches[0].Addr != table.RowAddr(1, 23) || r.Matches[0].Row[0] != int64(123) || r.Matches[0].Row[1] != "c3" {
			t.Fatalf("by_id 123: %+v", r.Matches)
		}
		if r := lookup(t, tb, "by_id", "1000", index.LookupOptions{}); len(r.Matches) != 0 {
			t.Fatalf("by_id 1000 found %v", r.Addrs())
		}
		want := expected(t, tb, m, 1, func(v any) bool { return v == "c3" })
		for _, name := range []string{"by_cat", "cat_tree"} {
			if got := lookup(t, tb, name, "c3", index.LookupOptions{}).Addrs(); !slices.Equal(got, want) {
				t.Fatalf("%s c3: got %d rows, want %d", name, len(got), len(want))
			}
		}
		want = expected(t, tb, m, 2, func(v any) bool { return v == 21.0 })
		if got := lookup(t, tb, "by_val", "21", index.LookupOptions{}).Addrs(); !slices.Equal(got, want) || len(want) != 2 {
			t.Fatalf("by_val 21: got %v, want %v", got, want)
		}
	})
}

// A btree with many row groups, a key whose entries span row groups, and
// lookups that must skip row groups by their statistics.
func TestBTreeManyRowGroups(t *testing.T) {
	tb := newTable(t, "mem://"+testutil.UniqueName(t))
	appendFragment(t, tb, 0, 30_000)
	appendFragment(t, tb, 30_000, 30_000)
	mustCreate(t, tb, "cat_tree", "cat", index.TypeBTree)
	mustCreate(t, tb, "by_id", "id", index.TypeBTree)
	m := head(t, tb)
	for c := 0; c < 8; c++ {
		key := fmt.Sprintf("c%d", c)
		want := expected(t, tb, m, 1, func(v any) bool { return v == key })
		if got := lookup(t, tb, "cat_tree", key, index.LookupOptions{}).Addrs(); !slices.Equal(got, want) {
			t.Fatalf("cat_tree %s: got %d rows, want %d", key, len(got), len(want))
		}
	}
	for _, k := range []int64{0, 8191, 8192, 29_999, 30_000, 59_999} {
		got := lookup(t, tb, "by_id", fmt.Sprint(k), index.LookupOptions{}).Addrs()
		want := table.RowAddr(uint32(k/30_000), uint32(k%30_000))
		if len(got) != 1 || got[0] != want {
			t.Fatalf("by_id %d: got %v, want [%d]", k, got, want)
		}
	}
}

func TestLookupDropsDeletedRowsAndDeadFragments(t *testing.T) {
	tb := newTable(t, "mem://"+testutil.UniqueName(t))
	for i := int64(0); i < 3; i++ {
		appendFragment(t, tb, i*100, 100)
	}
	mustCreate(t, tb, "by_cat", "cat", index.TypeBitmap)
	mustCreate(t, tb, "by_id", "id", index.TypeBTree)
	ctx := context.Background()
	p, err := ops.ParsePredicate(head(t, tb).Schema, "id >= 50 AND id < 150")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Predicate: p}); err != nil {
		t.Fatal(err)
	}
	f2 := uint32(2)
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Fragment: &f2}); err != nil {
		t.Fatal(err)
	}
	m := head(t, tb)
	want := expected(t, tb, m, 1, func(v any) bool { return v == "c1" })
	if got := lookup(t, tb, "by_cat", "c1", index.LookupOptions{}).Addrs(); !slices.Equal(got, want) {
		t.Fatalf("by_cat c1: got %v, want %v", got, want)
	}
	for _, k := range []string{"60", "120", "250"} {
		if got := lookup(t, tb, "by_id", k, index.LookupOptions{}).Addrs(); len(got) != 0 {
			t.Fatalf("deleted key %s found at %v", k, got)
		}
	}
}

func TestCatchUpAndOptimize(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "mem://"+testutil.UniqueName(t))
	appendFragment(t, tb, 0, 100)
	mustCreate(t, tb, "by_id", "id", index.TypeBTree)
	mustCreate(t, tb, "by_cat", "cat", index.TypeBitmap)
	appendFragment(t, tb, 100, 100)
	appendFragment(t, tb, 200, 100)
	m := head(t, tb)
	un, err := index.Unindexed(m, "by_id")
	if err != nil || !slices.Equal(un, []uint32{1, 2}) {
		t.Fatalf("unindexed = %v, %v; want [1 2]", un, err)
	}
	if got := lookup(t, tb, "by_id", "150", index.LookupOptions{}).Addrs(); len(got) != 0 {
		t.Fatalf("index-only lookup of an unindexed row found %v", got)
	}
	r := lookup(t, tb, "by_id", "150", index.LookupOptions{ScanUnindexed: true})
	if got := r.Addrs(); !slices.Equal(got, []uint64{table.RowAddr(1, 50)}) || !slices.Equal(r.Scanned, []uint32{1, 2}) {
		t.Fatalf("scanning lookup: %v scanned %v", got, r.Scanned)
	}
	for _, name := range []string{"by_id", "by_cat"} {
		seg, err := index.CatchUpSegment(ctx, tb.Bucket, m, name, index.BuildConfig{})
		if err != nil {
			t.Fatal(err)
		}
		txn := tb.NewTxn(m.Version)
		txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{seg}}}
		if _, err := tb.CommitOrClean(ctx, txn, index.SegmentFiles(seg)); err != nil {
			t.Fatal(err)
		}
	}
	if seg, err := index.CatchUpSegment(ctx, tb.Bucket, head(t, tb), "by_id", index.BuildConfig{}); err != nil || seg != nil {
		t.Fatalf("second catch-up built %v, %v", seg, err)
	}
	r = lookup(t, tb, "by_id", "150", index.LookupOptions{ScanUnindexed: true})
	if got := r.Addrs(); !slices.Equal(got, []uint64{table.RowAddr(1, 50)}) || len(r.Scanned) != 0 {
		t.Fatalf("after catch-up: %v scanned %v", got, r.Scanned)
	}

	// Delete some rows, then merge: the merged segment drops them.
	p, _ := ops.ParsePredicate(m.Schema, "id >= 90 AND id < 110")
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Predicate: p}); err != nil {
		t.Fatal(err)
	}
	before := map[string][]uint64{}
	for c := 0; c < 8; c++ {
		before[fmt.Sprint(c)] = lookup(t, tb, "by_cat", fmt.Sprintf("c%d", c), index.LookupOptions{}).Addrs()
	}
	for _, name := range []string{"by_id", "by_cat"} {
		res, err := index.Optimize(ctx, tb, name, index.BuildConfig{})
		if err != nil || res == nil {
			t.Fatalf("optimize %s: %v, %v", name, res, err)
		}
		segs, _ := index.Segments(head(t, tb), name)
		if len(segs) != 1 || segs[0].GetScalar().NumEntries != 280 {
			t.Fatalf("%s after optimize: %d segments, %d entries; want 1, 280", name, len(segs), segs[0].GetScalar().NumEntries)
		}
	}
	for c := 0; c < 8; c++ {
		if got := lookup(t, tb, "by_cat", fmt.Sprintf("c%d", c), index.LookupOptions{}).Addrs(); !slices.Equal(got, before[fmt.Sprint(c)]) {
			t.Fatalf("by_cat c%d changed by optimize", c)
		}
	}
	if got := lookup(t, tb, "by_id", "100", index.LookupOptions{}).Addrs(); len(got) != 0 {
		t.Fatalf("deleted row found after optimize: %v", got)
	}
}

// listAll returns every key in the bucket, to show that bad input deletes
// nothing (and leaves nothing behind).
func listAll(t *testing.T, b storage.Bucket) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), "", func(a storage.Attrs) error {
		out = append(out, a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestBadInput(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		tb := newTable(t, url)
		appendFragment(t, tb, 0, 100)
		mustCreate(t, tb, "by_id", "id", index.TypeBTree)
		mustCreate(t, tb, "by_cat", "cat", index.TypeBitmap)
		files := listAll(t, tb.Bucket)

		if _, err := index.Lookup(ctx, tb.Bucket, head(t, tb), "nope", "1", index.LookupOptions{}); !errors.Is(err, index.ErrNoIndex) {
			t.Fatalf("unknown index: %v", err)
		}
		if _, err := index.Lookup(ctx, tb.Bucket, head(t, tb), "by_id", "abc", index.LookupOptions{}); err == nil {
			t.Fatal("non-integer key accepted")
		}
		for _, spec := range []index.Spec{
			{Name: "x", Column: "nope", Type: index.TypeBTree},
			{Name: "x", Column: "id", Type: "hash"},
			{Name: "__x", Column: "id", Type: index.TypeBTree},
			{Name: "by_id", Column: "id", Type: index.TypeBTree},
		} {
			if _, err := index.Create(ctx, tb, spec, index.BuildConfig{}); !errors.Is(err, index.ErrBadSpec) {
				t.Fatalf("create %+v: %v", spec, err)
			}
		}
		// A bitmap over a high-cardinality column fails and leaves no file.
		if _, err := index.Create(ctx, tb, index.Spec{Name: "x", Column: "id", Type: index.TypeBitmap}, index.BuildConfig{MaxBitmapKeys: 10}); !errors.Is(err, index.ErrBadSpec) {
			t.Fatalf("high-cardinality bitmap: %v", err)
		}
		if got := listAll(t, tb.Bucket); !slices.Equal(got, files) {
			t.Fatalf("bad input changed the bucket:\n%v\n%v", files, got)
		}

		// Corrupt segment files give ErrCorrupt, and nothing is deleted.
		m := head(t, tb)
		for _, name := range []string{"by_id", "by_cat"} {
			segs, _ := index.Segments(m, name)
			f := index.SegmentFiles(segs[0])[0]
			data, err := tb.Bucket.Get(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xFF
			if err := tb.Bucket.Put(ctx, f, data[:len(data)-3]); err != nil {
				t.Fatal(err)
			}
			_, err = index.Lookup(ctx, tb.Bucket, m, name, "c1", index.LookupOptions{})
			if name == "by_id" {
				_, err = index.Lookup(ctx, tb.Bucket, m, name, "1", index.LookupOptions{})
			}
			if !errors.Is(err, index.ErrCorrupt) || !errors.Is(err, table.ErrCorrupt) {
				t.Fatalf("%s corrupt: %v", name, err)
			}
			if _, err := index.Optimize(ctx, tb, name, index.BuildConfig{}); err != nil {
				t.Fatalf("optimize of a one-segment index: %v", err)
			}
		}
		if got := listAll(t, tb.Bucket); !slices.Equal(got, files) {
			t.Fatalf("a corrupt segment changed the bucket:\n%v\n%v", files, got)
		}
	})
}

func TestKeyEncodingOrders(t *testing.T) {
	cases := []struct {
		typ  pb.FieldType
		vals []any
	}{
		{pb.FieldType_FIELD_TYPE_INT64, []any{int64(-1 << 63), int64(-5), int64(0), int64(7), int64(1<<63 - 1)}},
		{pb.FieldType_FIELD_TYPE_FLOAT64, []any{-1e300, -2.5, -0.0, 1e-300, 3.0, 1e300}},
		{pb.FieldType_FIELD_TYPE_STRING, []any{"", "a", "a\x00", "ab", "b"}},
		{pb.FieldType_FIELD_TYPE_BOOL, []any{false, true}},
		{pb.FieldType_FIELD_TYPE_TIMESTAMP, []any{table.Timestamp(-10), table.Timestamp(0), table.Timestamp(99)}},
	}
	for _, c := range cases {
		var prev []byte
		for i, v := range c.vals {
			k, err := index.EncodeKey(c.typ, v)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && string(prev) >= string(k) {
				t.Fatalf("%v: %v does not sort after %v", c.typ, v, c.vals[i-1])
			}
			back, err := index.DecodeKey(c.typ, k)
			if err != nil || back != v && !(c.typ == pb.FieldType_FIELD_TYPE_FLOAT64 && back == 0.0 && v == -0.0) {
				t.Fatalf("%v: decode(%v) = %v, %v", c.typ, v, back, err)
			}
			prev = k
		}
	}
}

// Two creates of one index name race: B builds and commits while A's
// commit is parked. Whatever the columns, A conflicts and fails with a
// clear error, and the table keeps one logical index on one field.
func TestRacingCreatesOfOneName(t *testing.T) {
	for _, col := range []string{"id", "cat"} {
		t.Run(col, func(t *testing.T) {
			url := "mem://" + testutil.UniqueName(t)
			tbB := newTable(t, url)
			appendFragment(t, tbB, 0, 20)
			b, err := storage.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			faulty := storage.NewFaulty(b)
			c, err := commit.NewCommitter(commit.Config{}, faulty, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			tbA := ops.NewTable(faulty, c, nil, nil)
			gate := make(chan struct{})
			rule := faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
			done := make(chan error, 1)
			go func() {
				_, err := index.Create(context.Background(), tbA, index.Spec{Name: "ix", Column: col, Type: index.TypeBTree}, index.BuildConfig{})
				done <- err
			}()
			for rule.Matched() == 0 {
				select {
				case err := <-done:
					t.Fatalf("A ended before its commit: %v", err)
				default:
					runtime.Gosched()
				}
			}
			mustCreate(t, tbB, "ix", "id", index.TypeBTree)
			faulty.Remove(rule)
			close(gate)
			err = <-done
			if !errors.Is(err, commit.ErrRetryable) || !errors.Is(err, index.ErrBadSpec) {
				t.Fatalf("the second create: got %v, want a conflict", err)
			}
			segs, err := index.Segments(head(t, tbB), "ix")
			if err != nil || len(segs) != 1 || segs[0].FieldIds[0] != 0 {
				t.Fatalf("segments %v (%v), want B's one", segs, err)
			}
		})
	}
}
