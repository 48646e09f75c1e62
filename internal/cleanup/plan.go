// Package cleanup removes versions that fall outside the retention policy and
// then the files no retained version references.
//
// Deletion is by reachability, plus an age margin, plus the in-flight low
// watermark; never on a clock alone. Manifests are deleted before files, so a
// crash in between leaves only unreferenced files, which the next run's
// orphan pass collects; the reverse order could leave a manifest naming a
// file that is gone.
package cleanup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Policy is the retention policy.
type Policy struct {
	// RetainVersions keeps the newest N versions (>= 1).
	RetainVersions int `yaml:"retain_versions"`
	// OlderThan keeps every version younger than this (0: age does not
	// retain).
	OlderThan time.Duration `yaml:"older_than"`
	// MinAge: an unreferenced file younger than this is kept; it may belong
	// to a commit in progress.
	MinAge time.Duration `yaml:"min_age"`
}

// DefaultPolicy keeps 10 versions and a day of history, and never touches
// an unreferenced file younger than an hour.
func DefaultPolicy() Policy {
	return Policy{RetainVersions: 10, OlderThan: 24 * time.Hour, MinAge: time.Hour}
}

// Validate checks the policy.
func (p Policy) Validate() error {
	switch {
	case p.RetainVersions < 1:
		return fmt.Errorf("retain-versions must be at least 1 (the latest version is always kept), got %d", p.RetainVersions)
	case p.OlderThan < 0:
		return fmt.Errorf("older-than must not be negative, got %s", p.OlderThan)
	case p.MinAge < 0:
		return fmt.Errorf("min-age must not be negative, got %s", p.MinAge)
	}
	return nil
}

// Env is everything Decide needs besides the table.
type Env struct {
	Now       time.Time
	Policy    Policy
	Watermark inflight.Watermark
	// Tagged versions are kept whatever their age.
	Tagged map[uint64]string
	// ModTimes gives the store's modification time of each version's
	// manifest object, where known (see Retained).
	ModTimes map[uint64]time.Time
}

