package trim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// Config is trim's settings: jobs.trim in the daemon's configuration and
// the flags of `compactord trim`, both built from DefaultConfig.
type Config struct {
	// ReaderGrace: a version that stopped being the latest less than this
	// ago still pins the generations its LSM view reads.
	ReaderGrace time.Duration `yaml:"reader_grace"`
	// KeepShardManifests newest shard manifest versions are kept (>= 2).
	KeepShardManifests int `yaml:"keep_shard_manifests"`
	// Concurrency bounds parallel deletes.
	Concurrency int `yaml:"concurrency"`
	// DryRun plans and deletes nothing; a one-shot choice, not a setting.
	DryRun bool `yaml:"-"`
}

// DefaultConfig is trim's defaults, the only place they are set.
func DefaultConfig() Config {
	return Config{ReaderGrace: time.Minute, KeepShardManifests: 10, Concurrency: 16}
}

// Validate checks the config. A message starts with the setting's key.
func (c Config) Validate() error {
	switch {
	case c.ReaderGrace < 0:
		return fmt.Errorf("reader_grace must not be negative, got %s", c.ReaderGrace)
	case c.KeepShardManifests < 2:
		return fmt.Errorf("keep_shard_manifests must be at least 2, got %d", c.KeepShardManifests)
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency)
	}
	return nil
}

// Result of a run.
type Result struct {
	Plan               Plan  `json:"plan"`
	DeletedGenerations int   `json:"deleted_generations"`
	DeletedObjects     int   `json:"deleted_objects"`
	DeletedWAL         int   `json:"wal_entries_deleted"`
	DeletedManifests   int   `json:"shard_manifests_deleted"`
	BytesTrimmed       int64 `json:"bytes_trimmed"`
	DryRun             bool  `json:"dry_run"`
}

// sentinelMaxBytes: a WAL entry larger than this holds batches and so is
// not a fence sentinel (a sentinel is a schema message without columns).
const sentinelMaxBytes = 4096

// ViewOf reads the MemWAL state a manifest records.
func ViewOf(f *meta.ManifestFile) (View, error) {
	v := View{Version: f.Manifest.GetVersion(), Compacted: map[string]uint64{}, Catchup: map[string]map[string]uint64{}, Maintained: []string{}}
	ix := memwal.Index(f.Indices)
	if ix == nil {
		return v, nil
	}
	d, err := memwal.Details(ix)
	if err != nil {
		return v, fmt.Errorf("version %d: %w", v.Version, err)
	}
	// A field of the MemWAL details this build does not name may change
	// which generations an index has taken in (as maintain_all_indexes
	// did, and its field number is not checked against upstream): trim
	// judges nothing by details it does not fully read.
	if u := d.ProtoReflect().GetUnknown(); len(u) > 0 {
		return v, fmt.Errorf("version %d: the MemWAL index details carry %d bytes of fields compactord does not know (a newer Lance's): %w", v.Version, len(u), meta.ErrUnsupportedFeature)
	}
	v.HasMemWal = true
	v.Compacted = memwal.Compacted(d)
	v.Catchup = memwal.Catchup(d)
	// Maintained reads maintain_all_indexes: read as the list alone, a
	// maintain-all table maintains nothing and every generation looks
	// retirable.
	v.Maintained = memwal.Maintained(d, f.Indices)
	return v, nil
}

