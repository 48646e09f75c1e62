package commit

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/catchup"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/table"
)

// systemIndexNamespace seeds the deterministic uuids of system-index
// segments, so that BuildManifest stays pure and two attempts of one
// transaction build byte-identical manifests.
var systemIndexNamespace = uuid.MustParse("6d1c3f0e-5b1a-4c8e-9f63-0c6f3d1a2b7e")

// OpName names a transaction's operation for logs, metrics and errors.
func OpName(t *pb.Transaction) string {
	switch t.GetOperation().(type) {
	case *pb.Transaction_Create:
		return "create"
	case *pb.Transaction_Append:
		return "append"
	case *pb.Transaction_Delete:
		return "delete"
	case *pb.Transaction_Rewrite:
		return "rewrite"
	case *pb.Transaction_CreateIndex:
		return "create_index"
	case *pb.Transaction_MergeSstables:
		return "merge_sstables"
	case *pb.Transaction_ConfigureMemWal:
		return "configure_mem_wal"
	case *pb.Transaction_ReserveFragments:
		return "reserve_fragments"
	}
	return "unknown"
}

// OpNames lists every operation name (for pre-created metric series).
var OpNames = []string{"create", "append", "delete", "rewrite", "create_index", "merge_sstables", "configure_mem_wal", "reserve_fragments"}

// BuildManifest returns the version that txn makes on top of head. read is
// the manifest at txn.read_version (nil only for creation).
//
// It is a pure function: every rule that decides what a version contains
// lives here or in what it calls (catch-up derivation, FRI bookkeeping), so
// two attempts against the same head build the same bytes.
// INVARIANT: head is never modified.
func BuildManifest(head *pb.Manifest, txn *pb.Transaction, read *pb.Manifest) (*pb.Manifest, error) {
	if _, ok := txn.GetOperation().(*pb.Transaction_Create); ok {
		if head != nil {
			return nil, &ConflictError{Class: ErrIncompatible, Ours: "create", Reason: "the table already exists"}
		}
		c := txn.GetCreate()
		if err := table.ValidateSchema(c.GetSchema()); err != nil {
			return nil, err
		}
		return &pb.Manifest{
			Version:         1,
			TimestampMicros: txn.TimestampMicros,
			Schema:          proto.Clone(c.Schema).(*pb.Schema),
			Config:          c.Config,
			TransactionPath: table.TransactionKey(txn.ReadVersion, txn.Uuid),
			TransactionUuid: txn.Uuid,
			Transaction:     txn,
		}, nil
	}
	if head == nil {
		return nil, fmt.Errorf("%s on a table that does not exist", OpName(txn))
	}
	next := shallowNext(head)
	next.Version = head.Version + 1
	next.TimestampMicros = txn.TimestampMicros
	next.ReadVersion = txn.ReadVersion
	next.TransactionPath = table.TransactionKey(txn.ReadVersion, txn.Uuid)
	next.TransactionUuid = txn.Uuid
	next.ParentTransactionUuid = head.TransactionUuid
	next.Transaction = txn

	var err error
	switch op := txn.GetOperation().(type) {
	case *pb.Transaction_Append:
		assignFragmentIDs(next, op.Append.Fragments)
	case *pb.Transaction_Delete:
		err = applyFragmentChanges(next, op.Delete.UpdatedFragments, op.Delete.RemovedFragmentIds)
	case *pb.Transaction_MergeSstables:
		err = applyMerge(next, op.MergeSstables)
	case *pb.Transaction_Rewrite:
		err = applyRewrite(head, read, next, op.Rewrite)
	case *pb.Transaction_CreateIndex:
		err = applyCreateIndex(next, op.CreateIndex)
	case *pb.Transaction_ConfigureMemWal:
		err = applyConfigureMemWal(next, op.ConfigureMemWal)
	case *pb.Transaction_ReserveFragments:
		n := op.ReserveFragments.NumFragments
		if n == 0 {
			return nil, fmt.Errorf("reserve fragments: zero fragments")
		}
		top := n - 1
		if next.MaxFragmentId != nil {
			top = *next.MaxFragmentId + n
		}
		next.MaxFragmentId = proto.Uint32(top)
	default:
		err = fmt.Errorf("transaction %s has no operation", txn.Uuid)
	}
	if err != nil {
		return nil, err
	}
	if err := deriveMemWal(read, head, next, txn); err != nil {
		return nil, err
	}
	return next, nil
}

