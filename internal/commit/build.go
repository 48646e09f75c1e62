// Package commit publishes new versions of a Lance table with Lance's commit
// protocol: write the files, the transaction file, then put the manifest of
// version head+1 with put-if-absent. A lost race reads the transactions
// committed since the read version, classifies each against ours as Lance's
// conflict resolver does, rebases or re-plans, and tries again.
//
// BuildManifest is the one place a version's content is decided. It is pure:
// the head, the transaction, the read version's state and the commit time in,
// the next manifest file out.
package commit

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// WriterLibrary names compactord in the manifests it writes, so a reader
// working around a writer's known bugs never mistakes our versions for
// Lance's own.
const WriterLibrary = "compactord"

// WriterVersion is set by the build (the CLI's version string).
var WriterVersion = "dev"

// OpName is the operation's name in metrics, logs and errors: meta's name,
// or "none" for a version that recorded no transaction.
func OpName(t *pb.Transaction) string {
	if t == nil {
		return "none"
	}
	return meta.OperationName(t)
}

// BuildManifest returns version head+1: the head with txn applied, the MemWAL
// catch-up positions derived from the read version, and the feature flags
// recomputed. read is the state at txn.read_version, captured once when the
// commit started; it is never replaced by the head.
//
// INVARIANT: pure. The same arguments give the same bytes, which makes every
// attempt against one head byte-identical.
func BuildManifest(head *meta.ManifestFile, txn *pb.Transaction, read *meta.ManifestFile, now time.Time) (*meta.ManifestFile, error) {
	return BuildManifestExtra(head, txn, read, now, Extra{})
}

// Extra is what a version carries beyond its transaction: content Lance
// does not serialize in the transaction file, so other writers classify
// the version from the transaction alone.
type Extra struct {
	// FragReuse is the fragment-reuse index entry a deferred Rewrite
	// installs (Lance's Rewrite.frag_reuse_index, which its protobuf form
	// leaves out). It replaces the head's entry of that name.
	FragReuse *pb.IndexMetadata
}

// BuildManifestExtra is BuildManifest with the version's extra content.
func BuildManifestExtra(head *meta.ManifestFile, txn *pb.Transaction, read *meta.ManifestFile, now time.Time, extra Extra) (*meta.ManifestFile, error) {
	if err := meta.CheckWrite(head.Manifest); err != nil {
		return nil, err
	}
	hm := head.Manifest
	m := proto.Clone(hm).(*pb.Manifest)
	m.Version = hm.GetVersion() + 1
	// max_fragment_id never decreases: take it from the head's fragments
	// before the operation removes any (a head without the field had them).
	m.MaxFragmentId = maxFragmentID(hm)
	m.IndexSection, m.TransactionSection = nil, nil
	m.Tag = ""
	m.VersionAuxData = 0
	m.WriterVersion = &pb.Manifest_WriterVersion{Library: WriterLibrary, Version: WriterVersion}
	ts := now
	if prev := hm.GetTimestamp(); prev != nil && prev.AsTime().After(ts) {
		// A version is never older than its parent: cleanup's age rule
		// walks versions assuming it.
		ts = prev.AsTime()
	}
	m.Timestamp = timestamppb.New(ts)
	if hm.GetWriterFeatureFlags()&meta.FlagNoTxnFiles != 0 {
		m.TransactionFile = ""
	} else {
		m.TransactionFile = meta.TransactionName(txn.GetReadVersion(), txn.GetUuid())
	}
	indices := cloneIndices(head.Indices)

	switch op := txn.GetOperation().(type) {
	case *pb.Transaction_Append_:
		m.Fragments = append(m.Fragments, assignIDs(m, op.Append.GetFragments())...)
	case *pb.Transaction_Delete_:
		if err := applyFragmentChanges(m, op.Delete.GetUpdatedFragments(), op.Delete.GetDeletedFragmentIds()); err != nil {
			return nil, err
		}
	case *pb.Transaction_Update_:
		u := op.Update
		if err := applyFragmentChanges(m, u.GetUpdatedFragments(), u.GetRemovedFragmentIds()); err != nil {
			return nil, err
		}
		m.Fragments = append(m.Fragments, assignIDs(m, u.GetNewFragments())...)
		if len(u.GetCompactedSstables()) > 0 {
			var err error
			if indices, err = advanceCompacted(indices, u.GetCompactedSstables()); err != nil {
				return nil, err
			}
		}
	case *pb.Transaction_CreateIndex_:
		var err error
		if indices, err = applyCreateIndex(indices, op.CreateIndex); err != nil {
			return nil, err
		}
	case *pb.Transaction_Rewrite_:
		var err error
		if indices, err = applyRewrite(m, indices, op.Rewrite, extra.FragReuse); err != nil {
			return nil, err
		}
	case *pb.Transaction_ReserveFragments_:
		n := op.ReserveFragments.GetNumFragments()
		base := nextFragmentID(m)
		if n > 0 {
			m.MaxFragmentId = proto.Uint32(uint32(base) + n - 1)
		}
	default:
		return nil, fmt.Errorf("compactord does not commit %s transactions", OpName(txn))
	}
	if extra.FragReuse != nil && txn.GetRewrite() == nil {
		return nil, fmt.Errorf("a fragment-reuse index entry comes with a Rewrite only, not %s", OpName(txn))
	}
	m.MaxFragmentId = maxFragmentID(m)

	var err error
	if indices, err = deriveMemWal(read, head, m, indices, txn); err != nil {
		return nil, err
	}
	meta.RecomputeFlags(m, hm.GetReaderFeatureFlags(), hm.GetWriterFeatureFlags())
	out := &meta.ManifestFile{Manifest: m, Transaction: txn}
	if len(indices) > 0 || head.Indices != nil {
		out.Indices = indices
		if out.Indices == nil {
			out.Indices = []*pb.IndexMetadata{}
		}
	}
	return out, nil
}

