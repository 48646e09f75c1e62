package commit

import (
	"context"
	"errors"
	"reflect"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

const idxB = "00000000-0000-4000-8000-000000000002"

// TestCreditDue states, case by case, when a record-only commit at a read
// version is due and what it would record: the derivation's rule
// (coverage of every fragment live at the read version, capped by the
// read version's merged generations) above what the version records.
func TestCreditDue(t *testing.T) {
	type cm = map[string]uint64
	idx := func(frags ...uint32) *pb.IndexMetadata { return segment(t, "id_idx", idxA, frags) }
	cases := []struct {
		name string
		read *meta.ManifestFile
		want []Advance
	}{
		{
			name: "a covering index whose record lags is due the read version's merged generations",
			read: version(7, []uint64{3, 4}, idx(3, 4), memwalIndex(t, cm{shardA: 2}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}},
		},
		{
			name: "an absent entry lags like a 0",
			read: version(7, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 2, shardB: 5}, nil, "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}, {Index: "id_idx", Shard: shardB, From: 0, To: 5}},
		},
		{
			name: "only the shards that lag are due",
			read: version(7, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 2, shardB: 5}, map[string]cm{"id_idx": {shardA: 2, shardB: 1}}, "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardB, From: 1, To: 5}},
		},
		{
			name: "a record already at the merged position is not due",
			read: version(7, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 2}, map[string]cm{"id_idx": {shardA: 2}}, "id_idx")),
		},
		{
			name: "an index missing a live fragment proves nothing",
			read: version(7, []uint64{3, 4}, idx(3), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
		},
		{
			name: "segments are unioned: {3} and {4} cover {3, 4}",
			read: version(7, []uint64{3, 4}, idx(3), segment(t, "id_idx", idxB, []uint32{4}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}},
		},
		{
			name: "an empty read version proves nothing (the seed's rule: an emptied table keeps its SSTables)",
			read: version(7, nil, idx(), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
		},
		{
			name: "a segment without a bitmap proves nothing",
			read: version(7, []uint64{3}, segment(t, "id_idx", idxA, nil), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
		},
		{
			name: "an index the MemWAL does not maintain is never due",
			read: version(7, []uint64{3}, idx(3), segment(t, "cat_idx", idxB, []uint32{3}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}},
		},
		{
			name: "a maintained index that does not exist is never due",
			read: version(7, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 2}, nil, "id_idx", "gone_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}},
		},
		{
			name: "indexes are judged independently",
			read: version(7, []uint64{3, 4}, idx(3, 4), segment(t, "cat_idx", idxB, []uint32{3}), memwalIndex(t, cm{shardA: 2}, nil, "cat_idx", "id_idx")),
			want: []Advance{{Index: "id_idx", Shard: shardA, From: 0, To: 2}},
		},
		{
			name: "nothing merged, nothing due",
			read: version(7, []uint64{3}, idx(3), memwalIndex(t, nil, nil, "id_idx")),
		},
		{
			name: "no MemWAL, nothing due",
			read: version(7, []uint64{3}, idx(3)),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CreditDue(c.read)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("due %+v, want %+v", got, c.want)
			}
			// What is due is exactly what a record-only commit on the
			// read version itself records.
			next, err := BuildManifest(c.read, NewRecordOnly(c.read.Manifest.GetVersion()), c.read, t0)
			if err != nil {
				t.Fatal(err)
			}
			adv, err := CatchupAdvances(c.read.Indices, next.Indices)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(adv, c.want) {
				t.Fatalf("a record-only commit on the read version records %+v, want %+v", adv, c.want)
			}
		})
	}
}