// shallowNext copies head's header and its fragment and index slices, but
// shares the fragment and index messages. Cloning 100 000 fragments costs
// ~40 ms; sharing them keeps BuildManifest O(fragments) pointer copies.
// INVARIANT: BuildManifest never mutates a shared message: fragments are
// replaced, never edited, and an index is cloned by mutableIndex before any
// edit.
func shallowNext(head *pb.Manifest) *pb.Manifest {
	next := &pb.Manifest{
		Schema:        head.Schema,
		Fragments:     slices.Clone(head.Fragments),
		MaxFragmentId: head.MaxFragmentId,
		Indices:       slices.Clone(head.Indices),
		Config:        head.Config,
	}
	if head.MaxFragmentId != nil {
		next.MaxFragmentId = proto.Uint32(*head.MaxFragmentId)
	}
	return next
}

// mutableIndex returns the first segment named name, cloned and swapped
// into m so that it may be edited; nil when absent.
func mutableIndex(m *pb.Manifest, name string) *pb.IndexMetadata {
	for i, ix := range m.Indices {
		if ix.Name == name {
			c := proto.Clone(ix).(*pb.IndexMetadata)
			m.Indices[i] = c
			return c
		}
	}
	return nil
}

// assignFragmentIDs gives new fragments ids above max_fragment_id. Ids are
// assigned here, at build time, which is what makes Append compatible with
// every concurrent operation.
func assignFragmentIDs(m *pb.Manifest, frags []*pb.Fragment) []*pb.Fragment {
	out := make([]*pb.Fragment, 0, len(frags))
	for _, f := range frags {
		id := uint32(0)
		if m.MaxFragmentId != nil {
			id = *m.MaxFragmentId + 1
		}
		nf := proto.Clone(f).(*pb.Fragment)
		nf.Id = id
		m.MaxFragmentId = proto.Uint32(id)
		m.Fragments = append(m.Fragments, nf)
		out = append(out, nf)
	}
	return out
}

// applyFragmentChanges replaces updated fragments (new deletion files) and
// drops removed ones. Every fragment named must be live at head: a
// transaction that slipped past conflict classification fails here rather
// than resurrecting or losing rows.
func applyFragmentChanges(m *pb.Manifest, updated []*pb.Fragment, removed []uint32) error {
	pos := make(map[uint32]int, len(m.Fragments))
	for i, f := range m.Fragments {
		pos[f.Id] = i
	}
	for _, u := range updated {
		i, ok := pos[u.Id]
		if !ok {
			return fmt.Errorf("fragment %d is not live at version %d", u.Id, m.Version-1)
		}
		if u.DeletionFile != nil && u.DeletionFile.NumDeleted >= u.PhysicalRows {
			return fmt.Errorf("fragment %d: every row deleted but kept (it must be removed)", u.Id)
		}
		m.Fragments[i] = proto.Clone(u).(*pb.Fragment)
	}
	if len(removed) == 0 {
		return nil
	}
	drop := make(map[uint32]bool, len(removed))
	for _, id := range removed {
		if _, ok := pos[id]; !ok {
			return fmt.Errorf("fragment %d is not live at version %d", id, m.Version-1)
		}
		drop[id] = true
	}
	m.Fragments = slices.DeleteFunc(m.Fragments, func(f *pb.Fragment) bool { return drop[f.Id] })
	return nil
}

