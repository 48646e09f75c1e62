package compact_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// Scattered deletions (runs of every length, deleted rows at batch edges,
// a row group split over several outputs) leave exactly the live rows,
// each once and with its values, in key order: the re-encoding path copies
// survivors run by run between deleted offsets.
func TestCompactScatteredDeletions(t *testing.T) {
	for _, c := range []struct {
		name         string
		batch        int
		target       uint64
		deleteChance float64
	}{
		{"sparse, small batches, split outputs", 7, 900, 0.1},
		{"dense, batch of one", 1, 5000, 0.7},
		{"runs at batch edges", 16, 1000, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "mem://"+testutil.UniqueName(t), 2, 1500)
			rng := rand.New(rand.NewPCG(9, uint64(c.batch)))
			var del []table.Row
			gone := map[int64]bool{}
			for k := int64(0); k < 3000; k++ {
				// Deleted rows at multiples of the batch size too, so runs
				// end exactly on batch edges.
				if rng.Float64() < c.deleteChance || (c.batch > 1 && k%int64(c.batch) == 0 && k%3 == 0) {
					del = append(del, table.Row{k})
					gone[k] = true
				}
			}
			if _, _, err := f.tb.Delete(context.Background(), f.head(), ops.DeleteSpec{Keys: del}); err != nil {
				t.Fatal(err)
			}
			res := f.run(f.compactor(compact.Config{TargetRowsPerFragment: c.target, DeletionThreshold: 0.01, BatchRows: c.batch, Parallelism: 1}))
			m := res.Manifest
			var prev int64 = -1
			seen := 0
			for _, fr := range m.Fragments {
				if fr.DeletionFile != nil || fr.PhysicalRows > c.target {
					t.Fatalf("output fragment %d: %d rows, deletion file %v", fr.Id, fr.PhysicalRows, fr.DeletionFile)
				}
				err := table.ScanFragment(context.Background(), f.tb.Bucket, m.Schema, fr, func(_ uint32, r table.Row) error {
					k := r[0].(int64)
					if gone[k] || k <= prev || r[2].(float64) != float64(k)/4 {
						t.Fatalf("row %v after key %d (deleted: %v)", r, prev, gone[k])
					}
					prev = k
					seen++
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if want := 3000 - len(gone); seen != want {
				t.Fatalf("%d live rows after compaction, want %d", seen, want)
			}
		})
	}
}
