// Package trim retires SSTables and WAL entries once nothing needs them, and
// never sooner.
//
// An SSTable of shard s with generation g is retired only when all hold:
//   - g <= compacted_sstables[s]: its rows are in the base table;
//   - g <= index_catchup[N][s] for every maintained index N: each index holds
//     its rows. An ABSENT entry means not caught up: an index
//     that never recorded a position retains everything;
//   - g <= compacted_sstables[s] at every version that may still be read
//     with its SSTable view (see Readers): an LSM reader of version V reads
//     V's fragments plus the SSTables above V's compacted position.
//
// Which versions may still be read that way: the latest; every version
// that stopped being the latest less than ReaderGrace ago (a reader opens
// the newest version, and the grace covers the reads it started then);
// tagged versions; and the read version of any live in-flight marker (a
// job, or a reader that takes longer than the grace, registers one through
// package inflight). An older untagged version that cleanup still retains
// keeps its base files for time travel, not its SSTables: its view is the
// base table as of that version.
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

// Reader is the version with the lowest compacted position, for one shard,
// among the versions that may still be read with their SSTable view.
type Reader struct {
	Version   uint64 `json:"version"`
	Compacted uint64 `json:"compacted"`
	// Why the version may still be read (tagged, in the reader grace, an
	// in-flight marker).
	Why string `json:"why"`
	// Passing: the pin ends with time alone (the reader grace, a marker's
	// expiry), not only with a change to the table or its tags.
	Passing bool `json:"passing"`
}

// Readers holds a Reader per shard. A shard without one is read by no
// version older than the latest.
type Readers map[string]Reader

// Decide is the pure retirement rule. latest is the newest base manifest;
// readers the per-shard lowest compacted position of versions that may
// still be read (see the package doc); shards holds the newest manifest of
// each shard (nil entries: never claimed).
func Decide(latest *pb.Manifest, readers Readers, shards map[string]*pb.ShardManifest) []Decision {
	d := table.MemWal(latest)
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
			out = append(out, decideOne(d, readers, dec))
		}
	}
	return out
}

func decideOne(d *pb.MemWalIndexDetails, readers Readers, dec Decision) Decision {
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
	if r, ok := readers[s]; ok && g > r.Compacted {
		dec.Reason, dec.Detail = ReasonVersionRetention, fmt.Sprintf("version %d may still be read (%s) and merged only through %d", r.Version, r.Why, r.Compacted)
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
