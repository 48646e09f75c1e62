package commit

import (
	"bytes"
	"crypto/sha1"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// deriveMemWal recomputes index_catchup in the MemWAL index of the version
// being built, from the state at the transaction's read version.
//
// For each maintained index N that exists in the published list, per shard s:
//
//	C[s]          the compacted generation the new version records
//	creditable[s] min(compacted[s] at the read version, C[s])
//	proven        the read version has a fragment, every segment of N has a
//	              bitmap, and the read version's fragments ⊆ ∪ N's bitmaps
//	              (for a Rewrite, also: the read version's fragments with
//	              the rewritten ones swapped for the new ones ⊆ ∪ N's
//	              bitmaps, which is what an inline remap leaves)
//	prior[s]      the head's entry when N's segments are unchanged, else 0
//	catchup[N][s] = min(max(prior[s], proven ? creditable[s] : 0), C[s])
//
// An index that covers every fragment live at the read version holds every
// row merged by then, and a rewrite moves rows between fragments without
// losing them, so the credit stays true. Two rules that look simpler are
// wrong: judging coverage against the fragments live at commit time never
// fires while writers append, and a max-fragment-id watermark is unsafe
// once compaction turns fragments 1 and 2 into 3. Without the Rewrite
// clause an inline-remap compaction (new segments, bitmaps on the new
// fragments) withdrew every maintained index's position, and a table that
// then saw no other commit kept its merged generations forever: catch-up
// finds nothing to index and commits nothing.
//
// Every index is written for every shard, 0 included: an absent entry reads
// as "not caught up" to compactord and LanceDB, and as nothing else. Entries
// of indexes that no longer exist are dropped. When nothing changes, the
// MemWAL index stays byte-identical (same uuid).
func deriveMemWal(read, head *meta.ManifestFile, nextManifest *pb.Manifest, next []*pb.IndexMetadata, txn *pb.Transaction) ([]*pb.IndexMetadata, error) {
	i := indexPos(next, meta.MemWalIndexName)
	if i < 0 {
		return next, nil
	}
	d, err := memwal.Details(next[i])
	if err != nil {
		return nil, err
	}
	C := memwal.Compacted(d)
	readCompacted := map[string]uint64{}
	var readFrags *roaring.Bitmap
	if read != nil {
		if ri := memwal.Index(read.Indices); ri != nil {
			rd, err := memwal.Details(ri)
			if err != nil {
				return nil, err
			}
			readCompacted = memwal.Compacted(rd)
		}
		readFrags = fragmentSet(read.Manifest)
	}
	movedFrags := rewrittenSet(readFrags, head.Manifest, nextManifest, txn)
	var headPrior map[string]map[string]uint64
	if hi := memwal.Index(head.Indices); hi != nil {
		hd, err := memwal.Details(hi)
		if err != nil {
			return nil, err
		}
		headPrior = memwal.Catchup(hd)
	}
	sets := []map[string]uint64{C, readCompacted}
	for _, byShard := range headPrior {
		sets = append(sets, byShard)
	}
	shards := sortedShards(sets...)

	// A Rewrite's remapped segments hold the rows the segments they
	// replace held, at their new addresses: for the catch-up they are the
	// same segments.
	remapped := map[string]string{}
	for _, ri := range txn.GetRewrite().GetRewrittenIndices() {
		remapped[meta.UUIDString(ri.GetNewId())] = meta.UUIDString(ri.GetOldId())
	}
	var progress []*pb.IndexCatchupProgress
	// memwal.Maintained reads maintain_all_indexes too; it names only
	// indexes present in next, so a dropped index's entry goes.
	for _, name := range memwal.Maintained(d, next) {
		segsNext := meta.FindIndex(next, name)
		if len(segsNext) == 0 {
			continue // dropped: its entry goes
		}
		proven, err := covers(segsNext, readFrags)
		if err == nil && !proven && movedFrags != nil {
			proven, err = covers(segsNext, movedFrags)
		}
		if err != nil {
			return nil, err
		}
		unchanged := sameSegments(meta.FindIndex(head.Indices, name), segsNext, remapped)
		p := &pb.IndexCatchupProgress{IndexName: name}
		for _, s := range shards {
			prior := uint64(0)
			if unchanged {
				prior = headPrior[name][s]
			}
			credit := uint64(0)
			if proven {
				credit = min(readCompacted[s], C[s])
			}
			g := min(max(prior, credit), C[s])
			u, err := meta.ParseUUID(s)
			if err != nil {
				return nil, err
			}
			p.CaughtUpGenerations = append(p.CaughtUpGenerations, &pb.CompactedSsTable{ShardId: u, Generation: g})
		}
		progress = append(progress, p)
	}
	nd := proto.Clone(d).(*pb.MemWalIndexDetails)
	nd.IndexCatchup = progress
	before, err := marshal(d)
	if err != nil {
		return nil, err
	}
	after, err := marshal(nd)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(before, after) {
		return next, nil
	}
	return replaceMemWal(next, i, nd)
}

// rewrittenSet is, for a Rewrite, the read version's fragments with every
// group's old fragments swapped for the new ones (the fragments the built
// version has and the head had not); nil for any other transaction.
func rewrittenSet(readFrags *roaring.Bitmap, head, built *pb.Manifest, txn *pb.Transaction) *roaring.Bitmap {
	rw := txn.GetRewrite()
	if rw == nil || readFrags == nil || built == nil {
		return nil
	}
	out := readFrags.Clone()
	for _, g := range rw.GetGroups() {
		for _, of := range g.GetOldFragments() {
			out.Remove(uint32(of.GetId()))
		}
	}
	had := fragmentSet(head)
	for _, f := range built.GetFragments() {
		if !had.Contains(uint32(f.GetId())) {
			out.Add(uint32(f.GetId()))
		}
	}
	return out
}

func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

func sortedUnique(ss []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(ss)))
}