// TestRecordOnlyOnHead: a record-only commit is built on the head like any
// other: its credit comes from the read version, capped by what the head
// records, carried over commits that left the index alone, and withdrawn
// by nothing it does itself.
func TestRecordOnlyOnHead(t *testing.T) {
	type cm = map[string]uint64
	idx := func(frags ...uint32) *pb.IndexMetadata { return segment(t, "id_idx", idxA, frags) }
	read := version(7, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 2}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx"))
	cases := []struct {
		name string
		head *meta.ManifestFile
		want cm
	}{
		{"appends since the read do not block the credit",
			version(9, []uint64{3, 4, 5}, idx(3), memwalIndex(t, cm{shardA: 2}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")), cm{shardA: 2}},
		{"a merge since the read is not credited (its rows are in fragments the read did not have)",
			version(9, []uint64{3, 4}, idx(3), memwalIndex(t, cm{shardA: 5}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")), cm{shardA: 2}},
		{"a higher position recorded meanwhile is never lowered",
			version(9, []uint64{3, 4}, idx(3, 4), memwalIndex(t, cm{shardA: 5}, map[string]cm{"id_idx": {shardA: 5}}, "id_idx")), cm{shardA: 5}},
		{"the head's merged position caps the credit (a restore meanwhile)",
			version(9, []uint64{3}, idx(3), memwalIndex(t, cm{shardA: 1}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")), cm{shardA: 1}},
		{"an index replaced meanwhile by one that does not cover the read version earns nothing",
			version(9, []uint64{3, 4}, segment(t, "id_idx", idxB, []uint32{4}), memwalIndex(t, cm{shardA: 2}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")), cm{shardA: 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, err := BuildManifest(c.head, NewRecordOnly(7), read, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := catchupOf(t, next)["id_idx"]; !reflect.DeepEqual(got, c.want) {
				t.Fatalf("id_idx caught up to %v, want %v", got, c.want)
			}
			if len(next.Manifest.GetFragments()) != len(c.head.Manifest.GetFragments()) || len(next.Indices) != len(c.head.Indices) {
				t.Fatalf("a record-only commit changed more than the MemWAL index")
			}
		})
	}
}

// TestRecordOnlyCommit: the loop puts a record-only version only when it
// raises a position over the head; otherwise it writes nothing and says
// ErrNothingToRecord.
func TestRecordOnlyCommit(t *testing.T) {
	type cm = map[string]uint64
	ctx := context.Background()
	lagging := version(1, []uint64{3}, segment(t, "id_idx", idxA, []uint32{3}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx"))
	c, b := loopTable(t, lagging)
	res, err := c.Commit(ctx, &Txn{Read: lagging, Naming: meta.NamingV2, Transaction: NewRecordOnly(1), RecordOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 2 || res.Transaction.GetCreateIndex() == nil {
		t.Fatalf("landed %d as %s, want version 2, create_index", res.Version, OpName(res.Transaction))
	}
	if got := catchupOf(t, res.Manifest)["id_idx"][shardA]; got != 2 {
		t.Fatalf("id_idx caught up to %d, want 2", got)
	}
	// The transaction file says what other writers classify: an empty
	// CreateIndex.
	f, err := meta.ReadVersion(ctx, b, meta.NamingV2, 2)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := meta.ReadTransaction(ctx, b, f)
	if err != nil {
		t.Fatal(err)
	}
	if ci := theirs.GetCreateIndex(); ci == nil || len(ci.GetNewIndices())+len(ci.GetRemovedIndices()) != 0 {
		t.Fatalf("transaction file holds %v, want an empty CreateIndex", theirs)
	}

	// A second record-only commit planned on the lagging version finds
	// the position recorded: nothing is put, no transaction file stays.
	txnFiles := func() int {
		n := 0
		if err := b.List(ctx, meta.TransactionsDir, func(storage.Attrs) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := txnFiles()
	_, err = c.Commit(ctx, &Txn{Read: lagging, Naming: meta.NamingV2, Transaction: NewRecordOnly(1), RecordOnly: true})
	if !errors.Is(err, ErrNothingToRecord) {
		t.Fatalf("second record-only commit: %v, want ErrNothingToRecord", err)
	}
	if v, _, err := meta.Latest(ctx, b); err != nil || v != 2 {
		t.Fatalf("latest %d (%v), want 2", v, err)
	}
	if after := txnFiles(); after != before {
		t.Fatalf("%d transaction files, then %d", before, after)
	}
}