func applyMerge(m *pb.Manifest, op *pb.MergeSSTables) error {
	ix := mutableIndex(m, table.MemWalIndexName)
	if ix == nil || ix.GetMemWal() == nil {
		return &ConflictError{Class: ErrIncompatible, Ours: "merge_sstables", Reason: "the table has no MemWAL configured"}
	}
	d := ix.GetMemWal()
	if !slices.Contains(d.Shards, op.Shard) {
		return &ConflictError{Class: ErrIncompatible, Ours: "merge_sstables", Reason: fmt.Sprintf("shard %q is not configured", op.Shard)}
	}
	// Lance #8262: a proposal at or below the recorded position would merge
	// rows twice; it fails whole, before any row lands.
	if cur := d.CompactedSstables[op.Shard]; op.ThroughGeneration <= cur {
		return &ConflictError{Class: ErrIncompatible, Ours: "merge_sstables", Reason: fmt.Sprintf("shard %q generation %d is already merged (compacted through %d)", op.Shard, op.ThroughGeneration, cur)}
	}
	if err := applyFragmentChanges(m, op.UpdatedFragments, op.RemovedFragmentIds); err != nil {
		return err
	}
	assignFragmentIDs(m, op.NewFragments)
	if d.CompactedSstables == nil {
		d.CompactedSstables = map[string]uint64{}
	}
	d.CompactedSstables[op.Shard] = op.ThroughGeneration
	return nil
}

func applyConfigureMemWal(m *pb.Manifest, op *pb.ConfigureMemWal) error {
	if len(op.Shards) == 0 {
		return fmt.Errorf("configure MemWAL: no shards")
	}
	for _, n := range op.MaintainedIndexes {
		if table.FindIndex(m, n) == nil {
			return fmt.Errorf("configure MemWAL: maintained index %q does not exist", n)
		}
	}
	ix := mutableIndex(m, table.MemWalIndexName)
	if ix == nil {
		ix = &pb.IndexMetadata{Name: table.MemWalIndexName, Type: table.MemWalIndexName,
			Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{}}}
		m.Indices = append(m.Indices, ix)
	}
	d := ix.GetMemWal()
	d.Shards = slices.Clone(op.Shards)
	slices.Sort(d.Shards)
	d.Shards = slices.Compact(d.Shards)
	d.MaintainedIndexes = slices.Clone(op.MaintainedIndexes)
	slices.Sort(d.MaintainedIndexes)
	d.MaintainedIndexes = slices.Compact(d.MaintainedIndexes)
	// A configuration change is a change of the system index itself.
	ix.Uuid = ""
	return nil
}

func applyCreateIndex(m *pb.Manifest, op *pb.CreateIndex) error {
	removed := make(map[string]bool, len(op.RemovedIndexUuids))
	for _, u := range op.RemovedIndexUuids {
		removed[u] = true
	}
	found := 0
	m.Indices = slices.DeleteFunc(m.Indices, func(ix *pb.IndexMetadata) bool {
		if removed[ix.Uuid] {
			found++
			return true
		}
		return false
	})
	if found != len(removed) {
		return &ConflictError{Class: ErrRetryable, Ours: "create_index", Reason: "a segment it replaces is gone"}
	}
	for _, n := range op.CreatedNames {
		if table.FindIndex(m, n) != nil {
			return &ConflictError{Class: ErrRetryable, Ours: "create_index", Reason: fmt.Sprintf("index %q was created since the read version", n)}
		}
	}
	for _, ix := range op.NewIndices {
		if err := sameLogicalIndex(m, ix); err != nil {
			return err
		}
	}
	for _, ix := range op.NewIndices {
		if table.IsSystemIndex(ix) {
			if ix.Name != table.FragReuseIndexName {
				return fmt.Errorf("create index: %q cannot be written by CreateIndex", ix.Name)
			}
			// An FRI trim replaces the singleton.
			m.Indices = slices.DeleteFunc(m.Indices, func(o *pb.IndexMetadata) bool { return o.Name == ix.Name })
			if len(ix.GetFragReuse().GetVersions()) == 0 {
				continue
			}
		}
		m.Indices = append(m.Indices, proto.Clone(ix).(*pb.IndexMetadata))
	}
	return nil
}

