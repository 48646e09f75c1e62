package compact_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func (f *fixture) deleteKeys(pred func(int64) bool, lo, hi int64) {
	f.t.Helper()
	spec := opsKeys(pred, lo, hi)
	if len(spec.Keys) == 0 {
		return
	}
	if _, _, err := f.tb.Delete(context.Background(), nil, spec); err != nil {
		f.t.Fatal(err)
	}
}

// Chained compactions (fragments 1-10 -> X, 11-20 -> Y, then X,21 -> Z)
// remap correctly through the whole chain: deleted rows map to deleted,
// untouched fragments pass through, and a group whose rows were all deleted
// (by a delete racing its compaction) maps to deleted, never to address 0,
// which is a real row here (Lance #9200).
func TestChainedCompactionsRemap(t *testing.T) {
	const rows = 50
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 22, rows)
	f.createIndex("by_id", "id", index.TypeBTree)
	f.createIndex("by_cat", "cat", index.TypeBitmap)
	orig := f.where(f.head())
	segDV := f.head().Version
	deleted := map[int64]bool{}
	del := func(pred func(int64) bool, lo, hi int64) {
		for k := lo; k < hi; k++ {
			if pred(k) {
				deleted[k] = true
			}
		}
		f.deleteKeys(pred, lo, hi)
	}
	del(func(k int64) bool { return k%7 == 0 }, 1*rows, 11*rows)
	resA := f.run(f.compactor(compact.Config{}), keysIDs(1, 11)...)
	x := newIDs(resA.Manifest, resA.Transaction)
	if len(x) != 1 {
		t.Fatalf("compaction A wrote %v", x)
	}
	del(func(k int64) bool { return k%11 == 0 }, 1*rows, 11*rows)
	del(func(k int64) bool { return k%13 == 0 }, 11*rows, 21*rows)

	// B reads 11-20, then every remaining row of 11-20 is deleted before it
	// commits: its whole group is deleted through the rebase.
	cB := f.compactor(compact.Config{})
	pB := f.prepare(cB, keysIDs(11, 21)...)
	del(func(int64) bool { return true }, 11*rows, 21*rows)
	resB, err := cB.Commit(context.Background(), pB)
	if err != nil {
		t.Fatal(err)
	}
	if !resB.Rebased {
		t.Fatal("compaction B was not rebased over the delete")
	}
	y := resB.Manifest.GetMaxFragmentId()
	if table.FragmentByID(resB.Manifest, y) != nil {
		t.Fatalf("fully deleted output %d is still live", y)
	}
	c := f.chain()
	for k := int64(11 * rows); k < 21*rows; k++ {
		a, ok := c.RemapFrom(orig[k], segDV)
		if ok && (a == 0 || uint32(a>>32) != y) {
			t.Fatalf("key %d: remapped to %x, outside the dead fragment %d", k, a, y)
		}
	}
	f.checkLookups("by_id", keysRange(10*rows, 22*rows))

	resC := f.run(f.compactor(compact.Config{}), 21, x[0])
	vs := table.FragReuse(resC.Manifest).GetVersions()
	if len(vs) != 3 || !slices.Equal(removedOf(t, vs[2]), []uint32{y}) {
		t.Fatalf("FRI after C: %d versions, last removed %v; want 3 and [%d]", len(vs), removedOf(t, vs[len(vs)-1]), y)
	}
	now := f.where(resC.Manifest)
	c = f.chain()
	for k, a := range orig {
		got, ok := c.RemapFrom(a, segDV)
		want, live := now[k]
		switch {
		case live != !deleted[k]:
			t.Fatalf("key %d: live=%v but deleted=%v", k, live, deleted[k])
		case !live && ok:
			t.Fatalf("key %d (deleted) remapped to %x", k, got)
		case live && (!ok || got != want):
			t.Fatalf("key %d: remapped to %x,%v; lives at %x", k, got, ok, want)
		}
		if k < rows && got != a {
			t.Fatalf("key %d of untouched fragment 0 moved from %x to %x", k, a, got)
		}
	}
	f.checkLookups("by_id", keysRange(-1, 22*rows+1))
	for i := 0; i < 5; i++ {
		cat := fmt.Sprintf("c%d", i)
		r, err := index.Lookup(context.Background(), f.tb.Bucket, resC.Manifest, "by_cat", cat, index.LookupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var want []uint64
		for k, a := range now {
			if fmt.Sprintf("c%d", k%5) == cat {
				want = append(want, a)
			}
		}
		slices.Sort(want)
		if !slices.Equal(r.Addrs(), want) {
			t.Fatalf("by_cat %s: %d rows, want %d", cat, len(r.Addrs()), len(want))
		}
	}
}

func keysIDs(lo, hi uint32) []uint32 {
	var out []uint32
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// Compactions of disjoint fragments both land: two deferred compactions, planned at
// the same version by two committers on two separately opened buckets (no
// shared cache), both land. Overlapping ones do not: the loser gets a
// retryable error and its files are removed.
func TestTwoDeferredCompactionsOnDisjointFragmentsBothLand(t *testing.T) {
	url := "file://" + t.TempDir()
	f1 := newFixture(t, url, 8, 100)
	f1.createIndex("by_id", "id", index.TypeBTree)
	f2 := openFixture(t, url)
	c1, c2 := f1.compactor(compact.Config{}), f2.compactor(compact.Config{})
	p1 := f1.prepare(c1, 0, 1, 2, 3)
	p2 := f2.prepare(c2, 4, 5, 6, 7)
	if p1.Read.Version != p2.Read.Version {
		t.Fatal("not planned at one version")
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, cp := range []struct {
		c *compact.Compactor
		p *compact.Prepared
	}{{c1, p1}, {c2, p2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = cp.c.Commit(context.Background(), cp.p)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("commits: %v, %v", errs[0], errs[1])
	}
	m := f1.head()
	if len(m.Fragments) != 2 || len(table.FragReuse(m).GetVersions()) != 2 {
		t.Fatalf("%d fragments, %d FRI versions; want 2 and 2", len(m.Fragments), len(table.FragReuse(m).GetVersions()))
	}
	f1.checkRows(800, func(int64) bool { return false })
	f1.checkLookups("by_id", keysRange(0, 800))

	// Overlapping: the second loses and cleans up.
	f1.appendKeys(800, 10)
	f1.appendKeys(810, 10)
	p1 = f1.prepare(c1, 8, 9)
	p2 = f2.prepare(c2, 8, 9)
	if _, err := c1.Commit(context.Background(), p1); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Commit(context.Background(), p2); !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("overlapping compaction: %v", err)
	}
	for _, file := range p2.Files {
		if _, err := f2.tb.Bucket.Attributes(context.Background(), file); !storage.IsNotFound(err) {
			t.Fatalf("file %s of the losing compaction is still there (%v)", file, err)
		}
	}
	f1.checkRows(820, func(int64) bool { return false })
}

// An inline remap racing a delete: the rewritten segments name rows the
// rebase then deletes; lookups still see exactly the live rows.
func TestInlineRemapRebasesOverCommittedDelete(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 4, 100)
	f.createIndex("by_id", "id", index.TypeBTree)
	c := f.compactor(compact.Config{InlineRemap: true})
	p := f.prepare(c)
	f.deleteKeys(func(k int64) bool { return k%3 == 0 }, 0, 400)
	res, err := c.Commit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Rebased {
		t.Fatal("not rebased")
	}
	f.checkRows(400, func(k int64) bool { return k%3 == 0 })
	f.checkLookups("by_id", keysRange(0, 400))
}
