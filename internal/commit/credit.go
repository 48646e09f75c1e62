package commit

import (
	"errors"
	"sort"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// ErrNothingToRecord: a record-only commit (Txn.RecordOnly) would have
// recorded no catch-up position above the head's, so nothing was put.
var ErrNothingToRecord = errors.New("no catch-up position to record")

// Advance is one MemWAL catch-up position a version records above its
// parent's.
type Advance struct {
	Index string `json:"index"`
	Shard string `json:"shard"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// CatchupAdvances lists the catch-up positions after records above those
// before records (an absent entry counts as 0), sorted by index then
// shard. Entries that fell or stayed are not listed: a record-only commit
// exists to raise a position, and only a rise is worth a version.
func CatchupAdvances(before, after []*pb.IndexMetadata) ([]Advance, error) {
	positions := func(ixs []*pb.IndexMetadata) (map[string]map[string]uint64, error) {
		ix := memwal.Index(ixs)
		if ix == nil {
			return nil, nil
		}
		d, err := memwal.Details(ix)
		if err != nil {
			return nil, err
		}
		return memwal.Catchup(d), nil
	}
	b, err := positions(before)
	if err != nil {
		return nil, err
	}
	a, err := positions(after)
	if err != nil {
		return nil, err
	}
	var out []Advance
	for name, byShard := range a {
		for shard, g := range byShard {
			if from := b[name][shard]; g > from {
				out = append(out, Advance{Index: name, Shard: shard, From: from, To: g})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].Shard < out[j].Shard
	})
	return out, nil
}

// CreditDue is what a record-only commit planned at read would record
// were it to land on read itself: the catch-up positions the derivation
// credits (a maintained index covering every fragment live at read earns
// read's compacted generations) above the ones read records. It is how a
// job finds that an index's coverage is proven while its record lags,
// e.g. after a remap withdrew the position (the commit that
// moved the index read fragments its new bitmaps no longer name), or when
// the last commits read versions the index did not yet cover.
//
// Pure: derived with the same rule BuildManifest applies to every commit.
func CreditDue(read *meta.ManifestFile) ([]Advance, error) {
	next, err := deriveMemWal(read, read, read.Manifest, cloneIndices(read.Indices), nil)
	if err != nil {
		return nil, err
	}
	return CatchupAdvances(read.Indices, next)
}

// NewRecordOnly is the transaction of a record-only commit read at
// readVersion: an empty CreateIndex. It adds and removes no index; the
// version it makes differs from its parent only by what BuildManifest
// derives, the MemWAL catch-up positions earned at readVersion.
//
// CreateIndex is the kind every writer already accepts around a MemWAL
// index change it cannot see from the transaction (a merge's Update, any
// Lance 12 commit re-deriving catch-up): Lance's resolver lets Append,
// Delete, Update and CreateIndex commit over a CreateIndex, and a Rewrite
// over one whose new indexes cover none of its fragments (none here; a
// CreateIndex naming the MemWAL index, which has no fragment bitmap, would
// send a remapping Rewrite back to retry). UpdateMemWalState is not an
// option: a LanceDB writer in flight fails incompatibly when it finds one.
func NewRecordOnly(readVersion uint64) *pb.Transaction {
	t := NewTransaction(readVersion)
	t.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{}}
	return t
}
