package commit

import (
	"fmt"
	"sort"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// Verdict is a Decision with the reason an operator reads.
type Verdict struct {
	Decision Decision
	Reason   string
}

// reasonAppendedKeys is the verdict of a MemWAL merge against an append
// with rows, retryable only because the appended keys are unknown: a merge
// that can read them (Txn.AppendClash) and finds none of its own among
// them is compatible.
const reasonAppendedKeys = "an append landed rows meanwhile whose keys the merge may also insert"

// reasonInsertedKeys is the same verdict against an update (a LanceDB
// merge-insert) that inserted rows without recording an inserted-key
// filter: a merge that reads the keys of the update's new fragments and
// finds none of its own is compatible (the fragments both changed were
// checked before).
const reasonInsertedKeys = "an update inserted rows meanwhile whose keys the merge may also insert"

// footprint is what a transaction touched, in the terms conflicts are
// decided in. Lance's resolver reasons the same way
// (rust/lance/src/io/commit/conflict_resolver.rs).
type footprint struct {
	// wholeTable: the version was replaced (overwrite, restore, clone), so
	// nothing planned against an older version still applies.
	wholeTable bool
	// schema: columns were added, dropped or retyped.
	schema bool
	// modified fragments keep their id but changed (deletion file, column
	// files, overlays); removed fragments left the table.
	modified, removed map[uint64]bool
	// moved: removed fragments whose surviving rows went to new fragments
	// (rewrite, update), so a row-level change planned on them must follow
	// the rows.
	moved map[uint64]bool
	// indexNames are the logical indexes whose segments changed, system
	// indexes included; rewrittenIndexes the uuids a Rewrite replaced.
	indexNames       map[string]bool
	rewrittenIndexes map[string]bool
	// merged is the MemWAL progress the transaction recorded, per shard.
	merged map[string]uint64
	// inserted is the key filter of a merge-insert's inserted rows.
	inserted *pb.Transaction_KeyExistenceFilter
	update   bool
	// inserts: the transaction added rows (new fragments) whose keys may
	// exist elsewhere; appends do not count (Lance's key is unenforced on
	// plain appends).
	inserts bool
	// appends: a plain append added fragments.
	appends bool
}

func fragIDs(fs []*pb.DataFragment) map[uint64]bool {
	m := make(map[uint64]bool, len(fs))
	for _, f := range fs {
		m[f.GetId()] = true
	}
	return m
}

func idSet(ids []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func footprintOf(t *pb.Transaction) footprint {
	fp := footprint{modified: map[uint64]bool{}, removed: map[uint64]bool{}, moved: map[uint64]bool{},
		indexNames: map[string]bool{}, rewrittenIndexes: map[string]bool{}, merged: map[string]uint64{}}
	addMerged := func(cs []*pb.CompactedSsTable) {
		for _, c := range cs {
			id := meta.UUIDString(c.GetShardId())
			fp.merged[id] = max(fp.merged[id], c.GetGeneration())
		}
		if len(cs) > 0 {
			fp.indexNames[meta.MemWalIndexName] = true
		}
	}
	switch op := t.GetOperation().(type) {
	case *pb.Transaction_Append_:
		fp.appends = len(op.Append.GetFragments()) > 0
	case *pb.Transaction_ReserveFragments_, *pb.Transaction_UpdateConfig_, *pb.Transaction_UpdateBases_:
	case *pb.Transaction_Delete_:
		fp.modified = fragIDs(op.Delete.GetUpdatedFragments())
		fp.removed = idSet(op.Delete.GetDeletedFragmentIds())
	case *pb.Transaction_Update_:
		u := op.Update
		fp.update = true
		fp.modified = fragIDs(u.GetUpdatedFragments())
		fp.removed = idSet(u.GetRemovedFragmentIds())
		fp.moved = idSet(u.GetRemovedFragmentIds())
		for id := range fp.modified {
			// Updated rows of a kept fragment were deleted there and
			// rewritten elsewhere.
			fp.moved[id] = true
		}
		addMerged(u.GetCompactedSstables())
		fp.inserted = u.InsertedRows
		fp.inserts = len(u.GetNewFragments()) > 0
	case *pb.Transaction_UpdateMemWalState_:
		addMerged(op.UpdateMemWalState.GetCompactedSstables())
	case *pb.Transaction_Rewrite_:
		rw := op.Rewrite
		olds := rw.GetOldFragments()
		for _, g := range rw.GetGroups() {
			olds = append(olds, g.GetOldFragments()...)
		}
		fp.removed = fragIDs(olds)
		fp.moved = fragIDs(olds)
		for _, ri := range rw.GetRewrittenIndices() {
			fp.rewrittenIndexes[meta.UUIDString(ri.GetOldId())] = true
		}
	case *pb.Transaction_CreateIndex_:
		for _, ix := range op.CreateIndex.GetNewIndices() {
			fp.indexNames[ix.GetName()] = true
		}
		for _, ix := range op.CreateIndex.GetRemovedIndices() {
			fp.indexNames[ix.GetName()] = true
		}
	case *pb.Transaction_Merge_:
		fp.schema = true
		fp.modified = fragIDs(op.Merge.GetFragments())
	case *pb.Transaction_Project_:
		fp.schema = true
	case *pb.Transaction_DataReplacement_:
		for _, r := range op.DataReplacement.GetReplacements() {
			fp.modified[r.GetFragmentId()] = true
		}
	case *pb.Transaction_DataOverlay_:
		for _, g := range op.DataOverlay.GetGroups() {
			fp.modified[g.GetFragmentId()] = true
		}
	default:
		// Overwrite, Restore, Clone, and anything newer than lance 12.
		fp.wholeTable = true
	}
	return fp
}

func intersect(a, b map[uint64]bool) []uint64 {
	var out []uint64
	for id := range a {
		if b[id] {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func union(ms ...map[uint64]bool) map[uint64]bool {
	out := map[uint64]bool{}
	for _, m := range ms {
		for id := range m {
			out[id] = true
		}
	}
	return out
}

// Classify decides how theirs, committed after our read version, bears on
// ours. theirs is nil when the version recorded no transaction; nothing is
// then known about it and ours re-plans.
//
// Every precondition ours relies on is checked here against what theirs
// did, not only at the read version: the fragments it changes still being
// as it read them, the index name it creates or drops not being changed
// meanwhile, the generations it merges not being merged by someone else.
func Classify(ours, theirs *pb.Transaction) Verdict {
	if theirs == nil {
		return Verdict{Retryable, "the version records no transaction, so nothing can be proven about it"}
	}
	o, t := footprintOf(ours), footprintOf(theirs)
	if t.wholeTable {
		return Verdict{Retryable, fmt.Sprintf("%s replaced the table", OpName(theirs))}
	}
	switch ours.GetOperation().(type) {
	case *pb.Transaction_Append_, *pb.Transaction_ReserveFragments_:
		// Lance's primary key is unenforced on plain appends; an append
		// only needs the schema it wrote its files with.
		if t.schema {
			return Verdict{Retryable, "the schema changed under the appended files"}
		}
		return Verdict{Compatible, ""}
	case *pb.Transaction_Delete_:
		return classifyDelete(o, t, theirs)
	case *pb.Transaction_CreateIndex_:
		return classifyCreateIndex(ours.GetCreateIndex(), o, t, theirs)
	case *pb.Transaction_Update_:
		return classifyUpdate(o, t, theirs)
	case *pb.Transaction_Rewrite_:
		return classifyRewrite(ours.GetRewrite(), o, t, theirs)
	}
	// Rewrite and the rest: any overlap re-plans.
	if ids := intersect(union(o.modified, o.removed), union(t.modified, t.removed)); len(ids) > 0 {
		return Verdict{Retryable, fmt.Sprintf("both changed fragments %v", ids)}
	}
	if t.schema {
		return Verdict{Retryable, "the schema changed"}
	}
	return Verdict{Compatible, ""}
}

func classifyDelete(o, t footprint, theirs *pb.Transaction) Verdict {
	if ids := intersect(union(o.modified, o.removed), t.moved); len(ids) > 0 {
		return Verdict{Retryable, fmt.Sprintf("rows of fragments %v moved to new fragments", ids)}
	}
	if ids := intersect(o.modified, union(t.modified, t.removed)); len(ids) > 0 {
		return Verdict{Retryable, fmt.Sprintf("both changed the deletions of fragments %v", ids)}
	}
	if ids := intersect(o.removed, union(t.modified, t.removed)); len(ids) > 0 {
		// Removing a whole fragment stays right whatever else happened to
		// it in place; one already gone is dropped from ours.
		return Verdict{Rebase, fmt.Sprintf("fragments %v also changed; removing them whole still holds", ids)}
	}
	return Verdict{Compatible, ""}
}

// classifyRewrite: a Delete that changed only deletion vectors of the
// rewritten fragments (or removed them whole) is rebased: its deleted rows
// follow the row map onto the new fragments. Anything else that touched
// them re-plans, as does an index change Lance's resolver retries on (a
// segment over rewritten fragments, a change of a remapped segment, of
// the fragment-reuse index).
func classifyRewrite(op *pb.Transaction_Rewrite, o, t footprint, theirs *pb.Transaction) Verdict {
	if t.schema {
		return Verdict{Retryable, "the schema changed"}
	}
	touched := union(t.modified, t.removed)
	if ids := intersect(o.removed, touched); len(ids) > 0 {
		if theirs.GetDelete() != nil {
			return Verdict{Rebase, fmt.Sprintf("rows of fragments %v were deleted; the deletes follow the rows", ids)}
		}
		return Verdict{Retryable, fmt.Sprintf("both changed fragments %v", ids)}
	}
	if t.indexNames[meta.FragReuseIndexName] {
		return Verdict{Retryable, "the fragment-reuse index changed meanwhile"}
	}
	for id := range t.rewrittenIndexes {
		for _, ri := range op.GetRewrittenIndices() {
			if meta.UUIDString(ri.GetOldId()) == id {
				return Verdict{Retryable, fmt.Sprintf("index segment %s was remapped meanwhile", id)}
			}
		}
	}
	if ci := theirs.GetCreateIndex(); ci != nil {
		for _, ix := range ci.GetRemovedIndices() {
			for _, ri := range op.GetRewrittenIndices() {
				if meta.UUIDString(ri.GetOldId()) == meta.UUIDString(ix.GetUuid()) {
					return Verdict{Retryable, fmt.Sprintf("index segment %s was replaced meanwhile", meta.UUIDString(ix.GetUuid()))}
				}
			}
		}
		for _, ix := range ci.GetNewIndices() {
			if meta.IsSystemIndex(ix) {
				continue
			}
			bm, known, _ := meta.FragmentBitmap(ix)
			for id := range o.removed {
				if !known || bm.Contains(uint32(id)) {
					return Verdict{Retryable, fmt.Sprintf("new segment of index %q covers rewritten fragment %d", ix.GetName(), id)}
				}
			}
		}
	}
	return Verdict{Compatible, ""}
}

func classifyCreateIndex(op *pb.Transaction_CreateIndex, o, t footprint, theirs *pb.Transaction) Verdict {
	for name := range o.indexNames {
		if t.indexNames[name] {
			return Verdict{Retryable, fmt.Sprintf("index %q changed meanwhile", name)}
		}
	}
	// Dropping an index relies on the MemWAL not maintaining it; a change
	// of the MemWAL configuration meanwhile may have started to.
	if len(op.GetRemovedIndices()) > 0 && len(op.GetNewIndices()) == 0 && t.indexNames[meta.MemWalIndexName] && len(t.merged) == 0 {
		return Verdict{Retryable, "the MemWAL configuration changed meanwhile; the indexes it maintains are checked again"}
	}
	for _, ix := range op.GetRemovedIndices() {
		if t.rewrittenIndexes[meta.UUIDString(ix.GetUuid())] {
			return Verdict{Retryable, fmt.Sprintf("segment %s was remapped by a rewrite", meta.UUIDString(ix.GetUuid()))}
		}
	}
	if len(t.moved) > 0 && len(t.rewrittenIndexes) > 0 {
		// A rewrite that remapped indexes in place: a new segment built
		// on the old addresses of its fragments would be stale.
		for _, ix := range op.GetNewIndices() {
			bm, _, _ := meta.FragmentBitmap(ix)
			for id := range t.moved {
				if bm.Contains(uint32(id)) {
					return Verdict{Retryable, fmt.Sprintf("fragment %d of the new segment was rewritten", id)}
				}
			}
		}
	}
	if v, ok := friRace(op, t, theirs); ok {
		return v
	}
	if t.schema {
		return Verdict{Retryable, "the schema changed"}
	}
	return Verdict{Compatible, ""}
}

// friRace decides the races between an FRI trim and a segment whose
// addresses the trimmed versions may remap. A trim keeps the versions some
// non-system segment of its read needs (fri.Trim), so it is only right
// for the segments it read: a segment added or replaced meanwhile
// (catch-up, physical remap, another instance's index job, LanceDB's
// optimize, a Rewrite remapping segments) may hold addresses in a version
// it drops. Conversely a new segment is built on the addresses of its
// read; a trim meanwhile (by compactord or LanceDB, both a CreateIndex of
// the FRI) dropped versions chosen without it. Either way the segment
// would cover fragments it holds no entries for, and LanceDB's
// delete-by-key and merge-insert would miss those rows. A deferred
// Rewrite that only appends an FRI version is no such race: every version
// of the read stays.
func friRace(op *pb.Transaction_CreateIndex, t footprint, theirs *pb.Transaction) (Verdict, bool) {
	if touchesFRI(op) {
		if ci := theirs.GetCreateIndex(); ci != nil {
			if ix := firstUserIndex(ci.GetNewIndices()); ix != nil {
				return Verdict{Retryable, fmt.Sprintf("a segment of index %q landed meanwhile; the FRI versions it needs are decided again", ix.GetName())}, true
			}
		}
		if len(t.rewrittenIndexes) > 0 {
			return Verdict{Retryable, "a rewrite remapped index segments meanwhile; the FRI versions they need are decided again"}, true
		}
		return Verdict{}, false
	}
	if ix := firstUserIndex(op.GetNewIndices()); ix != nil && theirs.GetCreateIndex() != nil && t.indexNames[meta.FragReuseIndexName] {
		return Verdict{Retryable, fmt.Sprintf("the fragment-reuse index was trimmed meanwhile; the new segment of index %q may hold addresses a dropped version remaps", ix.GetName())}, true
	}
	return Verdict{}, false
}

// touchesFRI reports whether op removes or adds the fragment-reuse index
// (an FRI trim).
func touchesFRI(op *pb.Transaction_CreateIndex) bool {
	for _, ixs := range [][]*pb.IndexMetadata{op.GetRemovedIndices(), op.GetNewIndices()} {
		if meta.FindIndex(ixs, meta.FragReuseIndexName) != nil {
			return true
		}
	}
	return false
}

func firstUserIndex(ixs []*pb.IndexMetadata) *pb.IndexMetadata {
	for _, ix := range ixs {
		if !meta.IsSystemIndex(ix) {
			return ix
		}
	}
	return nil
}

func classifyUpdate(o, t footprint, theirs *pb.Transaction) Verdict {
	for shard, g := range o.merged {
		if tg, ok := t.merged[shard]; ok {
			if tg >= g {
				return Verdict{Incompatible, fmt.Sprintf("shard %s generation %d was merged by another writer", shard, tg)}
			}
			return Verdict{Retryable, fmt.Sprintf("shard %s advanced to generation %d meanwhile", shard, tg)}
		}
	}
	if ids := intersect(union(o.modified, o.removed), union(t.modified, t.removed)); len(ids) > 0 {
		return Verdict{Retryable, fmt.Sprintf("both changed fragments %v", ids)}
	}
	// A MemWAL merge's rows supersede every base row of their keys, so
	// it must see the rows an append landed meanwhile: a key deleted and
	// added back while a generation holding it waited would otherwise be
	// live twice once the merge lands. The append's keys are not in its
	// transaction, so an append with rows makes the merge plan again (its
	// rows then supersede the appended ones), unless the merge reads the
	// appended keys and finds none of its own (Txn.AppendClash).
	if len(o.merged) > 0 && o.inserts && t.appends {
		return Verdict{Retryable, reasonAppendedKeys}
	}
	// A merge of another shard inserts keys of that shard only: MemWAL
	// sharding is a function of the primary key, so shards never share one.
	otherShard := len(o.merged) > 0 && len(t.merged) > 0
	// A merge-insert that recorded no key filter may insert any key, as may
	// ours without one: two such inserts of one key would both land.
	if t.update && !otherShard && o.inserts && t.inserts && (o.inserted == nil || t.inserted == nil) {
		if len(o.merged) > 0 {
			return Verdict{Retryable, reasonInsertedKeys}
		}
		return Verdict{Retryable, "both inserted rows and one records no inserted-key filter, so their keys may collide"}
	}
	if t.update && !otherShard && o.inserted != nil && t.inserted == nil {
		return Verdict{Retryable, "a concurrent update recorded no inserted-key filter, so its keys may collide"}
	}
	if t.update && !otherShard && o.inserted != nil && t.inserted != nil && filtersMayIntersect(o.inserted, t.inserted) {
		return Verdict{Retryable, "both inserted rows that may share primary keys"}
	}
	if t.schema {
		return Verdict{Retryable, "the schema changed"}
	}
	return Verdict{Compatible, ""}
}

// filtersMayIntersect compares two key filters. Exact sets compare exactly;
// anything else is assumed to intersect (a retry is safe, a missed
// duplicate key is not).
func filtersMayIntersect(a, b *pb.Transaction_KeyExistenceFilter) bool {
	ea, eb := a.GetExact(), b.GetExact()
	if ea == nil || eb == nil {
		return true
	}
	seen := make(map[uint64]bool, len(ea.GetKeyHashes()))
	for _, h := range ea.GetKeyHashes() {
		seen[h] = true
	}
	for _, h := range eb.GetKeyHashes() {
		if seen[h] {
			return true
		}
	}
	return false
}