// Load reads the state.
func Load(ctx context.Context, b storage.Bucket, cfg Config, now time.Time) (State, error) {
	var st State
	versions, naming, err := meta.ListVersions(ctx, b)
	if err != nil {
		return st, err
	}
	latestV := versions[len(versions)-1]
	read := map[uint64]*meta.ManifestFile{}
	get := func(v uint64) (*meta.ManifestFile, error) {
		if f := read[v]; f != nil {
			return f, nil
		}
		f, err := meta.ReadVersion(ctx, b, naming, v)
		if err != nil {
			return nil, err
		}
		// A version trim judges by carries a flag compactord does not
		// implement: its MemWAL may follow rules trim does not know.
		if err := meta.CheckMaintain(f.Manifest); err != nil {
			return nil, fmt.Errorf("version %d: %w", v, err)
		}
		read[v] = f
		return f, nil
	}
	latest, err := get(latestV)
	if err != nil {
		return st, err
	}
	if st.Latest, err = ViewOf(latest); err != nil {
		return st, err
	}
	// Pins: the reader grace, walking down while the successor became the
	// latest less than the grace ago.
	why := map[uint64]string{}
	tagged := map[uint64]bool{}
	for i := len(versions) - 2; i >= 0; i-- {
		succ, err := get(versions[i+1])
		if storage.IsNotFound(err) {
			why[versions[i]] = "its successor vanished during the run"
			continue
		}
		if err != nil {
			return st, err
		}
		ts := succ.Manifest.GetTimestamp()
		if ts == nil {
			why[versions[i]] = fmt.Sprintf("version %d has no commit time", versions[i+1])
			continue
		}
		ago := now.Sub(ts.AsTime())
		if ago >= cfg.ReaderGrace {
			break
		}
		why[versions[i]] = fmt.Sprintf("the latest until %s ago, within the %s reader grace", ago.Round(time.Millisecond), cfg.ReaderGrace)
	}
	exists := map[uint64]bool{}
	for _, v := range versions {
		exists[v] = true
	}
	tags, err := meta.LoadTags(ctx, b)
	if err != nil {
		return st, err
	}
	for v, names := range meta.TaggedVersions(tags) {
		if exists[v] && v != latestV {
			why[v], tagged[v] = fmt.Sprintf("tagged %s", strings.Join(names, ", ")), true
		}
	}
	wm, err := inflight.Load(ctx, b, now)
	if err != nil {
		return st, err
	}
	if wm.ReadVersion > 0 {
		for _, v := range versions {
			if v >= wm.ReadVersion {
				if v != latestV && why[v] == "" {
					why[v] = fmt.Sprintf("an in-flight job read version %d", wm.ReadVersion)
				}
				break
			}
		}
	}
	for v, w := range why {
		f, err := get(v)
		if storage.IsNotFound(err) || errors.Is(err, storage.ErrNotFound) {
			continue // deleted meanwhile: nobody can open it any more
		}
		if err != nil {
			return st, err
		}
		view, err := ViewOf(f)
		if err != nil {
			return st, err
		}
		st.Pins = append(st.Pins, Pin{View: view, Tagged: tagged[v], Why: w})
	}
	sort.Slice(st.Pins, func(i, j int) bool { return st.Pins[i].Version < st.Pins[j].Version })

	ids, err := memwal.ListShards(ctx, b)
	if err != nil {
		return st, err
	}
	for _, id := range ids {
		sh, err := loadShard(ctx, b, id)
		if err != nil {
			return st, err
		}
		st.Shards = append(st.Shards, sh)
	}
	return st, nil
}

func loadShard(ctx context.Context, b storage.Bucket, id string) (Shard, error) {
	sh := Shard{ID: id, ManifestKeys: map[uint64]string{}}
	ss, err := memwal.ReadShard(ctx, b, id)
	if err != nil {
		return sh, err
	}
	if ss.Manifest != nil {
		m := ss.Manifest
		sh.HasManifest = true
		sh.ManifestVersion = m.GetVersion()
		sh.ReplayAfter = m.GetReplayAfterWalEntryPosition()
		sh.WriterEpoch = m.GetWriterEpoch()
		for _, t := range m.GetSstables() {
			sh.Generations = append(sh.Generations, ShardGen{Generation: t.GetGeneration(), Path: t.GetPath()})
		}
		sh.ManifestVersions = ss.ManifestVersions
		for _, v := range ss.ManifestVersions {
			sh.ManifestKeys[v] = memwal.ShardManifestKey(id, v)
		}
		if data, err := b.Get(ctx, memwal.ShardHintKey(id)); err == nil {
			if v, err := meta.DecodeHint(data); err == nil {
				sh.HintVersion = v
			}
		} else if !storage.IsNotFound(err) {
			return sh, fmt.Errorf("read %s: %w", memwal.ShardHintKey(id), err)
		}
	}
	dir := memwal.ShardDir(id)
	dirs := map[string]*Dir{}
	var walKeys []storage.Attrs
	if err := b.List(ctx, dir, func(a storage.Attrs) error {
		rest := strings.TrimPrefix(a.Key, dir)
		top, _, nested := strings.Cut(rest, "/")
		switch {
		case !nested:
			return nil
		case top == "wal":
			walKeys = append(walKeys, a)
		case top == "manifest":
		default:
			d := dirs[top]
			if d == nil {
				d = &Dir{Name: top}
				dirs[top] = d
			}
			d.Bytes += a.Size
			d.Keys = append(d.Keys, a.Key)
		}
		return nil
	}); err != nil {
		return sh, fmt.Errorf("list shard %s: %w", id, err)
	}
	for _, d := range dirs {
		sh.Dirs = append(sh.Dirs, *d)
	}
	sort.Slice(sh.Dirs, func(i, j int) bool { return sh.Dirs[i].Name < sh.Dirs[j].Name })
	wdir := memwal.WALDir(id)
	for _, a := range walKeys {
		name, ok := strings.CutSuffix(strings.TrimPrefix(a.Key, wdir), ".arrow")
		if !ok {
			continue
		}
		pos, ok := memwal.ParseBitName(name)
		if !ok {
			continue
		}
		w := WALEntry{Position: pos, Key: a.Key, Bytes: a.Size}
		if sh.HasManifest && pos <= sh.ReplayAfter && a.Size <= sentinelMaxBytes {
			data, err := b.Get(ctx, a.Key)
			switch {
			case storage.IsNotFound(err):
				continue
			case err != nil:
				return sh, fmt.Errorf("read %s: %w", a.Key, err)
			}
			s, err := arrowipc.ReadStream(data, nil)
			if err != nil {
				w.Unreadable = true
			} else if v, _ := s.Schema.Metadata.Get("fence_sentinel"); v == "true" {
				w.Sentinel = true
			}
		}
		sh.WAL = append(sh.WAL, w)
	}
	return sh, nil
}

