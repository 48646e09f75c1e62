package memwal

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// Index returns the MemWAL system index of a version, or nil.
func Index(ixs []*pb.IndexMetadata) *pb.IndexMetadata {
	for _, ix := range ixs {
		if ix.GetName() == meta.MemWalIndexName {
			return ix
		}
	}
	return nil
}

// Details decodes the MemWAL index's details.
func Details(ix *pb.IndexMetadata) (*pb.MemWalIndexDetails, error) {
	any := ix.GetIndexDetails()
	if !strings.EqualFold(any.GetTypeUrl(), meta.TypeURLMemWal) {
		return nil, fmt.Errorf("index %s: details are %q, not MemWAL details", ix.GetName(), any.GetTypeUrl())
	}
	d := &pb.MemWalIndexDetails{}
	if err := proto.Unmarshal(any.GetValue(), d); err != nil {
		return nil, fmt.Errorf("index %s: MemWAL details: %w", ix.GetName(), err)
	}
	return d, nil
}

// EncodeDetails packs details as Lance stores them.
func EncodeDetails(d *pb.MemWalIndexDetails) (*anypb.Any, error) {
	v, err := marshal.Marshal(d)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: meta.TypeURLMemWal, Value: v}, nil
}

// Compacted is compacted_sstables as a map from shard id to generation.
func Compacted(d *pb.MemWalIndexDetails) map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range d.GetCompactedSstables() {
		id := meta.UUIDString(c.GetShardId())
		if c.GetGeneration() > out[id] {
			out[id] = c.GetGeneration()
		}
	}
	return out
}

// Catchup is index_catchup as index name → shard id → generation. An index
// or shard absent from the map has no recorded catch-up: not caught up.
func Catchup(d *pb.MemWalIndexDetails) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, p := range d.GetIndexCatchup() {
		m := out[p.GetIndexName()]
		if m == nil {
			m = map[string]uint64{}
			out[p.GetIndexName()] = m
		}
		for _, c := range p.GetCaughtUpGenerations() {
			m[meta.UUIDString(c.GetShardId())] = c.GetGeneration()
		}
	}
	return out
}

// CompactedList renders a shard → generation map in Lance's repeated form,
// sorted by shard id so equal maps encode to equal bytes.
func CompactedList(m map[string]uint64) ([]*pb.CompactedSsTable, error) {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*pb.CompactedSsTable, 0, len(ids))
	for _, id := range ids {
		u, err := meta.ParseUUID(id)
		if err != nil {
			return nil, fmt.Errorf("shard id %q: %w", id, err)
		}
		out = append(out, &pb.CompactedSsTable{ShardId: u, Generation: m[id]})
	}
	return out, nil
}

// marshal encodes as the table's metadata is encoded (meta's), so that an
// unchanged value keeps its bytes.
var marshal = proto.MarshalOptions{Deterministic: true}

// Maintained is the set of base-table indexes the MemTables maintain, as
// names of indexes present in ixs, sorted. maintained_indexes alone is not
// it: Lance 13.1's maintain_all_indexes, set, means every index is
// maintained even though the list is empty, and a reader of only the list
// would take that as "none" and let trim retire generations no index has
// taken in. Set together with a non-empty list, the larger reading wins:
// more maintained indexes only makes trim and catch-up more careful.
// System indexes (MemWAL, fragment reuse) are never maintained copies.
func Maintained(d *pb.MemWalIndexDetails, ixs []*pb.IndexMetadata) []string {
	present := map[string]bool{}
	for _, ix := range ixs {
		if !meta.IsSystemIndex(ix) {
			present[ix.GetName()] = true
		}
	}
	set := map[string]bool{}
	if d.GetMaintainAllIndexes() {
		set = present
	}
	for _, n := range d.GetMaintainedIndexes() {
		if present[n] {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