// covers reports whether the segments provably hold every row of the read
// version's fragments. An empty read version proves nothing (the empty set
// is a subset of everything, and says nothing about merged rows).
func covers(segs []*pb.IndexMetadata, readFrags *roaring.Bitmap) (bool, error) {
	if readFrags == nil || readFrags.IsEmpty() {
		return false, nil
	}
	union := roaring.New()
	for _, s := range segs {
		bm, known, err := meta.FragmentBitmap(s)
		if err != nil {
			return false, err
		}
		if !known {
			return false, nil
		}
		union.Or(bm)
	}
	return readFrags.AndCardinality(union) == readFrags.GetCardinality(), nil
}

// sameSegments: the same uuids with the same bitmaps. A bitmap narrowed in
// place under an old uuid is a change (the uuid alone would miss it). A
// segment of b that a Rewrite remapped from one of a (remapped: new uuid
// to old) is that segment.
func sameSegments(a, b []*pb.IndexMetadata, remapped map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	old := map[string]bool{}
	for _, o := range remapped {
		old[o] = true
	}
	// A segment of b that remaps one of a (new uuid to old) matches it
	// whatever their bitmaps: the rewrite swapped its fragments.
	key := func(ix *pb.IndexMetadata, isB bool) string {
		id := meta.UUIDString(ix.GetUuid())
		if o, ok := remapped[id]; ok && isB {
			return o + "\x00remapped"
		}
		if old[id] && !isB {
			return id + "\x00remapped"
		}
		return id + "\x00" + string(ix.GetFragmentBitmap())
	}
	ka := make([]string, len(a))
	kb := make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i], false), key(b[i], true)
	}
	sort.Strings(ka)
	sort.Strings(kb)
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// derivedUUID is a name-based UUID from a parent uuid and new content, so
// that a system index rebuilt from the same inputs gets the same uuid.
func derivedUUID(parent *pb.UUID, content []byte) *pb.UUID {
	ns, err := uuid.FromBytes(parent.GetUuid())
	if err != nil {
		ns = uuid.NameSpaceOID
	}
	id := uuid.NewHash(sha1.New(), ns, content, 5)
	return &pb.UUID{Uuid: id[:]}
}
