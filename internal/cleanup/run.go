package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// Config is cleanup's settings: jobs.cleanup in the daemon's configuration
// and the flags of `compactord cleanup`, both built from DefaultConfig.
type Config struct {
	Options `yaml:",inline"`
	// Concurrency bounds parallel reads and deletes.
	Concurrency int `yaml:"concurrency"`
	// AllowDeletingInFlightWrites accepts a MinAge or an OlderThan below
	// InFlightFloor. Its name is the hazard, twice over. A LanceDB writer's
	// new data file is unreferenced until its commit lands, and LanceDB
	// registers no in-flight marker, so a short min_age lets cleanup delete
	// a file an append then commits (a table broken this way had its file
	// deleted 0.8 s after it was written). And a LanceDB writer classifies
	// its conflicts only against the versions still listed when it commits
	// (lance's load_new_transactions walks the manifests present), so a
	// short older_than lets cleanup remove the Delete or Update a compaction
	// in flight had to see: LanceDB's optimize() then rewrote a row that
	// commit had deleted, and the key was live twice.
	AllowDeletingInFlightWrites bool `yaml:"allow_deleting_in_flight_writes"`
	// DryRun plans and deletes nothing; a one-shot choice, not a setting.
	DryRun bool `yaml:"-"`
}

// InFlightFloor is the least min_age and older_than accepted without
// AllowDeletingInFlightWrites: longer than any transaction of a writer in
// flight (from the version it read to its commit) should take.
const InFlightFloor = time.Hour

// DefaultConfig is cleanup's defaults, the only place they are set. MinAge
// is Lance's: an unreferenced file may belong to a commit in progress of
// any writer (LanceDB's included, which registers no in-flight marker),
// and a shorter floor risks deleting it.
func DefaultConfig() Config {
	return Config{Options: Options{RetainVersions: 10, OlderThan: 24 * time.Hour, MinAge: DefaultMinAge}, Concurrency: 16}
}

// Validate checks the config. A message starts with the setting's key.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency)
	}
	return nil
}

// ValidateFloor refuses a MinAge or an OlderThan below InFlightFloor
// unless AllowDeletingInFlightWrites: the daemon's rule, for tables it
// cleans up unattended beside writers. A one-shot run (the CLI warns) and a
// library caller that knows its writers need not apply it.
func (c Config) ValidateFloor() error {
	if c.AllowDeletingInFlightWrites {
		return nil
	}
	if c.MinAge < InFlightFloor {
		return fmt.Errorf("min_age %s is below the floor of %s: writers' files are unreferenced until their commits land (LanceDB's register no in-flight marker), so cleanup would delete files of appends in flight; raise it, or set allow_deleting_in_flight_writes: true to accept that", c.MinAge, InFlightFloor)
	}
	if c.OlderThan < InFlightFloor {
		return fmt.Errorf("older_than %s is below the floor of %s: a LanceDB writer checks its commit for conflicts only against the versions still there, so cleanup would remove a version a transaction in flight must see (a compaction then brings back rows a delete or upsert removed); raise it, or set allow_deleting_in_flight_writes: true to accept that", c.OlderThan, InFlightFloor)
	}
	return nil
}

// Result of a run.
type Result struct {
	Plan            Plan  `json:"plan"`
	DeletedVersions int   `json:"deleted_versions"`
	DeletedFiles    int   `json:"deleted_files"`
	BytesReclaimed  int64 `json:"bytes_reclaimed"`
	// Spared are planned file deletions skipped because a version
	// committed during the run references them.
	Spared []string `json:"spared_files,omitempty"`
	DryRun bool     `json:"dry_run"`
}

// ManifestRefs lists what a manifest references. It refuses manifests whose
// files compactord cannot account for (other base paths, external row-id
// files, data overlays, any flag it does not implement for writing):
// deleting by reachability needs every reference, and a newer writer's
// feature may reference files in ways this reader cannot see.
func ManifestRefs(key string, f *meta.ManifestFile) (Refs, error) {
	m := f.Manifest
	if err := meta.CheckMaintain(m); err != nil {
		return Refs{}, fmt.Errorf("%s: %w", key, err)
	}
	if len(m.GetBasePaths()) > 0 {
		return Refs{}, fmt.Errorf("%s: the table has other base paths; compactord cleanup does not collect such tables", key)
	}
	var r Refs
	for _, frag := range m.GetFragments() {
		if len(frag.GetOverlays()) > 0 || frag.GetExternalRowIds() != nil ||
			frag.GetExternalCreatedAtVersions() != nil || frag.GetExternalLastUpdatedAtVersions() != nil {
			return Refs{}, fmt.Errorf("%s: fragment %d references overlay or external row-id files, which compactord cleanup does not account for", key, frag.GetId())
		}
		for _, df := range frag.GetFiles() {
			if df.GetBaseId() != 0 {
				return Refs{}, fmt.Errorf("%s: fragment %d has a data file in another base (%d)", key, frag.GetId(), df.GetBaseId())
			}
			if df.GetPath() == "" {
				return Refs{}, fmt.Errorf("%s: fragment %d has a data file without a path", key, frag.GetId())
			}
			r.Files = append(r.Files, meta.DataKey(df.GetPath()))
		}
		if d := frag.GetDeletionFile(); d != nil {
			if d.GetBaseId() != 0 {
				return Refs{}, fmt.Errorf("%s: fragment %d has a deletion file in another base (%d)", key, frag.GetId(), d.GetBaseId())
			}
			r.Files = append(r.Files, deletion.Key(frag.GetId(), d))
		}
	}
	if t := m.GetTransactionFile(); t != "" {
		r.Files = append(r.Files, meta.TransactionKey(t))
	}
	for _, ix := range f.Indices {
		if ix.GetBaseId() != 0 {
			return Refs{}, fmt.Errorf("%s: index %s is in another base (%d)", key, ix.GetName(), ix.GetBaseId())
		}
		if len(ix.GetUuid().GetUuid()) > 0 {
			r.Indices = append(r.Indices, meta.UUIDString(ix.GetUuid()))
		}
	}
	return r, nil
}

