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

	lpb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Snapshot is what a sync learns about a table: the status API's view and
// the source of the LSM-debt gauges.
type Snapshot struct {
	// Format is the table's format: "lance" (FormatLance).
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

// FormatLance is the table format Snapshot.Format names.
const FormatLance = "lance"

// Change polling on a Lance table (LanceDB's MemWAL layout).
//
// A shard's manifests live under _mem_wal/{shard}/manifest/ named by the
// bit-reversed version (meta.BitName), so a listing's first key is not the
// newest version, and a one-key listing tells nothing. Versions are
// consecutive (each is put-if-absent at the previous one plus 1), so the
// poll probes the version after the one it knows: a GET that answers "not
// found" says the shard did not change. That is one request per shard of
// an idle table. When the probe finds a new version, the shard's
// version_hint.json (which LanceDB's writer updates after each manifest)
// lets the poll jump to the newest version, and one more probe confirms
// nothing newer exists: about four requests for a shard that changed,
// whatever the number of versions it skipped.
//
// The periodic sync lists _mem_wal/ once (every key: the shard directories,
// their manifest versions, and the generation directories with their sizes),
// which finds new shards, the trimmed generations and the bytes retained.
// A shard a writer creates between syncs is seen at the next sync.

// lanceObserver reads one Lance table, caching what did not change.
type lanceObserver struct {
	mu       sync.Mutex // REQUIRES: held across a sync or poll
	manifest *meta.ManifestFile
	shards   map[string]*lpb.ShardManifest
	// files is, per shard, what the last listing found: generation
	// directory name → bytes. Nil until the first sync.
	files map[string]map[string]uint64
	ids   []string
}

// observe reads the table.
func (st *tableState) observe(ctx context.Context, h *TableHandle) (*Snapshot, error) {
	return st.lobs.sync(ctx, h.Bucket)
}

// pollChanges re-reads the shards whose newest manifest changed.
func (st *tableState) pollChanges(ctx context.Context, h *TableHandle) (bool, *Snapshot, error) {
	return st.lobs.poll(ctx, h.Bucket)
}

// isNoTable: the location holds no table (yet).
func isNoTable(err error) bool {
	return errors.Is(err, meta.ErrNoTable)
}

// latestVersion is the table's newest version.
func latestVersion(ctx context.Context, h *TableHandle) (uint64, error) {
	v, _, err := meta.Latest(ctx, h.Bucket)
	return v, err
}

// lanceFollowUpsLocked: a merge that landed generations
// queues index catch-up and trim, which then run in that order (equal
// waiting times break ties in Kinds order), so that change polling runs
// merge, catch-up and trim as one chain. A landed compaction queues the
// index job, which absorbs its fragment-reuse version (LanceDB's own
// optimize() must not meet a btree still on the old addresses).
// REQUIRES: s.mu held.
func (s *Scheduler) lanceFollowUpsLocked(st *tableState, h *TableHandle, k Kind, class Class, out Outcome, now time.Time) {
	if h == nil || h.Lance == nil || (k != KindMerge && k != KindCompact) || class != ClassSuccess || out.Version == 0 || st.removed {
		return
	}
	follow := []Kind{KindIndex, KindTrim}
	if k == KindCompact {
		follow = follow[:1]
	}
	for _, f := range follow {
		if _, ok := s.deps.Jobs[f]; ok && !st.markedLocked(f) {
			st.pend(f, TriggerChange, now)
		}
	}
}

// sync reads the newest version (when it changed), lists _mem_wal/ and
// reads each shard's newest manifest (when changed).
func (o *lanceObserver) sync(ctx context.Context, b storage.Bucket) (*Snapshot, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, naming, err := meta.Latest(ctx, b)
	if err != nil {
		return nil, err
	}
	if o.manifest == nil || o.manifest.Manifest.GetVersion() != v {
		f, err := meta.ReadVersion(ctx, b, naming, v)
		if err != nil {
			return nil, err
		}
		o.manifest = f
	}
	if o.shards == nil {
		o.shards = map[string]*lpb.ShardManifest{}
	}
	if meta.MemWalIndex(o.manifest.Indices) == nil {
		clear(o.shards)
		o.files, o.ids = nil, nil
		return SummarizeLance(o.manifest, nil, nil), nil
	}
	newest, files, err := listMemWal(ctx, b)
	if err != nil {
		return nil, err
	}
	o.files = files
	o.ids = o.ids[:0]
	for id := range files {
		o.ids = append(o.ids, id)
	}
	sort.Strings(o.ids)
	for id := range o.shards {
		if _, ok := files[id]; !ok {
			delete(o.shards, id)
		}
	}
	for _, id := range o.ids {
		nv := newest[id]
		if nv == 0 {
			continue // no manifest yet: never claimed
		}
		if old := o.shards[id]; old != nil && old.GetVersion() >= nv {
			continue
		}
		sm, err := readShardManifest(ctx, b, id, nv)
		if storage.IsNotFound(err) {
			continue // trimmed since the listing: a newer one exists
		}
		if err != nil {
			return nil, err
		}
		o.shards[id] = sm
	}
	return SummarizeLance(o.manifest, o.shards, o.files), nil
}

// poll probes each known shard for a newer manifest and reports whether
// any shard lists a generation above the compacted position of the version
// the last sync read. It needs one earlier sync.
func (o *lanceObserver) poll(ctx context.Context, b storage.Bucket) (unmerged bool, snap *Snapshot, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.manifest == nil || o.files == nil {
		return false, nil, nil
	}
	changed := false
	for _, id := range o.ids {
		sm, err := advanceShard(ctx, b, id, o.shards[id])
		if err != nil {
			return false, nil, err
		}
		if sm != nil {
			o.shards[id] = sm
			changed = true
		}
	}
	if !changed {
		return false, nil, nil
	}
	snap = SummarizeLance(o.manifest, o.shards, o.files)
	return snap.PendingGenerations > 0, snap, nil
}

// maxProbes bounds the forward probes of one poll of one shard; the rest
// is found by the next poll.
const maxProbes = 64

// advanceShard returns the shard's newest manifest when it is newer than
// cur (nil: unchanged). An idle shard costs one GET answered "not found".
func advanceShard(ctx context.Context, b storage.Bucket, id string, cur *lpb.ShardManifest) (*lpb.ShardManifest, error) {
	next := cur.GetVersion() + 1
	best, err := readShardManifest(ctx, b, id, next)
	if storage.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Jump by the hint; a missing, stale or unreadable hint only costs
	// probes.
	if data, err := b.Get(ctx, meta.ShardHintKey(id)); err == nil {
		if hv, err := meta.DecodeHint(data); err == nil && hv > best.GetVersion() {
			if sm, err := readShardManifest(ctx, b, id, hv); err == nil {
				best = sm
			} else if !storage.IsNotFound(err) {
				return nil, err
			}
		}
	} else if !storage.IsNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", meta.ShardHintKey(id), err)
	}
	for range maxProbes {
		sm, err := readShardManifest(ctx, b, id, best.GetVersion()+1)
		if storage.IsNotFound(err) {
			break
		}
		if err != nil {
			return nil, err
		}
		best = sm
	}
	return best, nil
}