// sameLogicalIndex checks that a new segment agrees with the segments of
// its name already in m: segments sharing a name are one logical index, on
// one field with one type, and a segment that disagrees would make lookups
// and catch-up mix two indices.
func sameLogicalIndex(m *pb.Manifest, seg *pb.IndexMetadata) error {
	if table.IsSystemIndex(seg) {
		return nil
	}
	for _, ix := range m.Indices {
		if ix.Name != seg.Name {
			continue
		}
		if ix.Type != seg.Type || !slices.Equal(ix.FieldIds, seg.FieldIds) {
			return fmt.Errorf("create index: segment %s of index %q is a %s over fields %v, but its existing segment %s is a %s over fields %v",
				seg.Uuid, seg.Name, seg.Type, seg.FieldIds, ix.Uuid, ix.Type, ix.FieldIds)
		}
		return nil
	}
	return nil
}

func applyRewrite(head, read, m *pb.Manifest, op *pb.Rewrite) error {
	old, err := liveOldFragments(head, read, op)
	if err != nil {
		return err
	}
	if err := applyFragmentChanges(m, nil, old); err != nil {
		return &ConflictError{Class: ErrRetryable, Ours: "rewrite", Reason: err.Error()}
	}
	var frv *pb.FragReuseVersion
	if v := op.GetFragReuseVersion(); v != nil {
		frv = proto.Clone(v).(*pb.FragReuseVersion)
	}
	for gi, g := range op.Groups {
		var assigned []*pb.Fragment
		if op.FragmentIdsReserved {
			for _, f := range g.NewFragments {
				if m.MaxFragmentId == nil || f.Id > *m.MaxFragmentId || table.FragmentByID(m, f.Id) != nil {
					return fmt.Errorf("rewrite: fragment id %d was not reserved", f.Id)
				}
				nf := proto.Clone(f).(*pb.Fragment)
				m.Fragments = append(m.Fragments, nf)
				assigned = append(assigned, nf)
			}
		} else {
			assigned = assignFragmentIDs(m, g.NewFragments)
		}
		// A rebase can delete every row of a new fragment: it keeps its id
		// (the row map counts it) but leaves the manifest.
		m.Fragments = slices.DeleteFunc(m.Fragments, func(f *pb.Fragment) bool {
			return f.DeletionFile != nil && f.DeletionFile.NumDeleted >= f.PhysicalRows
		})
		if frv != nil {
			if gi >= len(frv.Groups) || len(frv.Groups[gi].NewFragments) != len(assigned) {
				return fmt.Errorf("rewrite: FRI version does not match its groups")
			}
			for i, f := range assigned {
				frv.Groups[gi].NewFragments[i].Id = f.Id
			}
		}
	}
	if ri := op.GetRewrittenIndices(); ri != nil {
		return applyCreateIndex(m, &pb.CreateIndex{NewIndices: ri.NewIndices, RemovedIndexUuids: ri.RemovedIndexUuids})
	}
	if frv == nil {
		return nil
	}
	return addFragReuseVersion(head, m, frv)
}

// liveOldFragments returns the old fragments of a Rewrite that head still
// has. An old fragment that was live at the read version but is gone from
// head had every remaining row deleted by a Delete or MergeSSTables
// committed since (one that another Rewrite consumed is retryable in
// Classify and never gets here). The commit loop has rebased those
// deletions onto our new fragments (rebaseRewrite), so the fragment is
// skipped instead of failing the compaction and redoing it (Lance #6150,
// #4604). As evidence of that rebase, the group's new fragments must carry
// at least as many deleted rows as the vanished fragments had survivors;
// otherwise their rows would come back.
func liveOldFragments(head, read *pb.Manifest, op *pb.Rewrite) ([]uint32, error) {
	inHead := make(map[uint32]bool, len(head.Fragments))
	for _, f := range head.Fragments {
		inHead[f.Id] = true
	}
	var inRead map[uint32]bool
	var old []uint32
	for _, g := range op.Groups {
		var vanished uint64
		for _, f := range g.OldFragments {
			if inHead[f.Id] || read == nil {
				old = append(old, f.Id)
				continue
			}
			if inRead == nil {
				inRead = make(map[uint32]bool, len(read.Fragments))
				for _, rf := range read.Fragments {
					inRead[rf.Id] = true
				}
			}
			if !inRead[f.Id] {
				old = append(old, f.Id) // applyFragmentChanges reports it
				continue
			}
			vanished += table.LiveRows(f)
		}
		if vanished == 0 {
			continue
		}
		var deleted uint64
		for _, nf := range g.NewFragments {
			deleted += nf.GetDeletionFile().GetNumDeleted()
		}
		if deleted < vanished {
			return nil, &ConflictError{Class: ErrRetryable, Ours: "rewrite", Reason: "an old fragment was fully deleted since the read version and the rewrite was not rebased over it"}
		}
	}
	return old, nil
}

