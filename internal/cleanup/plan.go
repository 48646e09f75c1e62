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

// Kept is one version or file a cleanup keeps, with why.
type Kept struct {
	Version uint64 `json:"version,omitempty"`
	Key     string `json:"key,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
	Reason  string `json:"reason"`
}

// Plan is what a cleanup will delete, and what it keeps and why.
type Plan struct {
	Latest       uint64   `json:"latest"`
	KeptVersions []uint64 `json:"kept_versions"`
	// KeptVersionReasons gives each kept version's reason, newest first.
	KeptVersionReasons []Kept `json:"kept_version_reasons"`
	// KeptFiles gives each file under the collected directories that is
	// kept, with its reason (referenced by a retained version, or too
	// young to judge).
	KeptFiles      []Kept   `json:"kept_files"`
	DeleteVersions []Action `json:"delete_versions"`
	DeleteFiles    []Action `json:"delete_files"`
	KeptYoung      int      `json:"kept_unreferenced_young_files"`
	Bytes          int64    `json:"bytes_reclaimed"`
}

// Reasons a version is kept, in the order Retained tests them.
const (
	KeepLatest   = "the latest version (never deleted)"
	KeepFloor    = "younger than the version floor (%s; the commit protocol needs every version that young, whatever the policy)"
	KeepCount    = "among the newest %d versions (retain-versions)"
	KeepTagged   = "tagged %q"
	KeepInFlight = "at or above the read version %d of an in-flight job"
	KeepAge      = "younger than older-than (%s)"
)

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
	for v := range RetainReasons(versions, timestamps, env) {
		keep[v] = true
	}
	return keep
}

// RetainReasons is Retained with the reason each version is kept (the
// first that applies, in the order of the Keep* constants).
func RetainReasons(versions []uint64, timestamps map[uint64]time.Time, env Env) map[uint64]string {
	keep := map[uint64]string{}
	cutoff := env.Now.Add(-env.Policy.OlderThan)
	for i, v := range versions {
		ts, known := timestamps[v]
		switch {
		case i == 0: // INVARIANT: the latest version is never deleted
			keep[v] = KeepLatest
		case YoungerThanFloor(v, timestamps, env):
			keep[v] = fmt.Sprintf(KeepFloor, table.VersionFloor)
		case i < env.Policy.RetainVersions:
			keep[v] = fmt.Sprintf(KeepCount, env.Policy.RetainVersions)
		case env.Tagged[v] != "":
			keep[v] = fmt.Sprintf(KeepTagged, env.Tagged[v])
		case env.Watermark.ReadVersion > 0 && v >= env.Watermark.ReadVersion:
			// An in-flight commit classifies against these versions.
			keep[v] = fmt.Sprintf(KeepInFlight, env.Watermark.ReadVersion)
		case env.Policy.OlderThan > 0 && (!known || ts.After(cutoff)):
			keep[v] = fmt.Sprintf(KeepAge, env.Policy.OlderThan)
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
// keep gives each kept version its reason (RetainReasons); a version kept
// without one is reported as retained.
func Decide(versions []uint64, keep map[uint64]string, kept []*pb.Manifest, objects []storage.Attrs, env Env) Plan {
	p := Plan{DeleteVersions: []Action{}, DeleteFiles: []Action{}, KeptVersions: []uint64{},
		KeptVersionReasons: []Kept{}, KeptFiles: []Kept{}}
	if len(versions) > 0 {
		p.Latest = versions[0]
	}
	for _, v := range versions {
		if r, ok := keep[v]; ok {
			if r == "" {
				r = "retained"
			}
			p.KeptVersions = append(p.KeptVersions, v)
			p.KeptVersionReasons = append(p.KeptVersionReasons, Kept{Version: v, Reason: r})
			continue
		}
		p.DeleteVersions = append(p.DeleteVersions, Action{Key: table.ManifestKey(v), Reason: fmt.Sprintf("version %d is outside retention", v)})
	}
	// The newest retained version referencing each file (kept is newest
	// first), for the reason.
	ref := map[string]uint64{}
	type prefixRef struct {
		p string
		v uint64
	}
	var prefixes []prefixRef
	for _, m := range kept {
		fs, ps := References(m)
		for _, f := range fs {
			if _, ok := ref[f]; !ok {
				ref[f] = m.Version
			}
		}
		for _, pf := range ps {
			prefixes = append(prefixes, prefixRef{pf, m.Version})
		}
	}
	sort.SliceStable(prefixes, func(i, j int) bool { return prefixes[i].p < prefixes[j].p })
	referencedBy := func(key string) (uint64, bool) {
		if v, ok := ref[key]; ok {
			return v, true
		}
		i := sort.Search(len(prefixes), func(i int) bool { return prefixes[i].p >= key })
		// A referenced prefix sorts at or before the key it contains.
		if i > 0 && strings.HasPrefix(key, prefixes[i-1].p) {
			return prefixes[i-1].v, true
		}
		if i < len(prefixes) && strings.HasPrefix(key, prefixes[i].p) {
			return prefixes[i].v, true
		}
		return 0, false
	}
	ageCut := env.Now.Add(-env.Policy.MinAge)
	for _, o := range objects {
		if v, ok := referencedBy(o.Key); ok {
			p.KeptFiles = append(p.KeptFiles, Kept{Key: o.Key, Bytes: o.Size, Reason: fmt.Sprintf("referenced by retained version %d", v)})
			continue
		}
		if !o.ModTime.Before(ageCut) {
			p.KeptYoung++
			p.KeptFiles = append(p.KeptFiles, Kept{Key: o.Key, Bytes: o.Size,
				Reason: fmt.Sprintf("unreferenced, but younger than min-age (%s): it may belong to a commit in progress", env.Policy.MinAge)})
			continue
		}
		if !env.Watermark.Started.IsZero() && !o.ModTime.Before(env.Watermark.Started) {
			p.KeptYoung++
			p.KeptFiles = append(p.KeptFiles, Kept{Key: o.Key, Bytes: o.Size,
				Reason: fmt.Sprintf("unreferenced, but written after the oldest in-flight job started (%s)", env.Watermark.Started.UTC().Format(time.RFC3339))})
			continue
		}
		p.DeleteFiles = append(p.DeleteFiles, Action{Key: o.Key, Bytes: o.Size, Reason: "referenced by no retained version"})
		p.Bytes += o.Size
	}
	sort.Slice(p.DeleteFiles, func(i, j int) bool { return p.DeleteFiles[i].Key < p.DeleteFiles[j].Key })
	sort.Slice(p.KeptFiles, func(i, j int) bool { return p.KeptFiles[i].Key < p.KeptFiles[j].Key })
	// Oldest first: a crash leaves a contiguous run of retained versions.
	sort.Slice(p.DeleteVersions, func(i, j int) bool { return p.DeleteVersions[i].Key > p.DeleteVersions[j].Key })
	return p
}
