package compact_test

import (
	"context"
	"fmt"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// checkRows asserts that exactly the keys in [0, n) outside deleted are
// live, each once.
func (f *fixture) checkRows(n int64, deleted func(int64) bool) {
	f.t.Helper()
	live := f.where(f.head())
	for k := int64(0); k < n; k++ {
		if _, ok := live[k]; ok == deleted(k) {
			f.t.Fatalf("key %d: live=%v, deleted=%v", k, ok, deleted(k))
		}
	}
	if int64(len(live)) > n {
		f.t.Fatalf("%d live rows, at most %d expected", len(live), n)
	}
}

// assertRebased checks that a commit took the rebase path on its first
// put, not a retry or a re-plan.
func (f *fixture) assertRebased(ours, theirs string, rebased bool, attempts int) {
	f.t.Helper()
	if !rebased || attempts != 1 {
		f.t.Fatalf("%s vs %s: rebased=%v after %d attempts; want a rebase on the first attempt", ours, theirs, rebased, attempts)
	}
	if got := f.counter("compactord_commit_conflicts_total", "ours", ours, "theirs", theirs, "decision", "rebase"); got != 1 {
		f.t.Fatalf("conflicts{%s,%s,rebase} = %v, want 1", ours, theirs, got)
	}
	if got := f.counter("compactord_commit_rebases_total", "operation", ours); got != 1 {
		f.t.Fatalf("rebases{%s} = %v, want 1", ours, got)
	}
	for _, r := range []string{"retryable", "incompatible"} {
		if got := f.counter("compactord_commits_total", "operation", ours, "result", r); got != 0 {
			f.t.Fatalf("commits{%s,%s} = %v", ours, r, got)
		}
	}
}

// Our compaction against a delete committed after its read (Lance #6653:
// never re-plan against the head; Lance #6150/#4604 ask for this rebase): the Rewrite commits
// with the plan's read version and the commit loop applies the deletions to
// the new fragments through our row map. Nothing is redone.
func TestRewriteRebasesOverCommittedDelete(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wholeFragment bool
	}{
		{"some rows", false},
		{"whole fragment", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.ForEachStore(t, func(t *testing.T, url string) {
				f := newFixture(t, url, 4, 100)
				f.createIndex("by_id", "id", index.TypeBTree)
				c := f.compactor(compact.Config{})
				p := f.prepare(c)
				// A delete lands between the compaction's read and commit.
				deleted := func(k int64) bool { return k%7 == 0 }
				if tc.wholeFragment {
					deleted = func(k int64) bool { return k >= 200 && k < 300 }
				}
				f.deleteAt(nil, tc.wholeFragment)
				res, err := c.Commit(context.Background(), p)
				if err != nil {
					t.Fatalf("commit: %v", err)
				}
				if res.Transaction.ReadVersion != p.Read.Version {
					t.Fatalf("committed with read version %d, planned at %d", res.Transaction.ReadVersion, p.Read.Version)
				}
				f.assertRebased("rewrite", "delete", res.Rebased, res.Attempts)
				f.checkRows(400, deleted)
				f.checkLookups("by_id", keysRange(0, 400))
			})
		})
	}
}

// A delete planned before a compaction and committed after it: its offsets
// are translated through the compaction's row map.
func TestDeleteRebasesOverCommittedRewrite(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			testutil.ForEachStore(t, func(t *testing.T, url string) {
				f := newFixture(t, url, 4, 100)
				f.createIndex("by_id", "id", index.TypeBTree)
				read := f.head() // the delete's read version
				f.run(f.compactor(compact.Config{}))
				res := f.deleteAt(read, whole)
				deleted := func(k int64) bool { return k%7 == 0 }
				if whole {
					deleted = func(k int64) bool { return k >= 200 && k < 300 }
				}
				if res.Transaction.ReadVersion != read.Version {
					t.Fatalf("delete committed at read version %d, want %d", res.Transaction.ReadVersion, read.Version)
				}
				f.assertRebased("delete", "rewrite", res.Rebased, res.Attempts)
				f.checkRows(400, deleted)
				f.checkLookups("by_id", keysRange(0, 400))
			})
		})
	}
}

// deleteAt commits, planned at read (nil: the head), either the deletion
// of every key divisible by 7 or of the whole fragment 2.
func (f *fixture) deleteAt(read *pb.Manifest, whole bool) *commit.Result {
	f.t.Helper()
	spec := opsFragment(2)
	if !whole {
		spec = ops.DeleteSpec{}
		for k := int64(0); k < 400; k += 7 {
			spec.Keys = append(spec.Keys, table.Row{k, nil, nil})
		}
	}
	res, n, err := f.tb.Delete(context.Background(), read, spec)
	if err != nil || res == nil || n == 0 {
		f.t.Fatalf("delete: %v (matched %d)", err, n)
	}
	return res
}