func parseGen(name string) (uint64, bool) { return memwal.ParseGenerationDir(name) }

// Run plans and, unless DryRun, executes a trim.
func Run(ctx context.Context, b storage.Bucket, cfg Config, now time.Time) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := Load(ctx, b, cfg, now)
	if err != nil {
		return nil, fmt.Errorf("trim stopped, nothing deleted: %w", err)
	}
	plan := Decide(st, cfg.KeepShardManifests)
	res := &Result{Plan: plan, DryRun: cfg.DryRun}
	if cfg.DryRun {
		return res, nil
	}
	return res, Execute(ctx, b, plan, cfg.Concurrency, res)
}

// Execute deletes the planned generations' objects, then WAL entries, then
// old shard manifests. Nothing it deletes is read by any reader the plan
// protects, so a crash in between leaves a readable table; the next run
// deletes the rest.
func Execute(ctx context.Context, b storage.Bucket, plan Plan, concurrency int, res *Result) error {
	var keys []string
	var genBytes int64
	for _, g := range plan.Generations {
		if g.Delete {
			keys = append(keys, g.keys...)
			genBytes += g.Bytes
		}
	}
	var wal []string
	var walBytes []int64
	for _, w := range plan.WAL {
		if w.Delete {
			wal = append(wal, w.Key)
			walBytes = append(walBytes, w.Bytes)
		}
	}
	var ms []string
	for _, m := range plan.ShardManifests {
		if m.Delete {
			ms = append(ms, m.Key)
		}
	}
	// Progress: the objects deleted (rows) and the bytes trimmed, out of
	// the plan's; a generation's bytes count once its objects are gone.
	rep := progress.From(ctx)
	total := progress.Units{Rows: int64(len(keys) + len(wal) + len(ms)), Bytes: genBytes}
	for _, n := range walBytes {
		total.Bytes += n
	}
	rep.Start("trim", total)
	n, err := storage.DeleteAllFunc(ctx, b, keys, concurrency, func(int) { rep.Add(1, 0) })
	res.DeletedObjects = n
	if err != nil {
		return fmt.Errorf("delete generations: %w", err)
	}
	rep.Add(0, genBytes)
	for _, g := range plan.Generations {
		if g.Delete {
			res.DeletedGenerations++
			res.BytesTrimmed += g.Bytes
		}
	}
	// A WAL entry's bytes count once it is deleted (the callback runs on
	// the delete workers): a failed run reports only what it freed.
	var freed atomic.Int64
	res.DeletedWAL, err = storage.DeleteAllFunc(ctx, b, wal, concurrency, func(i int) {
		rep.Add(1, walBytes[i])
		freed.Add(walBytes[i])
	})
	res.BytesTrimmed += freed.Load()
	if err != nil {
		return fmt.Errorf("delete WAL entries: %w", err)
	}
	if res.DeletedManifests, err = storage.DeleteAllFunc(ctx, b, ms, concurrency, func(int) { rep.Add(1, 0) }); err != nil {
		return fmt.Errorf("delete old shard manifests: %w", err)
	}
	return nil
}
