package cleanup

import (
	"context"
	"fmt"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Config of a cleanup run.
type Config struct {
	Policy Policy `yaml:",inline"`
	// Concurrency bounds parallel reads and deletes.
	Concurrency int  `yaml:"concurrency"`
	DryRun      bool `yaml:"-"`
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Concurrency < 1 {
		return fmt.Errorf("cleanup concurrency must be at least 1, got %d", c.Concurrency)
	}
	return c.Policy.Validate()
}

// Result of a run.
type Result struct {
	Plan           Plan  `json:"plan"`
	DeletedFiles   int   `json:"deleted_files"`
	DeletedVersion int   `json:"deleted_versions"`
	BytesReclaimed int64 `json:"bytes_reclaimed"`
	DryRun         bool  `json:"dry_run"`
}

// Run plans and (unless DryRun) executes a cleanup.
func Run(ctx context.Context, b storage.Bucket, cfg Config, now time.Time) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Versions newest first, with their manifests' modification times
	// (the store's clock; the version floor judges age by them).
	var versions []uint64
	modTimes := map[uint64]time.Time{}
	err := b.List(ctx, table.VersionsDir, func(a storage.Attrs) error {
		if v, ok := table.ParseManifestKey(a.Key); ok {
			versions = append(versions, v)
			if !a.ModTime.IsZero() {
				modTimes[v] = a.ModTime
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	if len(versions) == 0 {
		return nil, table.ErrNoTable
	}
	tags, err := table.LoadTags(ctx, b)
	if err != nil {
		return nil, err
	}
	wm, err := inflight.Load(ctx, b, now)
	if err != nil {
		return nil, err
	}
	env := Env{Now: now, Policy: cfg.Policy, Watermark: wm, Tagged: tags, ModTimes: modTimes}

	// Read manifests newest first, only those the policy retains: a
	// 10 000-version table with retain 10 reads about 10. Once a version is
	// past the count and older than the cutoff, every older one is too
	// (commit times grow with versions, up to clock skew between writers,
	// which is small against any sensible older-than), so only tagged
	// versions are read after that.
	//
	// The version floor adds the versions whose manifests were modified
	// less than twice the floor ago: the younger ones are kept (their
	// references count), the others are judged by the later of their
	// modification and commit times, which takes reading them. Beyond twice
	// the floor the modification time decides alone: for such a version to
	// be young, the store's clock would have to lag this host's by more
	// than the floor.
	ts := map[uint64]time.Time{}
	manifests := map[uint64]*pb.Manifest{}
	recent := now.Add(-2 * table.VersionFloor)
	ageExhausted := cfg.Policy.OlderThan == 0
	cutoff := now.Add(-cfg.Policy.OlderThan)
	for i, v := range versions {
		structural := i < cfg.Policy.RetainVersions || tags[v] != "" || (wm.ReadVersion > 0 && v >= wm.ReadVersion)
		mt, known := modTimes[v]
		floorRead := !known || mt.After(recent)
		if !structural && !floorRead && ageExhausted {
			continue
		}
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			// Failing safe: a manifest we cannot read may reference anything.
			return nil, fmt.Errorf("cleanup stopped, nothing deleted: %w", err)
		}
		manifests[v] = m
		ts[v] = time.UnixMicro(m.TimestampMicros)
		if !structural && !ts[v].After(cutoff) {
			ageExhausted = true
		}
	}
	// Versions never read are old by the arguments above. The stand-in
	// commit time is before the age cutoff and before the modification
	// time, which then decides the floor alone.
	for _, v := range versions {
		if _, ok := ts[v]; !ok {
			t := cutoff
			if mt := modTimes[v]; mt.Before(t) {
				t = mt
			}
			ts[v] = t.Add(-time.Nanosecond)
		}
	}
	keep := RetainReasons(versions, ts, env)
	var kept []*pb.Manifest
	for _, v := range versions {
		if _, ok := keep[v]; !ok {
			continue
		}
		m, ok := manifests[v]
		if !ok {
			// INVARIANT: every retained version's references are known.
			return nil, fmt.Errorf("cleanup stopped, nothing deleted: internal: retained version %d was not read", v)
		}
		kept = append(kept, m)
	}
	var objects []storage.Attrs
	for _, dir := range Collected {
		if err := b.List(ctx, dir, func(a storage.Attrs) error { objects = append(objects, a); return nil }); err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
	}
	plan := Decide(versions, keep, kept, objects, env)
	res := &Result{Plan: plan, DryRun: cfg.DryRun}
	if cfg.DryRun {
		return res, nil
	}
	// Versions first (oldest first), then files. Progress counts the
	// objects deleted and their bytes.
	prog := progress.From(ctx)
	prog.Start("cleanup", progress.Units{Rows: int64(len(plan.DeleteVersions) + len(plan.DeleteFiles)), Bytes: plan.Bytes})
	deleted := func(as []Action) func(int) {
		return func(i int) { prog.Add(1, as[i].Bytes) }
	}
	n, err := storage.DeleteAllFunc(ctx, b, keys(plan.DeleteVersions), cfg.Concurrency, deleted(plan.DeleteVersions))
	res.DeletedVersion = n
	if err != nil {
		return res, err
	}
	n, err = storage.DeleteAllFunc(ctx, b, keys(plan.DeleteFiles), cfg.Concurrency, deleted(plan.DeleteFiles))
	res.DeletedFiles = n
	if n == len(plan.DeleteFiles) {
		res.BytesReclaimed = plan.Bytes
	} else {
		// Partial: count only what is certainly gone.
		for _, a := range plan.DeleteFiles {
			if _, serr := b.Attributes(ctx, a.Key); storage.IsNotFound(serr) {
				res.BytesReclaimed += a.Bytes
			}
		}
	}
	return res, err
}

func keys(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Key
	}
	return out
}
