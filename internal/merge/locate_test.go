package merge_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// The scan locator reports exactly the live rows whose keys are wanted,
// whatever the key type and whether fragments are key-sorted (merge-join)
// or not (hash fallback), and never a deleted row.
func TestScanLocator(t *testing.T) {
	for _, c := range []struct {
		name, spec string
		pk         []string
		row        func(i int) table.Row
		shuffle    bool
	}{
		{"int key, sorted", "id:int64,v:float64", []string{"id"}, func(i int) table.Row { return table.Row{int64(i * 3), 1.0} }, false},
		{"int key, shuffled", "id:int64,v:float64", []string{"id"}, func(i int) table.Row { return table.Row{int64(i*3 - 500), 1.0} }, true},
		{"timestamp key", "ts:timestamp,v:float64", []string{"ts"}, func(i int) table.Row { return table.Row{table.Timestamp(i), 1.0} }, true},
		{"string key", "name:string,v:float64", []string{"name"}, func(i int) table.Row { return table.Row{fmt.Sprintf("k%05d", i), 1.0} }, false},
		{"composite key, shuffled", "a:string,b:int64,v:float64", []string{"a", "b"}, func(i int) table.Row { return table.Row{fmt.Sprint("g", i%7), int64(i), 1.0} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := table.ParseSchema(c.spec, c.pk)
			if err != nil {
				t.Fatal(err)
			}
			tb := openTable(t, "mem://", nil)
			if _, err := tb.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			tb.MaxRowsPerFragment = 700 // several fragments
			rng := rand.New(rand.NewPCG(5, 6))
			var rows []table.Row
			for i := 0; i < 2000; i++ {
				rows = append(rows, c.row(i))
			}
			if c.shuffle {
				rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			}
			if _, err := tb.Append(ctx, rows); err != nil {
				t.Fatal(err)
			}
			// Delete some rows, then want a sample of keys (deleted ones
			// included, and keys absent from the table).
			var delKeys []table.Row
			for i := 0; i < 2000; i += 13 {
				delKeys = append(delKeys, rows[i])
			}
			if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Keys: delKeys}); err != nil {
				t.Fatal(err)
			}
			m := latest(t, tb)
			wantSet := map[string]bool{}
			for i := 0; i < 2000; i += 3 {
				wantSet[table.KeyOf(s, rows[i])] = true
			}
			wantSet[table.KeyOf(s, c.row(99999))] = true
			keys := make([]string, 0, len(wantSet))
			for k := range wantSet {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			ks, err := merge.NewKeySet(keys)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			err = merge.ScanLocator{}.Locate(ctx, tb.Bucket, m, ks, func(frag, off uint32, i int) error {
				got = append(got, fmt.Sprintf("%d/%d=%x", frag, off, keys[i]))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Fragments {
				err := table.ScanFragment(ctx, tb.Bucket, s, f, func(off uint32, r table.Row) error {
					if k := table.KeyOf(s, r); wantSet[k] {
						want = append(want, fmt.Sprintf("%d/%d=%x", f.Id, off, k))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("located %d rows, want %d\n got %v\nwant %v", len(got), len(want), head(got), head(want))
			}
		})
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }
