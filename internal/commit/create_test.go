package commit

import (
	"errors"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/stores"
)

func version1(col string) *meta.ManifestFile {
	txn := NewTransaction(0)
	fields := []*pb.Field{{Name: col, Id: 0, ParentId: -1, LogicalType: "int64"}}
	txn.Operation = &pb.Transaction_Overwrite_{Overwrite: &pb.Transaction_Overwrite{Schema: fields}}
	return &meta.ManifestFile{
		Manifest:    &pb.Manifest{Version: 1, Fields: fields, TransactionFile: meta.TransactionName(0, txn.GetUuid())},
		Transaction: txn,
	}
}

// Version 1 is put-if-absent: the first creator wins, a second gets
// ErrAlreadyExists and leaves no transaction file behind, and a put whose
// response was lost is recognised as landed.
func TestCreateVersion1(t *testing.T) {
	ctx := t.Context()
	open := func() *faults.Faulty { return faults.NewFaulty(stores.Open(t, "mem://")) }

	b := open()
	first, second := version1("a"), version1("b")
	if err := CreateVersion1(ctx, b, first); err != nil {
		t.Fatalf("first create: %v", err)
	}
	err := CreateVersion1(ctx, b, second)
	if !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second create: %v, want ErrAlreadyExists", err)
	}
	if _, err := b.Get(ctx, meta.TransactionKey(second.Manifest.GetTransactionFile())); !storage.IsNotFound(err) {
		t.Errorf("the losing creator's transaction file: %v, want it removed", err)
	}
	f, err := meta.ReadVersion(ctx, b, meta.NamingV2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if txn, err := meta.ReadTransaction(ctx, b, f); err != nil || txn.GetUuid() != first.Transaction.GetUuid() {
		t.Fatalf("version 1's transaction: %v %v, want the first creator's", txn, err)
	}
	if v, _, err := meta.Latest(ctx, b); err != nil || v != 1 {
		t.Fatalf("Latest = %d, %v", v, err)
	}

	// The response of the put is lost after it landed: still created.
	b = open()
	b.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Nth: 1, Action: faults.LandThenFail(nil)})
	if err := CreateVersion1(ctx, b, version1("a")); err != nil {
		t.Fatalf("create whose response was lost: %v", err)
	}
	// The put failed and did not land: the error says so, with its cause.
	b = open()
	b.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Action: faults.Fail(faults.ErrInjectedTimeout)})
	if err := CreateVersion1(ctx, b, version1("a")); !errors.Is(err, faults.ErrInjected) || errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("create whose put failed: %v", err)
	}

	bad := version1("a")
	bad.Manifest.Version = 2
	if err := CreateVersion1(ctx, open(), bad); err == nil {
		t.Fatal("a manifest of version 2 was accepted as version 1")
	}
}
