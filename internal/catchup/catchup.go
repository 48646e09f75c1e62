// Package catchup derives, at commit time, how far each secondary index
// provably covers the rows that MemWAL merges landed in the base table
// (MemWalIndexDetails.index_catchup). The trimmer retires an SSTable only
// when every maintained index covers its generation, so a position that is
// too high loses rows from an index, and a position that is too low only
// retains SSTables longer.
//
// The rule (seed mem-wal-index-catchup) anchors the proof to the
// version the transaction read, R:
//
//	C[s]          = compacted_sstables[s] that the new version records
//	creditable[s] = min(R.compacted_sstables[s], C[s])
//	proven(N)     = R has >= 1 fragment, every segment of N has a known
//	                fragment bitmap, and R's fragment ids ⊆ ∪ bitmaps(N)
//	unchanged(N)  = N's segments (uuid, bitmap bytes) are the same set in the
//	                head and in the new version
//	prior[s]      = head.index_catchup[N][s] if unchanged(N), else 0
//	catchup[N][s] = min(max(prior[s], proven(N) ? creditable[s] : 0), C[s])
//
// An index that covers every fragment live at R holds every row merges had
// landed by R, and a later rewrite moves rows between fragments without
// losing them, so the conclusion stays true at the commit.
//
// Two simpler rules are WRONG and must not be reintroduced:
//
//   - Judging coverage against the fragments live at commit time. The index
//     was built at R but would be judged at the head: any append or merge
//     landing in between adds a fragment the index cannot cover, so on a
//     table taking writes the check never fires: appends after the
//     read must not block credit.
//   - A scalar max-fragment-id watermark per generation. Live fragments are
//     not a prefix of the id space: compaction rewrites F1, F2 into F3, so
//     {live : id <= watermark} shrinks or empties, and the empty set is a
//     subset of every index, including one that holds none of the rows. It
//     fails in the unsafe direction: coverage is a set, not a watermark.
package catchup

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

const (
	// MemWalIndexType is the type (and name) of the MemWAL system index.
	MemWalIndexType = "__mem_wal"
	// systemTypePrefix marks system indices; every other type is a user index.
	systemTypePrefix = "__"
)

// IsSystemIndex reports whether the segment belongs to a system index
// (__mem_wal, __frag_reuse, ...). System indices hold no table rows, so they
// are never given a catch-up position.
func IsSystemIndex(im *pb.IndexMetadata) bool {
	return strings.HasPrefix(im.GetType(), systemTypePrefix)
}

// Derive computes index_catchup for the manifest being built.
//
// read is the manifest at the transaction's read version (nil when there is
// none: table creation). head is the manifest the operation is applied on top
// of (nil is treated as an empty table). next is head with the operation
// applied: its index list and its __mem_wal compacted_sstables are final.
//
// It returns the MemWalIndexDetails to publish (next's, with index_catchup
// replaced) and whether it differs from next's current details. When it does
// not, the returned message is a copy of next's, so a commit that changes
// nothing re-publishes the system index byte for byte. When next has no
// __mem_wal index it returns (nil, false, nil): there is nothing to derive.
//
// Derive is a pure function of its arguments: it never mutates them, and the
// same inputs give the same output on every attempt (a retried commit
// must build the same manifest).
func Derive(read, head, next *pb.Manifest) (details *pb.MemWalIndexDetails, changed bool, err error) {
	cur, err := memWalDetails(next)
	if err != nil {
		return nil, false, fmt.Errorf("catchup: next version: %w", err)
	}
	if cur == nil {
		return nil, false, nil
	}
	headMW, err := memWalDetails(head)
	if err != nil {
		return nil, false, fmt.Errorf("catchup: head version %d: %w", head.GetVersion(), err)
	}
	readMW, err := memWalDetails(read)
	if err != nil {
		return nil, false, fmt.Errorf("catchup: read version %d: %w", read.GetVersion(), err)
	}

	catchup, err := derive(read, readMW, head, headMW, next, cur)
	if err != nil {
		return nil, false, fmt.Errorf("catchup: version %d: %w", next.GetVersion(), err)
	}

	out := proto.CloneOf(cur)
	out.IndexCatchup = catchup
	if proto.Equal(out, cur) {
		// Hand back next's own details (copied) rather than the rebuilt
		// ones, so unknown fields and encoding survive untouched.
		return proto.CloneOf(cur), false, nil
	}
	return out, true, nil
}

