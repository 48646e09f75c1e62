package inspect

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// TestMaintainAllIndexesShown: a MemWAL whose details set Lance 13.1's
// maintain_all_indexes (the list then empty) says so; without it the
// document read as "maintains nothing".
func TestMaintainAllIndexesShown(t *testing.T) {
	ctx := context.Background()
	b := corpus(t, "memwal_1")
	if mw := build(t, b, 0).MemWal; mw == nil || mw.MaintainAllIndexes {
		t.Fatalf("corpus mem_wal %+v: want maintain_all_indexes false", mw)
	}
	f, naming, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var ixs []*pb.IndexMetadata
	for _, ix := range f.Indices {
		if ix.GetName() == meta.MemWalIndexName {
			d, err := memwal.Details(ix)
			if err != nil {
				t.Fatal(err)
			}
			d.MaintainedIndexes, d.MaintainAllIndexes = nil, proto.Bool(true)
			ix = proto.Clone(ix).(*pb.IndexMetadata)
			if ix.IndexDetails, err = memwal.EncodeDetails(d); err != nil {
				t.Fatal(err)
			}
		}
		ixs = append(ixs, ix)
	}
	m := proto.Clone(f.Manifest).(*pb.Manifest)
	m.Version++
	m.TransactionFile = ""
	data, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m, Indices: ixs})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(naming, m.Version), data); err != nil {
		t.Fatal(err)
	}
	mw := build(t, b, 0).MemWal
	if mw == nil || !mw.MaintainAllIndexes || len(mw.MaintainedIndexes) != 0 {
		t.Fatalf("mem_wal %+v: want maintain_all_indexes true and an empty list", mw)
	}
}
