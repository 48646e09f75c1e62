package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Snapshot is what a sync learns about a table: the status API's view and
// the source of the LSM-debt gauges.
type Snapshot struct {
	// Format is the table's format: "lance" (FormatLance) or
	// "compactord.v1" (FormatPrivate).
	Format       string       `json:"format"`
	Version      uint64       `json:"version"`
	Timestamp    time.Time    `json:"timestamp"`
	Operation    string       `json:"operation,omitempty"`
	Fragments    int          `json:"fragments"`
	PhysicalRows uint64       `json:"physical_rows"`
	DeletedRows  uint64       `json:"deleted_rows"`
	DataBytes    uint64       `json:"data_bytes"`
	Indices      []IndexInfo  `json:"indices"`
	MemWal       bool         `json:"mem_wal"`
	Shards       []ShardInfo  `json:"shards"`
	FRI          []FRIVersion `json:"fri_versions"`
	// PendingGenerations sums ShardInfo.Pending.
	PendingGenerations uint64 `json:"pending_generations"`
}

// IndexInfo is one logical index.
type IndexInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Segments int    `json:"segments"`
	// OldestDatasetVersion is the oldest segment's data version.
	OldestDatasetVersion uint64 `json:"oldest_dataset_version"`
	Maintained           bool   `json:"maintained"`
}

// ShardInfo is one MemWAL shard, with its generations as the timeline on
// the status page draws them: trimmed ≤ caught up ≤ merged ≤ flushed.
type ShardInfo struct {
	ID string `json:"id"`
	// Claimed is false while no writer ever claimed the shard.
	Claimed     bool   `json:"claimed"`
	WriterEpoch uint64 `json:"writer_epoch"`
	// ManifestVersion is the shard manifest's version.
	ManifestVersion uint64 `json:"manifest_version"`
	// Flushed is the newest flushed generation (0: none).
	Flushed uint64 `json:"flushed"`
	// Merged is compacted_sstables[shard] in the table's __mem_wal index.
	Merged uint64 `json:"merged"`
	// CaughtUp is the minimum over maintained indices of their catch-up
	// position (an absent entry is 0); Merged when none is maintained.
	CaughtUp uint64 `json:"caught_up"`
	// Trimmed is the highest generation ever trimmed.
	Trimmed uint64 `json:"trimmed"`
	// Pending is Flushed - Merged.
	Pending      uint64 `json:"pending_generations"`
	SSTables     int    `json:"sstables"`
	SSTableBytes uint64 `json:"sstable_bytes"`
	// Retained is SSTable bytes by why they are kept.
	Retained map[string]uint64 `json:"retained_bytes"`
	// Lag is, per index with a catch-up entry or maintained, Merged minus
	// its catch-up position.
	Lag map[string]uint64 `json:"catchup_lag"`
	// CatchUp is the raw index_catchup entries for this shard.
	CatchUp map[string]uint64 `json:"catchup"`
	// ReplayAfterWALPosition is the replay cursor.
	ReplayAfterWALPosition uint64 `json:"replay_after_wal_position"`
}

// FRIVersion is one outstanding fragment-reuse index version.
type FRIVersion struct {
	DatasetVersion uint64   `json:"dataset_version"`
	Groups         int      `json:"groups"`
	OldFragments   []uint32 `json:"old_fragments"`
	NewFragments   []uint32 `json:"new_fragments"`
	Removed        uint64   `json:"removed_fragments"`
}