func readShardManifest(ctx context.Context, b storage.Bucket, id string, v uint64) (*lpb.ShardManifest, error) {
	key := meta.ShardManifestKey(id, v)
	data, err := b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("read shard manifest %s: %w", key, err)
	}
	m, err := meta.DecodeShardManifest(data)
	if err != nil {
		return nil, &meta.CorruptError{Key: key, Err: err}
	}
	if m.GetVersion() != v {
		return nil, &meta.CorruptError{Key: key, Err: fmt.Errorf("shard manifest says version %d", m.GetVersion())}
	}
	return m, nil
}

// listMemWal lists _mem_wal/ once: per shard directory its newest manifest
// version (0: none) and its generation directories with their bytes.
func listMemWal(ctx context.Context, b storage.Bucket) (map[string]uint64, map[string]map[string]uint64, error) {
	newest := map[string]uint64{}
	files := map[string]map[string]uint64{}
	err := b.List(ctx, meta.MemWalDir, func(a storage.Attrs) error {
		rest := strings.TrimPrefix(a.Key, meta.MemWalDir)
		id, rest, ok := strings.Cut(rest, "/")
		if !ok || id == "" {
			return nil
		}
		if files[id] == nil {
			files[id] = map[string]uint64{}
		}
		top, name, nested := strings.Cut(rest, "/")
		switch {
		case !nested:
		case top == "manifest":
			if n, ok := strings.CutSuffix(name, ".binpb"); ok {
				if v, ok := meta.ParseBitName(n); ok && v > newest[id] {
					newest[id] = v
				}
			}
		case top == "wal":
		default:
			if a.Size > 0 {
				files[id][top] += uint64(a.Size)
			} else if _, ok := files[id][top]; !ok {
				files[id][top] = 0
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list MemWAL shards: %w", err)
	}
	return newest, files, nil
}

// SummarizeLance computes a Snapshot of a Lance table from its newest
// version, each shard's newest manifest (nil or absent: never claimed) and
// what a listing of _mem_wal/ found per shard (generation directory →
// bytes; nil when not listed). It is pure.
//
// Per shard: Merged is compacted_sstables[shard] of the version's MemWAL
// index; CaughtUp the minimum over the maintained indices that exist of
// their index_catchup position (absent: 0), capped at Merged; Flushed the
// newest generation the shard manifest lists below its current
// generation; Trimmed the newest merged
// generation whose directory is gone (trim deletes the directories and
// leaves the list alone).
func SummarizeLance(f *meta.ManifestFile, shards map[string]*lpb.ShardManifest, files map[string]map[string]uint64) *Snapshot {
	m := f.Manifest
	s := &Snapshot{Format: FormatLance, Version: m.GetVersion(), Fragments: len(m.GetFragments()), Indices: []IndexInfo{}, Shards: []ShardInfo{}, FRI: []FRIVersion{}}
	if ts := m.GetTimestamp(); ts != nil {
		s.Timestamp = ts.AsTime().UTC()
	}
	if f.Transaction != nil {
		s.Operation = meta.OperationName(f.Transaction)
	}
	for _, fr := range m.GetFragments() {
		s.PhysicalRows += fr.GetPhysicalRows()
		s.DeletedRows += fr.GetDeletionFile().GetNumDeletedRows()
		for _, df := range fr.GetFiles() {
			s.DataBytes += df.GetFileSizeBytes()
		}
	}
	var d *lpb.MemWalIndexDetails
	if ix := meta.MemWalIndex(f.Indices); ix != nil {
		var err error
		if d, err = meta.MemWalDetails(ix); err != nil {
			d = nil
		}
	}
	maintained := map[string]bool{}
	for _, n := range d.GetMaintainedIndexes() {
		if len(meta.FindIndex(f.Indices, n)) > 0 {
			maintained[n] = true
		}
	}
	byName := map[string]*IndexInfo{}
	for _, ix := range f.Indices {
		if meta.IsSystemIndex(ix) {
			continue
		}
		ii := byName[ix.GetName()]
		if ii == nil {
			ii = &IndexInfo{Name: ix.GetName(), Type: meta.IndexKind(ix), OldestDatasetVersion: ix.GetDatasetVersion(), Maintained: maintained[ix.GetName()]}
			byName[ix.GetName()] = ii
		}
		ii.Segments++
		ii.OldestDatasetVersion = min(ii.OldestDatasetVersion, ix.GetDatasetVersion())
	}
	for _, ii := range byName {
		s.Indices = append(s.Indices, *ii)
	}
	sort.Slice(s.Indices, func(i, j int) bool { return s.Indices[i].Name < s.Indices[j].Name })
	if d == nil {
		return s
	}
	s.MemWal = true
	compacted := meta.Compacted(d)
	catchup := meta.Catchup(d)
	lagIndices := map[string]bool{}
	for n := range catchup {
		lagIndices[n] = true
	}
	for n := range maintained {
		lagIndices[n] = true
	}
	ids := map[string]bool{}
	for id := range files {
		ids[id] = true
	}
	for id := range shards {
		ids[id] = true
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	}) {
		si := ShardInfo{ID: id, Merged: compacted[id], Retained: map[string]uint64{}, Lag: map[string]uint64{}, CatchUp: map[string]uint64{}}
		for _, r := range retainedReasons {
			si.Retained[r] = 0
		}
		si.CaughtUp = si.Merged
		first := true
		for n := range maintained {
			g := catchup[n][id]
			if first || g < si.CaughtUp {
				si.CaughtUp, first = g, false
			}
		}
		si.CaughtUp = min(si.CaughtUp, si.Merged)
		for n := range lagIndices {
			g, ok := catchup[n][id]
			if ok {
				si.CatchUp[n] = g
			}
			si.Lag[n] = 0
			if g < si.Merged {
				si.Lag[n] = si.Merged - g
			}
		}
		if sm := shards[id]; sm != nil {
			si.Claimed = true
			si.WriterEpoch = sm.GetWriterEpoch()
			si.ManifestVersion = sm.GetVersion()
			si.ReplayAfterWALPosition = sm.GetReplayAfterWalEntryPosition()
			dirs, listed := files[id]
			for _, sst := range sm.GetSstables() {
				g := sst.GetGeneration()
				if g < sm.GetCurrentGeneration() {
					// At or above current_generation is not flushed,
					// whatever the list says (merge.Plan's rule).
					si.Flushed = max(si.Flushed, g)
				}
				bytes, present := dirs[strings.Trim(sst.GetPath(), "/")]
				if listed && !present {
					if g <= si.Merged {
						si.Trimmed = max(si.Trimmed, g)
					}
					continue
				}
				si.SSTables++
				si.SSTableBytes += bytes
				switch {
				case g > si.Merged:
					si.Retained[RetainedNotMerged] += bytes
				case g > si.CaughtUp:
					si.Retained[RetainedIndexLag] += bytes
				default:
					si.Retained[RetainedVersionRetention] += bytes
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