// Load reads the state: every manifest (with bounded concurrency), tags,
// in-flight markers and the collected objects. A manifest that cannot be
// read stops the run: it may reference anything.
func Load(ctx context.Context, b storage.Bucket, concurrency int, now time.Time) (State, error) {
	var st State
	type entry struct {
		key      string
		size     int64
		version  uint64
		detached bool
	}
	var entries []entry
	seen := map[meta.Naming]bool{}
	err := b.List(ctx, meta.VersionsDir, func(a storage.Attrs) error {
		if v, n, ok := meta.ParseManifestKey(a.Key); ok {
			seen[n] = true
			entries = append(entries, entry{key: a.Key, size: a.Size, version: v})
			return nil
		}
		if kind, _ := classify(a.Key); kind == kindDetached {
			entries = append(entries, entry{key: a.Key, size: a.Size, detached: true})
		}
		st.Objects = append(st.Objects, a)
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("list versions: %w", err)
	}
	if len(seen) == 0 {
		return st, meta.ErrNoTable
	}
	if len(seen) > 1 {
		return st, fmt.Errorf("both V1 and V2 manifest names under %s; finish the naming migration with LanceDB first", meta.VersionsDir)
	}
	var mu sync.Mutex
	// Progress: the manifests read (rows) and their bytes, one each.
	rep := progress.From(ctx)
	var total int64
	for _, e := range entries {
		total += e.size
	}
	rep.Start("cleanup read", progress.Units{Rows: int64(len(entries)), Bytes: total})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for _, e := range entries {
		g.Go(func() error {
			defer rep.Add(1, e.size)
			data, err := b.Get(gctx, e.key)
			if storage.IsNotFound(err) {
				// Deleted since the listing (another cleanup): its files are
				// then judged as unreferenced, the cautious class.
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", e.key, err)
			}
			f, err := meta.DecodeManifestFile(data)
			if err != nil {
				return &meta.CorruptError{Key: e.key, Err: err}
			}
			if !e.detached && f.Manifest.GetVersion() != e.version {
				return &meta.CorruptError{Key: e.key, Err: fmt.Errorf("manifest says version %d", f.Manifest.GetVersion())}
			}
			refs, err := ManifestRefs(e.key, f)
			if err != nil {
				return err
			}
			v := Version{Version: f.Manifest.GetVersion(), Key: e.key, Bytes: e.size, Refs: refs}
			if ts := f.Manifest.GetTimestamp(); ts != nil && (ts.GetSeconds() != 0 || ts.GetNanos() != 0) {
				v.Timestamp = ts.AsTime()
			}
			mu.Lock()
			if e.detached {
				st.Detached = append(st.Detached, v)
			} else {
				st.Versions = append(st.Versions, v)
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, err
	}
	if len(st.Versions) == 0 {
		return st, meta.ErrNoTable
	}
	tags, err := meta.LoadTags(ctx, b)
	if err != nil {
		return st, err
	}
	st.Tags = meta.TaggedVersions(tags)
	if st.Watermark, err = inflight.Load(ctx, b, now); err != nil {
		return st, err
	}
	for _, dir := range Collected {
		if dir == meta.VersionsDir {
			continue // listed above
		}
		if err := b.List(ctx, dir, func(a storage.Attrs) error { st.Objects = append(st.Objects, a); return nil }); err != nil {
			return st, fmt.Errorf("list %s: %w", dir, err)
		}
	}
	return st, nil
}

// Run plans and, unless DryRun, executes a cleanup.
func Run(ctx context.Context, b storage.Bucket, cfg Config, now time.Time) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := Load(ctx, b, cfg.Concurrency, now)
	if err != nil {
		return nil, fmt.Errorf("cleanup stopped, nothing deleted: %w", err)
	}
	plan := PlanCleanup(st, cfg.Options, now)
	res := &Result{Plan: plan, DryRun: cfg.DryRun}
	if cfg.DryRun {
		// Only a dry run lists the whole table (the MemWAL can hold many
		// objects, and a real run deletes nothing outside Collected): the
		// operator sees what is kept because cleanup does not model it.
		err := b.List(ctx, "", func(a storage.Attrs) error {
			if !Modelled(a.Key) {
				res.Plan.Files = append(res.Plan.Files, FileDecision{Key: a.Key, Bytes: a.Size, ModTime: a.ModTime, Reason: ReasonUnmodelled})
				res.Plan.Kept[ReasonUnmodelled]++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list the table: %w", err)
		}
		return res, nil
	}
	return res, Execute(ctx, b, st, plan, cfg.Concurrency, res)
}

// Execute deletes the planned manifests, then (after re-checking for
// versions committed meanwhile) the planned files.
func Execute(ctx context.Context, b storage.Bucket, st State, plan Plan, concurrency int, res *Result) error {
	vkeys, fkeys := plan.DeleteKeys()
	// The planner judges only Collected keys; a plan naming another (a
	// caller's own plan, or a planner bug) stops before any delete.
	for _, k := range append(append([]string(nil), vkeys...), fkeys...) {
		if !collected(k) {
			return fmt.Errorf("cleanup stopped, nothing deleted: the plan deletes %s, outside the prefixes cleanup models", k)
		}
	}
	// Progress: the objects deleted (rows) and their bytes, out of every
	// planned one (a spared file counts as done).
	rep := progress.From(ctx)
	bytes := map[string]int64{}
	for _, f := range plan.Files {
		bytes[f.Key] = f.Bytes
	}
	var vbytes int64
	for _, v := range plan.Versions {
		if v.Delete {
			vbytes += v.Bytes
		}
	}
	total := progress.Units{Rows: int64(len(vkeys) + len(fkeys)), Bytes: vbytes}
	for _, k := range fkeys {
		total.Bytes += bytes[k]
	}
	rep.Start("cleanup", total)
	vsize := map[string]int64{}
	for _, v := range plan.Versions {
		if v.Delete {
			vsize[v.Key] = v.Bytes
		}
	}
	// One at a time, oldest first: the versions left are then always a
	// suffix (plus tagged ones), which meta.Latest's upward probe from a
	// stale version hint relies on. Deleted concurrently, a hinted
	// version could outlive the one above it, and the probe stopped
	// there, below the head.
	n, err := storage.DeleteAllFunc(ctx, b, vkeys, 1, func(i int) { rep.Add(1, vsize[vkeys[i]]) })
	res.DeletedVersions = n
	if err != nil {
		return fmt.Errorf("delete old manifests (%d of %d gone; no file deleted yet): %w", n, len(vkeys), err)
	}
	if len(fkeys) == 0 {
		return nil
	}
	spare, err := newlyReferenced(ctx, b, st)
	if err != nil {
		return fmt.Errorf("re-check versions before deleting files (manifests deleted, files kept): %w", err)
	}
	var keep []string
	for _, k := range fkeys {
		kind, id := classify(k)
		if spare.has(kind, id) {
			res.Spared = append(res.Spared, k)
			rep.Add(1, bytes[k])
			continue
		}
		keep = append(keep, k)
	}
	var deleted []string
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, k := range keep {
		g.Go(func() error {
			if err := b.Delete(gctx, k); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("delete %s: %w", k, err)
			}
			mu.Lock()
			deleted = append(deleted, k)
			mu.Unlock()
			rep.Add(1, bytes[k])
			return nil
		})
	}
	err = g.Wait()
	res.DeletedFiles = len(deleted)
	for _, k := range deleted {
		res.BytesReclaimed += bytes[k]
	}
	for _, v := range plan.Versions {
		if v.Delete {
			res.BytesReclaimed += v.Bytes
		}
	}
	return err
}

// newlyReferenced reads the versions that appeared after Load and returns
// what they reference.
func newlyReferenced(ctx context.Context, b storage.Bucket, st State) (refSet, error) {
	known := map[string]bool{}
	for _, v := range st.Versions {
		known[v.Key] = true
	}
	for _, v := range st.Detached {
		known[v.Key] = true
	}
	var fresh []string
	if err := b.List(ctx, meta.VersionsDir, func(a storage.Attrs) error {
		_, _, isVersion := meta.ParseManifestKey(a.Key)
		kind, _ := classify(a.Key)
		if (isVersion || kind == kindDetached) && !known[a.Key] {
			fresh = append(fresh, a.Key)
		}
		return nil
	}); err != nil {
		return refSet{}, err
	}
	out := refSet{}
	out.add(Refs{})
	for _, k := range fresh {
		data, err := b.Get(ctx, k)
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("read %s: %w", k, err)
		}
		f, err := meta.DecodeManifestFile(data)
		if err != nil {
			return out, &meta.CorruptError{Key: k, Err: err}
		}
		refs, err := ManifestRefs(k, f)
		if err != nil {
			return out, err
		}
		out.add(refs)
	}
	return out, nil
}