// Summarize computes a Snapshot from a manifest and the newest manifest of
// each shard (nil for a shard never claimed). It is pure.
func Summarize(m *pb.Manifest, shards map[string]*pb.ShardManifest) *Snapshot {
	s := &Snapshot{Format: FormatPrivate, Version: m.Version, Fragments: len(m.Fragments)}
	if m.TimestampMicros != 0 {
		s.Timestamp = time.UnixMicro(m.TimestampMicros).UTC()
	}
	for _, f := range m.Fragments {
		s.PhysicalRows += f.PhysicalRows
		s.DeletedRows += f.GetDeletionFile().GetNumDeleted()
		s.DataBytes += f.GetDataFile().GetSizeBytes()
	}
	mw := table.MemWal(m)
	maintained := map[string]bool{}
	if mw != nil {
		s.MemWal = true
		for _, n := range mw.MaintainedIndexes {
			maintained[n] = true
		}
	}
	byName := map[string]*IndexInfo{}
	for _, ix := range m.Indices {
		if table.IsSystemIndex(ix) {
			continue
		}
		ii := byName[ix.Name]
		if ii == nil {
			ii = &IndexInfo{Name: ix.Name, Type: ix.Type, OldestDatasetVersion: ix.DatasetVersion, Maintained: maintained[ix.Name]}
			byName[ix.Name] = ii
		}
		ii.Segments++
		ii.OldestDatasetVersion = min(ii.OldestDatasetVersion, ix.DatasetVersion)
	}
	for _, ii := range byName {
		s.Indices = append(s.Indices, *ii)
	}
	sort.Slice(s.Indices, func(i, j int) bool { return s.Indices[i].Name < s.Indices[j].Name })

	if fr := table.FragReuse(m); fr != nil {
		for _, v := range fr.Versions {
			fv := FRIVersion{DatasetVersion: v.DatasetVersion, Groups: len(v.Groups)}
			for _, g := range v.Groups {
				for _, d := range g.OldFragments {
					fv.OldFragments = append(fv.OldFragments, d.Id)
				}
				for _, d := range g.NewFragments {
					fv.NewFragments = append(fv.NewFragments, d.Id)
				}
			}
			if len(v.RemovedFragments) > 0 {
				bm := roaring.New()
				if err := bm.UnmarshalBinary(v.RemovedFragments); err == nil {
					fv.Removed = bm.GetCardinality()
				}
			}
			s.FRI = append(s.FRI, fv)
		}
	}
	if mw == nil {
		return s
	}
	// Indices with a catch-up entry, plus maintained ones (absent = 0).
	lagIndices := map[string]bool{}
	for n := range mw.IndexCatchup {
		lagIndices[n] = true
	}
	for n := range maintained {
		lagIndices[n] = true
	}
	shardIDs := slices.Clone(mw.Shards)
	slices.Sort(shardIDs)
	for _, id := range shardIDs {
		si := ShardInfo{ID: id, Merged: mw.CompactedSstables[id], Retained: map[string]uint64{},
			Lag: map[string]uint64{}, CatchUp: map[string]uint64{}}
		for _, r := range retainedReasons {
			si.Retained[r] = 0
		}
		si.CaughtUp = si.Merged
		first := true
		for n := range maintained {
			g := mw.IndexCatchup[n].GetGenerations()[id] // absent = 0: not caught up
			if first || g < si.CaughtUp {
				si.CaughtUp, first = g, false
			}
		}
		si.CaughtUp = min(si.CaughtUp, si.Merged)
		for n := range lagIndices {
			g, ok := mw.IndexCatchup[n].GetGenerations()[id]
			if ok {
				si.CatchUp[n] = g
			}
			if g < si.Merged {
				si.Lag[n] = si.Merged - g
			} else {
				si.Lag[n] = 0
			}
		}
		if sm := shards[id]; sm != nil {
			si.Claimed = true
			si.WriterEpoch = sm.WriterEpoch
			si.ManifestVersion = sm.Version
			si.Trimmed = sm.TrimmedThroughGeneration
			si.ReplayAfterWALPosition = sm.ReplayAfterWalPosition
			if sm.CurrentGeneration > 1 {
				si.Flushed = sm.CurrentGeneration - 1
			}
			for _, sst := range sm.Sstables {
				si.SSTables++
				si.SSTableBytes += sst.Bytes
				si.Flushed = max(si.Flushed, sst.Generation)
				switch {
				case sst.Generation > si.Merged:
					si.Retained[RetainedNotMerged] += sst.Bytes
				case sst.Generation > si.CaughtUp:
					si.Retained[RetainedIndexLag] += sst.Bytes
				default:
					// Merged and covered by every maintained index: kept
					// only until trim runs, or while a retained version
					// still needs it.
					si.Retained[RetainedVersionRetention] += sst.Bytes
				}
			}
		}
		if si.Flushed > si.Merged {
			si.Pending = si.Flushed - si.Merged
		}
		s.PendingGenerations += si.Pending
		s.Shards = append(s.Shards, si)
	}
	return s
}