func cloneIndices(ixs []*pb.IndexMetadata) []*pb.IndexMetadata {
	if ixs == nil {
		return nil
	}
	out := make([]*pb.IndexMetadata, len(ixs))
	copy(out, ixs) // entries are replaced, never mutated in place
	return out
}

func nextFragmentID(m *pb.Manifest) uint64 {
	if m.MaxFragmentId == nil {
		next := uint64(0)
		for _, f := range m.GetFragments() {
			if f.GetId() >= next {
				next = f.GetId() + 1
			}
		}
		return next
	}
	return uint64(m.GetMaxFragmentId()) + 1
}

// assignIDs gives new fragments the next ids, as Lance does at commit time.
func assignIDs(m *pb.Manifest, frags []*pb.DataFragment) []*pb.DataFragment {
	next := nextFragmentID(m)
	out := make([]*pb.DataFragment, len(frags))
	for i, f := range frags {
		c := proto.Clone(f).(*pb.DataFragment)
		c.Id = next
		next++
		out[i] = c
	}
	if len(frags) > 0 {
		m.MaxFragmentId = proto.Uint32(uint32(next - 1))
	}
	return out
}

func maxFragmentID(m *pb.Manifest) *uint32 {
	cur := m.MaxFragmentId
	for _, f := range m.GetFragments() {
		if cur == nil || uint32(f.GetId()) > *cur {
			cur = proto.Uint32(uint32(f.GetId()))
		}
	}
	return cur
}

// applyFragmentChanges replaces updated fragments by id and removes others.
// A fragment the transaction names must exist: the conflict check ran
// before this, so a missing one means the transaction is stale.
func applyFragmentChanges(m *pb.Manifest, updated []*pb.DataFragment, removed []uint64) error {
	byID := make(map[uint64]int, len(m.Fragments))
	for i, f := range m.Fragments {
		byID[f.GetId()] = i
	}
	gone := map[uint64]bool{}
	for _, id := range removed {
		if _, ok := byID[id]; !ok {
			return fmt.Errorf("fragment %d to remove is not in version %d", id, m.GetVersion()-1)
		}
		gone[id] = true
	}
	frags := make([]*pb.DataFragment, len(m.Fragments))
	copy(frags, m.Fragments)
	for _, u := range updated {
		i, ok := byID[u.GetId()]
		if !ok {
			return fmt.Errorf("fragment %d to update is not in version %d", u.GetId(), m.GetVersion()-1)
		}
		frags[i] = u
	}
	out := frags[:0]
	for _, f := range frags {
		if !gone[f.GetId()] {
			out = append(out, f)
		}
	}
	m.Fragments = out
	return nil
}

