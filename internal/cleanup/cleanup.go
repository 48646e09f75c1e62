package cleanup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/inflight"
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

// LoadTags reads `_tags/{name}`, each holding a version number.
func LoadTags(ctx context.Context, b storage.Bucket) (map[uint64]string, error) {
	tags := map[uint64]string{}
	var keys []string
	if err := b.List(ctx, table.TagsDir, func(a storage.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil {
		return nil, fmt.Errorf("list tags: %w", err)
	}
	for _, k := range keys {
		data, err := b.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read tag %s: %w", k, err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			// Failing safe: an unreadable tag stops the run rather than
			// letting the version it protects be deleted.
			return nil, fmt.Errorf("tag %s: not a version number: %q", k, data)
		}
		tags[v] = strings.TrimPrefix(k, table.TagsDir)
	}
	return tags, nil
}

// Run plans and (unless DryRun) executes a cleanup.
func Run(ctx context.Context, b storage.Bucket, cfg Config, now time.Time) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	versions, err := table.ListVersions(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, table.ErrNoTable
	}
	tags, err := LoadTags(ctx, b)
	if err != nil {
		return nil, err
	}
	wm, err := inflight.Load(ctx, b, now)
	if err != nil {
		return nil, err
	}
	env := Env{Now: now, Policy: cfg.Policy, Watermark: wm, Tagged: tags}

	// Read manifests newest first, only those the policy retains: a
	// 10 000-version table with retain 10 reads about 10. Once a version is
	// past the count and older than the cutoff, every older one is too
	// (commit times grow with versions, up to clock skew between writers,
	// which is small against any sensible older-than), so only tagged
	// versions are read after that.
	ts := map[uint64]time.Time{}
	var kept []*pb.Manifest
	read := func(v uint64) (*pb.Manifest, error) {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			// Failing safe: a manifest we cannot read may reference anything.
			return nil, fmt.Errorf("cleanup stopped, nothing deleted: %w", err)
		}
		ts[v] = time.UnixMicro(m.TimestampMicros)
		return m, nil
	}
	ageExhausted := cfg.Policy.OlderThan == 0
	cutoff := now.Add(-cfg.Policy.OlderThan)
	for i, v := range versions {
		structural := i < cfg.Policy.RetainVersions || tags[v] != "" || (wm.ReadVersion > 0 && v >= wm.ReadVersion)
		if !structural && ageExhausted {
			continue
		}
		m, err := read(v)
		if err != nil {
			return nil, err
		}
		if structural || ts[v].After(cutoff) {
			kept = append(kept, m)
			continue
		}
		ageExhausted = true
		ts[v] = time.UnixMicro(m.TimestampMicros)
	}
	// Versions never read are old by the argument above.
	for _, v := range versions {
		if _, ok := ts[v]; !ok {
			ts[v] = cutoff.Add(-time.Nanosecond)
		}
	}
	keep := Retained(versions, ts, env)
	have := map[uint64]bool{}
	for _, m := range kept {
		have[m.Version] = true
	}
	for v := range keep {
		if !have[v] {
			// INVARIANT: every retained version's references are known.
			return nil, fmt.Errorf("cleanup stopped, nothing deleted: internal: retained version %d was not read", v)
		}
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
	// Versions first (oldest first), then files.
	n, err := storage.DeleteAll(ctx, b, keys(plan.DeleteVersions), cfg.Concurrency)
	res.DeletedVersion = n
	if err != nil {
		return res, err
	}
	n, err = storage.DeleteAll(ctx, b, keys(plan.DeleteFiles), cfg.Concurrency)
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