// fingerprint names the state the jobs read: the table version and each
// shard manifest's version. Nil (never synced) has none.
func (s *Snapshot) fingerprint() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "v%d", s.Version)
	for _, sh := range s.Shards {
		fmt.Fprintf(&b, ";%s=%d", sh.ID, sh.ManifestVersion)
	}
	return b.String()
}

// observer reads one table, caching what did not change: a sync of an idle
// table costs one listing of _versions/ (its first key) and one of each
// shard's manifest folder.
type observer struct {
	mu       sync.Mutex // REQUIRES: held across a sync or poll
	manifest *pb.Manifest
	shards   map[string]*pb.ShardManifest
}

var errStop = errors.New("stop")

// newestShardVersion reads the first key of a shard's manifest folder, the
// newest version (0: never claimed), with a one-key listing; a folder whose
// first key is not a manifest is listed until one is.
func newestShardVersion(ctx context.Context, b storage.Bucket, shard string) (uint64, error) {
	dir := memwal.ShardManifestDir(shard)
	first, ok, err := storage.First(ctx, b, dir)
	if err != nil {
		return 0, fmt.Errorf("list manifests of shard %q: %w", shard, err)
	}
	if !ok {
		return 0, nil
	}
	if n, ok := memwal.ParseShardManifestKey(shard, first.Key); ok {
		return n, nil
	}
	var v uint64
	err = b.List(ctx, dir, func(a storage.Attrs) error {
		if n, ok := memwal.ParseShardManifestKey(shard, a.Key); ok {
			v = n
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, fmt.Errorf("list manifests of shard %q: %w", shard, err)
	}
	return v, nil
}

// sync reads the newest manifest (when its version changed) and every
// shard's newest manifest (when changed).
func (o *observer) sync(ctx context.Context, b storage.Bucket) (*Snapshot, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, err := table.LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	if o.manifest == nil || o.manifest.Version != v {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			return nil, err
		}
		o.manifest = m
	}
	if _, err := o.pollShardsLocked(ctx, b); err != nil {
		return nil, err
	}
	return Summarize(o.manifest, o.shards), nil
}

// poll re-reads the shards whose newest manifest changed and reports
// whether any shard has flushed generations the last-read manifest has not
// merged. It needs one earlier sync.
func (o *observer) poll(ctx context.Context, b storage.Bucket) (unmerged bool, snap *Snapshot, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.manifest == nil {
		return false, nil, nil
	}
	changed, err := o.pollShardsLocked(ctx, b)
	if err != nil || !changed {
		return false, nil, err
	}
	snap = Summarize(o.manifest, o.shards)
	return snap.PendingGenerations > 0, snap, nil
}

func (o *observer) pollShardsLocked(ctx context.Context, b storage.Bucket) (changed bool, err error) {
	mw := table.MemWal(o.manifest)
	if o.shards == nil {
		o.shards = map[string]*pb.ShardManifest{}
	}
	if mw == nil {
		clear(o.shards)
		return false, nil
	}
	for id := range o.shards {
		if !slices.Contains(mw.Shards, id) {
			delete(o.shards, id)
			changed = true
		}
	}
	for _, id := range mw.Shards {
		v, err := newestShardVersion(ctx, b, id)
		if err != nil {
			return changed, err
		}
		if old := o.shards[id]; v == 0 || (old != nil && old.Version == v) {
			continue
		}
		sm, err := memwal.ReadShardManifestVersion(ctx, b, id, v)
		if storage.IsNotFound(err) {
			// Trimmed between the listing and the read: a newer version
			// exists; the next poll reads it.
			continue
		}
		if err != nil {
			return changed, err
		}
		o.shards[id] = sm
		changed = true
	}
	return changed, nil
}
