package memwal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	lpb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/observe"
	"github.com/compactord/compactord/internal/storage"
)

// Change polling on a Lance table (LanceDB's MemWAL layout).
//
// A shard's manifests live under _mem_wal/{shard}/manifest/ named by the
// bit-reversed version (BitName), so a listing's first key is not the
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

// Observer observes one Lance table for the scheduler (its change
// polling and periodic sync), caching what did not change. It is safe for
// concurrent use: a sync and a poll take turns.
type Observer struct {
	b        storage.Bucket
	mu       sync.Mutex // REQUIRES: held across a sync or poll
	manifest *meta.ManifestFile
	shards   map[string]*lpb.ShardManifest
	// files is, per shard, what the last listing found: generation
	// directory name → bytes. Nil until the first sync.
	files map[string]map[string]uint64
	ids   []string
	// Enrich, when set, adds to each snapshot what its owner computes
	// from the version the observer read (the daemon's debt gauges), so
	// that nothing reads the table a second time for them.
	Enrich func(ctx context.Context, f *meta.ManifestFile, snap *observe.Snapshot)
}

// summarize is Summarize, enriched.
func (o *Observer) summarize(ctx context.Context) *observe.Snapshot {
	snap := Summarize(o.manifest, o.shards, o.files)
	if o.Enrich != nil {
		o.Enrich(ctx, o.manifest, snap)
	}
	return snap
}

// NewObserver observes the Lance table rooted at b.
func NewObserver(b storage.Bucket) *Observer { return &Observer{b: b} }

// Head is the table's newest version.
func (o *Observer) Head(ctx context.Context) (uint64, error) {
	v, _, err := latest(ctx, o.b)
	return v, err
}

// latest is meta.Latest, its "no table here" marked for the scheduler,
// which waits quietly for a writer to create the table.
func latest(ctx context.Context, b storage.Bucket) (uint64, meta.Naming, error) {
	v, naming, err := meta.Latest(ctx, b)
	if errors.Is(err, meta.ErrNoTable) {
		err = observe.NoTable(err)
	}
	return v, naming, err
}

// Sync reads the newest version (when it changed), lists _mem_wal/ and
// reads each shard's newest manifest (when changed).
func (o *Observer) Sync(ctx context.Context) (*observe.Snapshot, error) {
	b := o.b
	o.mu.Lock()
	defer o.mu.Unlock()
	v, naming, err := latest(ctx, b)
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
	if Index(o.manifest.Indices) == nil {
		clear(o.shards)
		o.files, o.ids = nil, nil
		return o.summarize(ctx), nil
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
		sm, err := ReadShardManifest(ctx, b, id, nv)
		if storage.IsNotFound(err) {
			continue // trimmed since the listing: a newer one exists
		}
		if err != nil {
			return nil, err
		}
		o.shards[id] = sm
	}
	return o.summarize(ctx), nil
}

// Poll probes each known shard for a newer manifest and reports whether
// any shard lists a generation above the compacted position of the version
// the last sync read. It needs one earlier sync.
func (o *Observer) Poll(ctx context.Context) (unmerged bool, snap *observe.Snapshot, err error) {
	b := o.b
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
	snap = o.summarize(ctx)
	return snap.PendingGenerations > 0, snap, nil
}

// maxProbes bounds the forward probes of one poll of one shard; the rest
// is found by the next poll.
const maxProbes = 64

// advanceShard returns the shard's newest manifest when it is newer than
// cur (nil: unchanged). An idle shard costs one GET answered "not found".
func advanceShard(ctx context.Context, b storage.Bucket, id string, cur *lpb.ShardManifest) (*lpb.ShardManifest, error) {
	next := cur.GetVersion() + 1
	best, err := ReadShardManifest(ctx, b, id, next)
	if storage.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Jump by the hint; a missing, stale or unreadable hint only costs
	// probes.
	if data, err := b.Get(ctx, ShardHintKey(id)); err == nil {
		if hv, err := meta.DecodeHint(data); err == nil && hv > best.GetVersion() {
			if sm, err := ReadShardManifest(ctx, b, id, hv); err == nil {
				best = sm
			} else if !storage.IsNotFound(err) {
				return nil, err
			}
		}
	} else if !storage.IsNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", ShardHintKey(id), err)
	}
	for range maxProbes {
		sm, err := ReadShardManifest(ctx, b, id, best.GetVersion()+1)
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
				if v, ok := ParseBitName(n); ok && v > newest[id] {
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

// Summarize computes a Snapshot of a Lance table from its newest
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
func Summarize(f *meta.ManifestFile, shards map[string]*lpb.ShardManifest, files map[string]map[string]uint64) *observe.Snapshot {
	m := f.Manifest
	s := &observe.Snapshot{Format: observe.FormatLance, Version: m.GetVersion(), Fragments: len(m.GetFragments()), Indices: []observe.IndexInfo{}, Shards: []observe.ShardInfo{}, FRI: []observe.FRIVersion{}}
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
	if ix := Index(f.Indices); ix != nil {
		var err error
		if d, err = Details(ix); err != nil {
			d = nil
		}
	}
	maintained := map[string]bool{}
	for _, n := range Maintained(d, f.Indices) {
		maintained[n] = true
	}
	byName := map[string]*observe.IndexInfo{}
	for _, ix := range f.Indices {
		if meta.IsSystemIndex(ix) {
			continue
		}
		ii := byName[ix.GetName()]
		if ii == nil {
			ii = &observe.IndexInfo{Name: ix.GetName(), Type: meta.IndexKind(ix), OldestDatasetVersion: ix.GetDatasetVersion(), Maintained: maintained[ix.GetName()]}
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
	compacted := Compacted(d)
	catchup := Catchup(d)
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
		si := observe.ShardInfo{ID: id, Merged: compacted[id], Retained: map[string]uint64{}, RetainedGenerations: map[string]uint64{},
			Lag: map[string]uint64{}, CatchUp: map[string]uint64{}}
		for _, r := range observe.RetainedReasons {
			si.Retained[r] = 0
			si.RetainedGenerations[r] = 0
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
				reason := observe.RetainedVersionRetention
				switch {
				case g > si.Merged:
					reason = observe.RetainedNotMerged
				case g > si.CaughtUp:
					reason = observe.RetainedIndexLag
				}
				si.Retained[reason] += bytes
				si.RetainedGenerations[reason]++
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