// applyCreateIndex removes the named segments (by uuid) and adds the new
// ones. A new segment joining an existing logical index must index the same
// fields with the same kind: one name never means two indexes.
func applyCreateIndex(ixs []*pb.IndexMetadata, op *pb.Transaction_CreateIndex) ([]*pb.IndexMetadata, error) {
	remove := map[string]bool{}
	for _, r := range op.GetRemovedIndices() {
		remove[meta.UUIDString(r.GetUuid())] = true
	}
	out := make([]*pb.IndexMetadata, 0, len(ixs)+len(op.GetNewIndices()))
	present := map[string]bool{}
	for _, ix := range ixs {
		id := meta.UUIDString(ix.GetUuid())
		present[id] = true
		if !remove[id] {
			out = append(out, ix)
		}
	}
	for id := range remove {
		if !present[id] {
			return nil, fmt.Errorf("index segment %s to replace is not in the head", id)
		}
	}
	for _, n := range op.GetNewIndices() {
		for _, ix := range out {
			if ix.GetName() != n.GetName() {
				continue
			}
			if meta.UUIDString(ix.GetUuid()) == meta.UUIDString(n.GetUuid()) {
				return nil, fmt.Errorf("index segment %s is already in the head", meta.UUIDString(n.GetUuid()))
			}
			if !slices.Equal(ix.GetFields(), n.GetFields()) || meta.IndexKind(ix) != meta.IndexKind(n) {
				return nil, fmt.Errorf("index %q: a new segment on fields %v (%s) disagrees with the existing one on fields %v (%s)",
					n.GetName(), n.GetFields(), meta.IndexKind(n), ix.GetFields(), meta.IndexKind(ix))
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// advanceCompacted records merged generations in the MemWAL index. A
// generation at or below the recorded one fails the whole commit: another
// merger landed it, and landing its rows twice would duplicate them.
func advanceCompacted(ixs []*pb.IndexMetadata, merged []*pb.CompactedSsTable) ([]*pb.IndexMetadata, error) {
	i := indexPos(ixs, meta.MemWalIndexName)
	if i < 0 {
		return nil, fmt.Errorf("update merges MemWAL generations but the table has no %s index", meta.MemWalIndexName)
	}
	d, err := memwal.Details(ixs[i])
	if err != nil {
		return nil, err
	}
	cur := memwal.Compacted(d)
	for _, c := range merged {
		id := meta.UUIDString(c.GetShardId())
		if c.GetGeneration() <= cur[id] {
			return nil, fmt.Errorf("shard %s: generation %d is already merged (recorded %d)", id, c.GetGeneration(), cur[id])
		}
		cur[id] = c.GetGeneration()
	}
	if d.CompactedSstables, err = memwal.CompactedList(cur); err != nil {
		return nil, err
	}
	return replaceMemWal(ixs, i, d)
}

func indexPos(ixs []*pb.IndexMetadata, name string) int {
	for i, ix := range ixs {
		if ix.GetName() == name {
			return i
		}
	}
	return -1
}

// replaceMemWal installs new MemWAL details under a new uuid: readers cache
// the index by uuid, so changed content under an old uuid would be missed.
// The uuid is derived from the old one and the new content, so retries of
// one commit produce the same bytes.
func replaceMemWal(ixs []*pb.IndexMetadata, i int, d *pb.MemWalIndexDetails) ([]*pb.IndexMetadata, error) {
	any, err := memwal.EncodeDetails(d)
	if err != nil {
		return nil, err
	}
	ix := proto.Clone(ixs[i]).(*pb.IndexMetadata)
	ix.IndexDetails = any
	ix.Uuid = derivedUUID(ixs[i].GetUuid(), any.GetValue())
	out := cloneIndices(ixs)
	out[i] = ix
	return out, nil
}

func sortedShards(maps ...map[string]uint64) []string {
	seen := map[string]bool{}
	for _, m := range maps {
		for s := range m {
			seen[s] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func fragmentSet(m *pb.Manifest) *roaring.Bitmap {
	bm := roaring.New()
	for _, f := range m.GetFragments() {
		bm.Add(uint32(f.GetId()))
	}
	return bm
}
