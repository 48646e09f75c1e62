package commit_test

import (
	"context"
	"errors"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Regression (found by the issue-8 fault campaign; Lance #8123 in a new
// shape): the put of version 2 landed but its response was lost, and the
// read-back failed too, so the outcome was unknown. The next attempt's
// head probe then failed, and Commit returned that plain error. The
// caller (ops.CommitOrClean) took it for a definite failure and deleted
// the data files of what was in fact the committed version 2: the table
// referenced missing files. Once a put's outcome is unknown, every later
// failure of the same Commit must be reported as ambiguous.
func TestUnresolvedPutThenFailedProbeIsAmbiguous(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	s := schema(t)
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	frags, files, err := tb.WriteFragments(ctx, s, rows(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	txn := tb.NewTxn(1)
	txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
	v2 := table.ManifestKey(2)
	// The put lands and reports a timeout; every read-back of version 2
	// fails; the second attempt's probe of version 2 fails.
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: v2, Nth: 1, Action: storage.LandThenFail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyPrefix: v2, Action: storage.Fail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpAttributes}, KeyPrefix: v2, Nth: 2, Action: storage.Fail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpList}, KeyPrefix: table.VersionsDir, Nth: 2, Action: storage.Fail(nil)})
	_, err = tb.CommitOrClean(ctx, txn, files)
	f.faulty.Clear()
	m, rerr := table.ReadManifest(ctx, f.bucket, 2)
	if rerr != nil {
		t.Fatalf("the put of version 2 was to land: %v", rerr)
	}
	if m.TransactionUuid != txn.Uuid {
		t.Fatal("version 2 is not ours")
	}
	var ae *commit.AmbiguousError
	if err != nil && !errors.As(err, &ae) {
		t.Errorf("Commit returned %v: a plain error after an unresolved put lets the caller delete a committed version's files", err)
	}
	for _, k := range files {
		if _, err := f.bucket.Attributes(ctx, k); err != nil {
			t.Errorf("data file %s of committed version 2 is gone: %v", k, err)
		}
	}
}