// addFragReuseVersion records a deferred compaction in __frag_reuse.
//
// removed_fragments is computed here, against head, after the load-time
// remap and from non-system indices only: fragments an index
// still covers that left the manifest because every row was deleted. They
// never enter a group, so without this their addresses would pass through
// the remap and come back as ghost rows (Lance #7374).
func addFragReuseVersion(head, m *pb.Manifest, v *pb.FragReuseVersion) error {
	prior := table.FragReuse(head).GetVersions()
	live := roaring.New()
	for _, f := range head.Fragments {
		live.Add(f.Id)
	}
	// Old fragments a rebased delete removed since the read are mapped by
	// their group (onto new fragments that carry the deletions); they must
	// not also be removed_fragments, which Compile rejects.
	for _, g := range v.Groups {
		for _, d := range g.OldFragments {
			live.Add(d.Id)
		}
	}
	// nil entries (unknown coverage) make Skip refuse to skip.
	bitmaps, err := fri.LoadCoverage(head.Indices, prior)
	if err != nil {
		return fmt.Errorf("fragment reuse: %w", err)
	}
	removed := fri.RemovedFragments(bitmaps, live)
	// Lance #7774: no index covers any rewritten fragment and nothing was
	// orphaned, so nobody will ever need this version.
	if fri.Skip(v.Groups, bitmaps, removed) {
		return nil
	}
	rb, err := removed.ToBytes()
	if err != nil {
		return err
	}
	v.RemovedFragments = rb
	v.DatasetVersion = m.Version
	ix := mutableIndex(m, table.FragReuseIndexName)
	if ix == nil {
		ix = &pb.IndexMetadata{Name: table.FragReuseIndexName, Type: table.FragReuseIndexName,
			Details: &pb.IndexMetadata_FragReuse{FragReuse: &pb.FragReuseIndexDetails{}}}
		m.Indices = append(m.Indices, ix)
	}
	d := ix.GetFragReuse()
	d.Versions = append(d.Versions, v)
	ix.Uuid = uuid.NewSHA1(systemIndexNamespace, []byte(m.TransactionUuid+"/"+table.FragReuseIndexName)).String()
	ix.DatasetVersion = m.Version
	return nil
}

// deriveMemWal runs the catch-up derivation (catchup.Derive: an index is
// credited with what the read version had merged and it covers) and gives the
// system segment a new identity only when its content changed, so a commit
// that changes nothing leaves it byte-identical.
func deriveMemWal(read, head, next *pb.Manifest, txn *pb.Transaction) error {
	if table.FindIndex(next, table.MemWalIndexName) == nil {
		return nil
	}
	d, changed, err := catchup.Derive(read, head, next)
	if err != nil {
		return err
	}
	ix := mutableIndex(next, table.MemWalIndexName)
	prev := table.FindIndex(head, table.MemWalIndexName)
	if !changed && ix.Uuid != "" && prev != nil && proto.Equal(prev.GetMemWal(), ix.GetMemWal()) {
		return nil
	}
	ix.Details = &pb.IndexMetadata_MemWal{MemWal: d}
	if prev != nil && prev.Uuid != "" && proto.Equal(prev.GetMemWal(), d) {
		ix.Uuid, ix.DatasetVersion = prev.Uuid, prev.DatasetVersion
		return nil
	}
	ix.Uuid = uuid.NewSHA1(systemIndexNamespace, []byte(txn.Uuid+"/"+table.MemWalIndexName)).String()
	ix.DatasetVersion = next.Version
	return nil
}