// Action is one deletion with its reason.
type Action struct {
	Key    string `json:"key"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

// Plan is what a cleanup will delete.
type Plan struct {
	Latest         uint64   `json:"latest"`
	KeptVersions   []uint64 `json:"kept_versions"`
	DeleteVersions []Action `json:"delete_versions"`
	DeleteFiles    []Action `json:"delete_files"`
	KeptYoung      int      `json:"kept_unreferenced_young_files"`
	Bytes          int64    `json:"bytes_reclaimed"`
}

// Retained decides which versions the policy keeps. versions is newest
// first; timestamps gives each version's commit time where known (a version
// without one is judged young, i.e. kept, if OlderThan is set).
//
// Whatever the policy, a version younger than table.VersionFloor is kept
// (INVARIANT; the commit protocol's fast path rests on it). Its age is
// judged by the later of its manifest's modification time in Env.ModTimes
// and its commit time, so that either clock may lag; a version whose
// modification time is unknown is kept. The commit time alone cannot tell:
// it is the transaction's, taken when a job started, possibly long before
// the commit.
func Retained(versions []uint64, timestamps map[uint64]time.Time, env Env) map[uint64]bool {
	keep := map[uint64]bool{}
	cutoff := env.Now.Add(-env.Policy.OlderThan)
	for i, v := range versions {
		ts, known := timestamps[v]
		switch {
		case i == 0: // INVARIANT: the latest version is never deleted
			keep[v] = true
		case YoungerThanFloor(v, timestamps, env):
			keep[v] = true
		case i < env.Policy.RetainVersions:
			keep[v] = true
		case env.Tagged[v] != "":
			keep[v] = true
		case env.Watermark.ReadVersion > 0 && v >= env.Watermark.ReadVersion:
			// An in-flight commit classifies against these versions.
			keep[v] = true
		case env.Policy.OlderThan > 0 && (!known || ts.After(cutoff)):
			keep[v] = true
		}
	}
	return keep
}

// YoungerThanFloor reports whether version v may be younger than
// table.VersionFloor: its manifest's modification time (env.ModTimes) is
// unknown, or the later of it and the commit time (timestamps) is within the
// floor of env.Now.
func YoungerThanFloor(v uint64, timestamps map[uint64]time.Time, env Env) bool {
	created, ok := env.ModTimes[v]
	if !ok || created.IsZero() {
		return true
	}
	if ts, ok := timestamps[v]; ok && ts.After(created) {
		created = ts
	}
	return created.After(env.Now.Add(-table.VersionFloor))
}

// References lists every file a manifest references, relative to the table
// root. Index segments are referenced as their whole directory prefix.
func References(m *pb.Manifest) (files []string, prefixes []string) {
	for _, f := range m.Fragments {
		files = append(files, f.GetDataFile().GetPath())
		if d := f.GetDeletionFile(); d != nil {
			files = append(files, d.Path)
		}
	}
	for _, ix := range m.Indices {
		if ix.Uuid != "" {
			prefixes = append(prefixes, table.IndexDir(ix.Uuid))
		}
		files = append(files, ix.GetScalar().GetFiles()...)
	}
	if m.TransactionPath != "" {
		files = append(files, m.TransactionPath)
	}
	return files, prefixes
}

// Collected are the directories cleanup owns. _mem_wal/ belongs to trim,
// _versions/ to the version pass, _inflight/ and _leases/ to their owners.
var Collected = []string{table.DataDir, table.DeletionsDir, table.IndicesDir, table.TransactionsDir}

// Decide is the pure core: given the versions (newest first), the
// manifests of the retained ones, and the objects under Collected, it plans
// the deletions.
func Decide(versions []uint64, keep map[uint64]bool, kept []*pb.Manifest, objects []storage.Attrs, env Env) Plan {
	p := Plan{DeleteVersions: []Action{}, DeleteFiles: []Action{}, KeptVersions: []uint64{}}
	if len(versions) > 0 {
		p.Latest = versions[0]
	}
	for _, v := range versions {
		if keep[v] {
			p.KeptVersions = append(p.KeptVersions, v)
			continue
		}
		p.DeleteVersions = append(p.DeleteVersions, Action{Key: table.ManifestKey(v), Reason: fmt.Sprintf("version %d is outside retention", v)})
	}
	ref := map[string]bool{}
	var prefixes []string
	for _, m := range kept {
		fs, ps := References(m)
		for _, f := range fs {
			ref[f] = true
		}
		prefixes = append(prefixes, ps...)
	}
	sort.Strings(prefixes)
	referenced := func(key string) bool {
		if ref[key] {
			return true
		}
		i := sort.SearchStrings(prefixes, key)
		// A referenced prefix sorts at or before the key it contains.
		return i > 0 && strings.HasPrefix(key, prefixes[i-1]) || i < len(prefixes) && strings.HasPrefix(key, prefixes[i])
	}
	ageCut := env.Now.Add(-env.Policy.MinAge)
	for _, o := range objects {
		if referenced(o.Key) {
			continue
		}
		if !o.ModTime.Before(ageCut) || (!env.Watermark.Started.IsZero() && !o.ModTime.Before(env.Watermark.Started)) {
			p.KeptYoung++
			continue
		}
		p.DeleteFiles = append(p.DeleteFiles, Action{Key: o.Key, Bytes: o.Size, Reason: "referenced by no retained version"})
		p.Bytes += o.Size
	}
	sort.Slice(p.DeleteFiles, func(i, j int) bool { return p.DeleteFiles[i].Key < p.DeleteFiles[j].Key })
	// Oldest first: a crash leaves a contiguous run of retained versions.
	sort.Slice(p.DeleteVersions, func(i, j int) bool { return p.DeleteVersions[i].Key > p.DeleteVersions[j].Key })
	return p
}
