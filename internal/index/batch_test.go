package index_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// LookupBatch answers exactly what one LookupKey per key answers, through
// deletions and a deferred compaction's FRI.
func TestLookupBatchAgreesWithLookupKey(t *testing.T) {
	tb := newTable(t, "mem://")
	ctx := context.Background()
	for i := int64(0); i < 4; i++ {
		appendFragment(t, tb, i*40, 40)
	}
	mustCreate(t, tb, "byid", "id", "btree")
	mustCreate(t, tb, "bycat", "cat", "bitmap")
	if _, _, err := tb.Delete(ctx, nil, opsDeleteKeys(5, 45, 46, 120)); err != nil {
		t.Fatal(err)
	}
	c, err := compact.New(compact.DefaultConfig(), tb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Run(ctx, nil); err != nil || out == nil {
		t.Fatalf("compaction: %v", err)
	}
	if fr := table.FragReuse(head(t, tb)); fr == nil || len(fr.Versions) == 0 {
		t.Fatal("the compaction recorded no FRI version; the test would not exercise the remap")
	}
	m := head(t, tb)
	for _, tc := range []struct {
		name string
		vals []any
	}{
		{"byid", []any{int64(0), int64(5), int64(44), int64(45), int64(80), int64(159), int64(500)}},
		{"bycat", []any{"c0", "c3", "nope"}},
	} {
		f, _ := index.Field(m, tc.name)
		var keys [][]byte
		for _, v := range tc.vals {
			k, err := index.EncodeKey(f.Type, v)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, bytes.Compare)
		got := map[int][]uint64{}
		if err := index.LookupBatch(ctx, tb.Bucket, m, tc.name, keys, func(i int, a uint64) error { got[i] = append(got[i], a); return nil }); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			res, err := index.LookupKey(ctx, tb.Bucket, m, tc.name, k, index.LookupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := res.Addrs()
			g := got[i]
			slices.Sort(g)
			if fmt.Sprint(g) != fmt.Sprint(want) && !(len(g) == 0 && len(want) == 0) {
				t.Fatalf("%s key %x: batch %v, one by one %v", tc.name, k, g, want)
			}
		}
	}
}

func opsDeleteKeys(keys ...int64) ops.DeleteSpec {
	var s ops.DeleteSpec
	for _, k := range keys {
		s.Keys = append(s.Keys, table.Row{k, nil, nil})
	}
	return s
}
