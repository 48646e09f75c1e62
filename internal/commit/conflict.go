package commit

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// Decision is how our transaction relates to one committed after our read.
type Decision int

const (
	// Compatible: commit on top of it unchanged.
	Compatible Decision = iota
	// Rebase: commit on top of it after rewriting our transaction.
	Rebase
	// Retryable: the job must re-plan from a fresh read.
	Retryable
	// Incompatible: the job can never commit.
	Incompatible
)

func (d Decision) String() string {
	return [...]string{"compatible", "rebase", "retryable", "incompatible"}[d]
}

// Verdict is a Decision with its reason.
type Verdict struct {
	Decision Decision
	Reason   string
}

// fragmentSets summarises which fragments an operation reads or changes.
type fragmentSets struct {
	changed  *roaring.Bitmap // deletion files replaced or fragment removed
	consumed *roaring.Bitmap // rewritten away (old fragments of a Rewrite)
}

func setsOf(t *pb.Transaction) fragmentSets {
	s := fragmentSets{changed: roaring.New(), consumed: roaring.New()}
	add := func(upd []*pb.Fragment, rem []uint32) {
		for _, f := range upd {
			s.changed.Add(f.Id)
		}
		s.changed.AddMany(rem)
	}
	switch op := t.GetOperation().(type) {
	case *pb.Transaction_Delete:
		add(op.Delete.UpdatedFragments, op.Delete.RemovedFragmentIds)
	case *pb.Transaction_MergeSstables:
		add(op.MergeSstables.UpdatedFragments, op.MergeSstables.RemovedFragmentIds)
	case *pb.Transaction_Rewrite:
		for _, g := range op.Rewrite.Groups {
			for _, f := range g.OldFragments {
				s.consumed.Add(f.Id)
			}
		}
	}
	return s
}

func indexBitmapsIntersect(ixs []*pb.IndexMetadata, frags *roaring.Bitmap) bool {
	for _, ix := range ixs {
		if ix.FragmentBitmap == nil {
			return true // unknown coverage: assume the worst
		}
		bm := roaring.New()
		if err := bm.UnmarshalBinary(ix.FragmentBitmap); err != nil || bm.Intersects(frags) {
			return true
		}
	}
	return false
}

func touchesSystem(ixs []*pb.IndexMetadata, name string) bool {
	for _, ix := range ixs {
		if ix.Name == name {
			return true
		}
	}
	return false
}