// derive returns the new index_catchup map (nil when nothing is recorded).
func derive(read *pb.Manifest, readMW *pb.MemWalIndexDetails, head *pb.Manifest, headMW *pb.MemWalIndexDetails,
	next *pb.Manifest, cur *pb.MemWalIndexDetails) (map[string]*pb.ShardGenerations, error) {
	compacted := cur.GetCompactedSstables()

	// Never-compacted table: record nothing. Every position would be
	// min(..., C[s]) = 0, and an absent entry is equivalent to 0 everywhere
	// it is read: the trimmer's bound is min(compacted[s], catchup[N][s]),
	// which is 0 whatever the entries say, and the next commit's prior for
	// an absent entry is 0. Recording nothing keeps the system index
	// byte-identical on tables that configure MemWAL and create indices
	// before their first merge. An absent entry still reads as "not caught
	// up" (IndexCaughtUp returns known=false), never as caught up.
	if !anyPositive(compacted) {
		return nil, nil
	}

	shards := shardList(cur)
	creditable := make([]uint64, len(shards))
	anyCredit := false
	readCompacted := readMW.GetCompactedSstables() // nil map reads as 0
	for i, s := range shards {
		creditable[i] = min(readCompacted[s], compacted[s])
		anyCredit = anyCredit || creditable[i] > 0
	}

	nextIdx, err := groupUserIndices(next)
	if err != nil {
		return nil, err
	}
	headIdx, err := groupUserIndices(head)
	if err != nil {
		return nil, fmt.Errorf("head version %d: %w", head.GetVersion(), err)
	}

	// R's fragment ids, built once and only if some index can use them.
	// An empty read version proves nothing, although the empty set is a
	// subset of every bitmap (all merged rows deleted credits nothing).
	var readFrags *roaring.Bitmap
	if anyCredit && len(read.GetFragments()) > 0 {
		readFrags = fragmentIDs(read.GetFragments())
	}

	out := make(map[string]*pb.ShardGenerations, len(nextIdx))
	// Sorted, so that even the error reported for bad input is the same on
	// every attempt.
	for _, name := range slices.Sorted(maps.Keys(nextIdx)) {
		segs := nextIdx[name]
		var prior map[string]uint64
		// Unchanged means uuid AND bitmap: an operation may prune a bitmap
		// in place and keep the uuid, and the old position must not survive
		// that (a bitmap pruned under the same uuid is a changed index).
		if sameSegments(headIdx[name], segs) {
			prior = headMW.GetIndexCatchup()[name].GetGenerations()
		}
		proven := false
		if readFrags != nil {
			proven, err = covers(readFrags, segs)
			if err != nil {
				return nil, fmt.Errorf("index %q: %w", name, err)
			}
		}
		// Every shard is written, 0 included: an absent entry would be read
		// as "unknown", and must never be what stands for a real position.
		gens := make(map[string]uint64, len(shards))
		for i, s := range shards {
			v := prior[s] // never lowered by an older read version
			if proven {
				v = max(v, creditable[i])
			}
			// Capped by what this commit records: a read version since
			// rolled back must not retire SSTables no live commit landed.
			gens[s] = min(v, compacted[s])
		}
		out[name] = &pb.ShardGenerations{Generations: gens}
	}
	return out, nil
}

// sameSegments reports whether a and b hold the same segments, compared as a
// set of (uuid, bitmap presence, bitmap bytes). Bytes, not decoded sets: a
// re-encoding that differs only in layout counts as a change, which can only
// lower a position, never raise one.
func sameSegments(a, b []*pb.IndexMetadata) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compareSegments)
	slices.SortFunc(b, compareSegments)
	for i := range a {
		if compareSegments(a[i], b[i]) != 0 {
			return false
		}
	}
	return true
}

func compareSegments(x, y *pb.IndexMetadata) int {
	if c := strings.Compare(x.GetUuid(), y.GetUuid()); c != 0 {
		return c
	}
	// An absent bitmap (unknown) sorts before, and differs from, a present one.
	if xn, yn := x.FragmentBitmap == nil, y.FragmentBitmap == nil; xn != yn {
		if xn {
			return -1
		}
		return 1
	}
	return bytes.Compare(x.FragmentBitmap, y.FragmentBitmap)
}

// groupUserIndices groups the manifest's non-system segments by name: each
// group is one logical index. Segments keep their manifest order.
func groupUserIndices(m *pb.Manifest) (map[string][]*pb.IndexMetadata, error) {
	groups := make(map[string][]*pb.IndexMetadata)
	for _, im := range m.GetIndices() {
		if IsSystemIndex(im) {
			continue
		}
		if im.GetName() == "" {
			return nil, fmt.Errorf("index segment %s (type %q) has no name", im.GetUuid(), im.GetType())
		}
		groups[im.GetName()] = append(groups[im.GetName()], im)
	}
	return groups, nil
}

// memWalDetails returns the manifest's __mem_wal details, or nil when the
// manifest (or the index) is absent. The index is a singleton.
func memWalDetails(m *pb.Manifest) (*pb.MemWalIndexDetails, error) {
	var found *pb.IndexMetadata
	for _, im := range m.GetIndices() {
		if im.GetType() != MemWalIndexType {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("two %s indices (%s, %s)", MemWalIndexType, found.GetUuid(), im.GetUuid())
		}
		found = im
	}
	if found == nil {
		return nil, nil
	}
	d := found.GetMemWal()
	if d == nil {
		return nil, errors.New(MemWalIndexType + " index " + found.GetUuid() + " has no mem_wal details")
	}
	return d, nil
}

// shardList returns the shards a position is written for: the configured
// shards plus any shard with a compacted position, sorted.
func shardList(d *pb.MemWalIndexDetails) []string {
	shards := slices.Clone(d.GetShards())
	for s := range d.GetCompactedSstables() {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	return slices.Compact(shards)
}

func anyPositive(m map[string]uint64) bool {
	for _, v := range m {
		if v > 0 {
			return true
		}
	}
	return false
}
