package lancewal_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/lancewal"
)

// TestEnsureIndexRacingCreatesOfOneName: two creations of one index name
// on different columns, started together, never both succeed: one commits
// and the other is refused naming the winner's column, whichever way the
// two interleave (both reading before either commits makes the commit loop
// find the other's segment; the loser's next round reads it and refuses).
func TestEnsureIndexRacingCreatesOfOneName(t *testing.T) {
	ctx := context.Background()
	for round := range 8 {
		tbl, err := lancewal.CreateTable(ctx, filepath.Join(t.TempDir(), "t.lance"), []lancewal.Column{
			{Name: "id", Type: "int64"}, {Name: "cat", Type: "int32", Nullable: true},
		}, "id")
		if err != nil {
			t.Fatal(err)
		}
		cols := [2]string{"id", "cat"}
		var res [2]lancewal.IndexResult
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i], errs[i] = tbl.EnsureIndex(ctx, "n_idx", cols[i], lancewal.BTree)
			}()
		}
		close(start)
		wg.Wait()
		ok := 0
		for i := range 2 {
			switch {
			case errs[i] == nil && res[i].Created:
				ok++
			case errs[i] != nil && strings.Contains(errs[i].Error(), "n_idx exists on "+cols[1-i]+" as btree"):
			default:
				t.Errorf("round %d: create on %s: %+v, %v", round, cols[i], res[i], errs[i])
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d creations succeeded, want exactly 1 (%v)", round, ok, errs)
		}
		_ = tbl.Close()
	}
}