// Classify decides how ours relates to theirs, a transaction committed after
// our read version: compatible when no fact ours relied on changed, a
// rebase when the change can be folded into ours exactly, retryable when
// ours must be re-planned, incompatible when it can never commit.
func Classify(ours, theirs *pb.Transaction) Verdict {
	o, t := setsOf(ours), setsOf(theirs)
	ok := Verdict{Decision: Compatible}
	retry := func(f string, a ...any) Verdict { return Verdict{Retryable, fmt.Sprintf(f, a...)} }

	if _, isCreate := theirs.GetOperation().(*pb.Transaction_Create); isCreate {
		return Verdict{Incompatible, "the table was re-created"}
	}
	switch op := ours.GetOperation().(type) {
	case *pb.Transaction_Create:
		return Verdict{Incompatible, "the table already exists"}

	case *pb.Transaction_ReserveFragments:
		return ok

	case *pb.Transaction_Append:
		// An append checked that its keys were absent at the read version;
		// an append or merge since may have inserted one of them.
		if tk, inserts := insertedKeys(theirs); inserts && keysMayIntersect(op.Append.GetKeys(), tk) {
			return retry("a %s of primary keys this append may share committed since our read", OpName(theirs))
		}
		return ok

	case *pb.Transaction_Delete, *pb.Transaction_MergeSstables:
		if m := ours.GetMergeSstables(); m != nil {
			if tm := theirs.GetMergeSstables(); tm != nil && tm.Shard == m.Shard {
				if tm.ThroughGeneration >= m.ThroughGeneration {
					return Verdict{Incompatible, fmt.Sprintf("shard %q already merged through generation %d", m.Shard, tm.ThroughGeneration)}
				}
				return retry("shard %q merged through generation %d since our read", m.Shard, tm.ThroughGeneration)
			}
			if theirs.GetConfigureMemWal() != nil {
				return retry("the MemWAL configuration changed")
			}
			// The merge found the base rows of its keys at the read
			// version; an append or a merge of another shard since may
			// have inserted one of them.
			if tk, inserts := insertedKeys(theirs); inserts && keysMayIntersect(m.GetKeys(), tk) {
				return retry("a %s of primary keys this merge may share committed since our read", OpName(theirs))
			}
		}
		if o.changed.Intersects(t.consumed) {
			return Verdict{Rebase, "a compaction rewrote fragments we delete from; translate offsets through its row map"}
		}
		if o.changed.Intersects(t.changed) {
			return Verdict{Rebase, "deletions on the same fragments; union the bitmaps"}
		}
		return ok

	case *pb.Transaction_Rewrite:
		if o.consumed.Intersects(t.consumed) {
			return retry("another compaction rewrote the same fragments")
		}
		if o.consumed.Intersects(t.changed) {
			return Verdict{Rebase, "rows of our old fragments were deleted; apply them to our new fragments"}
		}
		if ri := op.Rewrite.GetRewrittenIndices(); ri != nil {
			// Inline remap replaced segments as we read them; a segment
			// added or replaced since may still hold our old addresses.
			if ci := theirs.GetCreateIndex(); ci != nil && indexBitmapsIntersect(ci.NewIndices, o.consumed) {
				return retry("an index over our old fragments changed since our read")
			}
			if tr := theirs.GetRewrite().GetRewrittenIndices(); tr != nil && overlaps(ri.RemovedIndexUuids, tr.RemovedIndexUuids) {
				return retry("another inline remap replaced the same index segments")
			}
		}
		return ok

	case *pb.Transaction_CreateIndex:
		ci := op.CreateIndex
		// A new logical index was absent at the read version; a segment
		// of that name added since means someone else created it.
		for _, n := range addedIndexNames(theirs) {
			if slices.Contains(ci.CreatedNames, n) {
				return retry("index %q was created since our read", n)
			}
		}
		if tr := theirs.GetRewrite(); tr != nil {
			if tr.GetFragReuseVersion() != nil {
				if touchesSystem(ci.NewIndices, table.FragReuseIndexName) {
					return retry("our FRI trim would drop the FRI version it added")
				}
				return ok // our segment's data predates it; the FRI remaps it
			}
			if indexBitmapsIntersect(ci.NewIndices, t.consumed) {
				return retry("a compaction with inline remap rewrote fragments our index covers")
			}
			return ok
		}
		if tc := theirs.GetCreateIndex(); tc != nil {
			// Our segment's data may predate FRI versions that their trim
			// dropped; it could no longer be remapped.
			if touchesSystem(tc.NewIndices, table.FragReuseIndexName) && hasUserIndex(ci.NewIndices) {
				return retry("the FRI was trimmed since our read; our segment may need a version it dropped")
			}
			// The converse: our trim was decided without a segment added
			// since our read (a build or catch-up that read earlier), which
			// may need a version we drop.
			if touchesSystem(ci.NewIndices, table.FragReuseIndexName) && hasUserIndex(tc.NewIndices) {
				return retry("an index segment was added since our read; it may need an FRI version our trim drops")
			}
			if overlaps(ci.RemovedIndexUuids, tc.RemovedIndexUuids) {
				return retry("the segments we replace were replaced since our read")
			}
			if touchesSystem(ci.NewIndices, table.FragReuseIndexName) && touchesSystem(tc.NewIndices, table.FragReuseIndexName) {
				return retry("two writes of the FRI singleton")
			}
		}
		return ok

	case *pb.Transaction_ConfigureMemWal:
		if theirs.GetConfigureMemWal() != nil {
			return retry("two writes of the MemWAL configuration")
		}
		return ok
	}
	return Verdict{Incompatible, "unknown operation"}
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func hasUserIndex(ixs []*pb.IndexMetadata) bool {
	for _, ix := range ixs {
		if !table.IsSystemIndex(ix) {
			return true
		}
	}
	return false
}

// addedIndexNames lists the names of the segments a transaction adds.
func addedIndexNames(t *pb.Transaction) []string {
	var segs []*pb.IndexMetadata
	switch op := t.GetOperation().(type) {
	case *pb.Transaction_CreateIndex:
		segs = op.CreateIndex.NewIndices
	case *pb.Transaction_Rewrite:
		segs = op.Rewrite.GetRewrittenIndices().GetNewIndices()
	}
	var out []string
	for _, s := range segs {
		out = append(out, s.Name)
	}
	return out
}
