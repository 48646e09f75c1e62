// Package trim retires SSTables and WAL entries once nothing needs them, and
// never sooner.
//
// An SSTable of shard s with generation g is retired only when all hold:
//   - g <= compacted_sstables[s]: its rows are in the base table;
//   - g <= index_catchup[N][s] for every maintained index N: each index holds
//     its rows. An ABSENT entry means not caught up (scenario 19): an index
//     that never recorded a position retains everything;
//   - g <= compacted_sstables[s] at the oldest retained base version: a
//     reader or restore of that version still needs the SSTable.
//
// WAL entries covered by a published flush (position <= the replay cursor)
// are deleted except the newest of them: deleting every entry would let a
// stalled writer write an old epoch into a freed position (Lance #6699;
// SlateDB's GC boundary RFC).
package trim

import (
	"fmt"
	"sort"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// Reasons an SSTable is retained.
const (
	ReasonNotMerged        = "not_merged"
	ReasonIndexLag         = "index_lag"
	ReasonVersionRetention = "version_retention"
)

// Reasons lists every retention reason (for pre-created metric series).
var Reasons = []string{ReasonNotMerged, ReasonIndexLag, ReasonVersionRetention}

// Decision is the verdict on one SSTable.
type Decision struct {
	Shard      string `json:"shard"`
	Generation uint64 `json:"generation"`
	Path       string `json:"path"`
	Bytes      uint64 `json:"bytes"`
	Retire     bool   `json:"retire"`
	// Reason is set when retained: one of the Reason constants.
	Reason string `json:"reason,omitempty"`
	// Index names the lagging index for ReasonIndexLag.
	Index  string `json:"index,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Decide is the pure retirement rule. latest is the newest base manifest;
// oldest carries, per shard, the lowest compacted position among retained
// versions that read the shard (see oldestReaders; the oldest retained
// manifest itself when every version has the MemWAL); shards holds the
// newest manifest of each shard (nil entries: never claimed).
func Decide(latest, oldest *pb.Manifest, shards map[string]*pb.ShardManifest) []Decision {
	d := table.MemWal(latest)
	var oldCompacted map[string]uint64
	if od := table.MemWal(oldest); od != nil {
		oldCompacted = od.CompactedSstables
	}
	var out []Decision
	names := make([]string, 0, len(shards))
	for s := range shards {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		sm := shards[s]
		if sm == nil {
			continue
		}
		for _, sst := range sm.Sstables {
			dec := Decision{Shard: s, Generation: sst.Generation, Path: sst.Path, Bytes: sst.Bytes}
			out = append(out, decideOne(d, oldCompacted, dec))
		}
	}
	return out
}

func decideOne(d *pb.MemWalIndexDetails, oldCompacted map[string]uint64, dec Decision) Decision {
	s, g := dec.Shard, dec.Generation
	if d == nil {
		dec.Reason, dec.Detail = ReasonNotMerged, "the table has no MemWAL configured"
		return dec
	}
	if c := d.CompactedSstables[s]; g > c {
		dec.Reason, dec.Detail = ReasonNotMerged, fmt.Sprintf("generation %d > compacted %d", g, c)
		return dec
	}
	maintained := append([]string(nil), d.MaintainedIndexes...)
	sort.Strings(maintained)
	for _, n := range maintained {
		pos, known := uint64(0), false
		if sg, ok := d.IndexCatchup[n]; ok {
			pos, known = sg.GetGenerations()[s]
		}
		switch {
		case !known:
			dec.Reason, dec.Index, dec.Detail = ReasonIndexLag, n, fmt.Sprintf("index %q has no catch-up entry for shard %q (absent means not caught up)", n, s)
			return dec
		case g > pos:
			dec.Reason, dec.Index, dec.Detail = ReasonIndexLag, n, fmt.Sprintf("index %q caught up to %d < generation %d", n, pos, g)
			return dec
		}
	}
	if oc := oldCompacted[s]; g > oc {
		dec.Reason, dec.Detail = ReasonVersionRetention, fmt.Sprintf("the oldest retained version merged only through %d", oc)
		return dec
	}
	dec.Retire = true
	return dec
}

// WALDeletions returns the WAL positions to delete: those at or below the
// replay cursor, except the newest of them.
func WALDeletions(positions []uint64, cursor uint64) []uint64 {
	var covered []uint64
	for _, p := range positions {
		if p <= cursor {
			covered = append(covered, p)
		}
	}
	sort.Slice(covered, func(i, j int) bool { return covered[i] < covered[j] })
	if len(covered) <= 1 {
		return nil
	}
	return covered[:len(covered)-1]
}
