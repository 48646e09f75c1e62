// Package cleanup removes old versions of a Lance dataset, and then the files
// that only those versions referenced, with the semantics of Lance's own
// cleanup (rust/lance/src/dataset/cleanup.rs, lance 12):
//
//   - A version is old when its commit timestamp is before now − OlderThan
//     (exactly: the plan has no hidden floor; OlderThan 0 makes every
//     version committed before now old; the daemon refuses an OlderThan
//     below InFlightFloor, see Config) and it is not among the newest
//     RetainVersions versions (Lance's retain_n_versions).
//   - The latest version is never deleted, nor a tagged one. Lance errors by
//     default when a tag names an old version (error_if_tagged_old_versions);
//     compactord keeps the version, deletes the rest, and reports it with
//     reason "tagged": a daemon whose cleanup stops on every tag would stop
//     collecting the table for good.
//   - Versions at or above the read version of a live compactord in-flight
//     marker (package inflight) are kept ("in_flight"): the commit loop reads
//     their transactions to classify conflicts.
//   - Files are data files (data/*.lance), deletion files
//     (_deletions/*.{arrow,bin}), transaction files (_transactions/*.txn),
//     index directories (_indices/{uuid}/…) and stale temporary manifests
//     (_versions/.tmp*). A file any kept version references is kept. A file
//     that only deleted versions reference is deleted ("verified" in Lance's
//     terms), unless its modification time is at or after the oldest kept
//     version's commit time and it is younger than MinAge (Lance lists only
//     files older than the oldest kept manifest). A file no version
//     references at all is deleted only when it is older than MinAge
//     (Lance's 7 days) and older than the oldest live in-flight marker: it
//     may belong to a commit in progress.
//   - _mem_wal/ (trim owns it), _refs/, _inflight/, the version hint,
//     detached manifests and anything not named above are never touched.
//
// Order: manifests first, then files. A crash at any point leaves every
// remaining manifest with all its files (the files go only after every
// planned manifest is gone), so LanceDB reads every version that is left;
// the files of a crashed run become unreferenced and wait for MinAge. Before
// deleting files the executor lists the versions again and keeps whatever a
// version committed meanwhile references (a Restore re-references old
// files).
package cleanup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Version reasons.
const (
	ReasonLatest        = "latest"
	ReasonRetainedCount = "retained_count"
	ReasonYoungerThan   = "younger_than"
	ReasonTagged        = "tagged"
	ReasonInFlight      = "in_flight"
	ReasonNoTimestamp   = "no_timestamp"
	ReasonOld           = "old"
)

// File reasons.
const (
	ReasonReferencedByKept       = "referenced_by_kept"
	ReasonReferencedOnlyDeleted  = "referenced_only_by_deleted"
	ReasonNewerThanOldestKept    = "newer_than_oldest_kept_version"
	ReasonUnrefYoung             = "unreferenced_younger_than_min_age"
	ReasonUnrefInFlight          = "unreferenced_newer_than_in_flight"
	ReasonUnrefOld               = "unreferenced_older_than_min_age"
	ReasonNotCollected           = "not_collected"
	ReasonVersionHint            = "version_hint"
	ReasonDetachedManifest       = "detached_manifest"
	ReasonReferencedByDetached   = "referenced_by_detached"
	ReasonReferencedByNewVersion = "referenced_by_new_version"
	// ReasonUnmodelled: the key is under a prefix cleanup does not model
	// (neither Collected nor Untouched), such as Lance 13's fragment-reuse
	// row maps under _fri/. Cleanup never lists such prefixes for deletion;
	// a dry run names what it leaves there.
	ReasonUnmodelled = "unmodelled_prefix"
)

// Modelled reports whether cleanup knows what the objects under key's
// prefix are: a Collected prefix it judges, or an Untouched one it leaves
// by design. Anything else a newer writer may have put there, and cleanup
// never deletes what it does not understand, so it keeps it.
func Modelled(key string) bool {
	for _, p := range Collected {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	for _, p := range Untouched {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// collected reports whether key is under a prefix the planner judges.
func collected(key string) bool {
	for _, p := range Collected {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// DefaultMinAge is Lance's UNVERIFIED_THRESHOLD_DAYS.
const DefaultMinAge = 7 * 24 * time.Hour

// Options is the retention policy.
type Options struct {
	// RetainVersions keeps the newest N versions (at least 1).
	RetainVersions int `yaml:"retain_versions"`
	// OlderThan: a version committed at or after now − OlderThan is kept.
	OlderThan time.Duration `yaml:"older_than"`
	// MinAge: a file no version references is kept while younger.
	MinAge time.Duration `yaml:"min_age"`
}

// Validate checks the options. A message starts with the setting's key.
func (o Options) Validate() error {
	switch {
	case o.RetainVersions < 1:
		return fmt.Errorf("retain_versions must be at least 1 (the latest version is always kept), got %d", o.RetainVersions)
	case o.OlderThan < 0:
		return fmt.Errorf("older_than must not be negative, got %s", o.OlderThan)
	case o.MinAge < 0:
		return fmt.Errorf("min_age must not be negative, got %s", o.MinAge)
	}
	return nil
}

// Refs are the files one manifest references, as table-relative keys, and
// the index directories (uuids) it references.
type Refs struct {
	Files   []string
	Indices []string
}

// Version is one version as the planner sees it.
type Version struct {
	Version uint64
	Key     string
	Bytes   int64
	// Timestamp is the manifest's commit time; zero if it has none.
	Timestamp time.Time
	Refs      Refs
}

// State is everything the planner needs, read once.
type State struct {
	Versions []Version
	// Detached are detached manifests ("d…"): never deleted, and their
	// references are kept.
	Detached []Version
	// Tags: version → tag names.
	Tags map[uint64][]string
	// Objects are every object under the collected prefixes (data/,
	// _deletions/, _indices/, _transactions/, _versions/ except manifests).
	Objects   []storage.Attrs
	Watermark inflight.Watermark
}

// VersionDecision is the verdict on one version.
type VersionDecision struct {
	Version   uint64    `json:"version"`
	Key       string    `json:"key"`
	Bytes     int64     `json:"bytes"`
	Timestamp time.Time `json:"timestamp"`
	Delete    bool      `json:"delete"`
	Reason    string    `json:"reason"`
	Tags      []string  `json:"tags,omitempty"`
}

// FileDecision is the verdict on one file.
type FileDecision struct {
	Key     string    `json:"key"`
	Bytes   int64     `json:"bytes"`
	ModTime time.Time `json:"mod_time"`
	Delete  bool      `json:"delete"`
	Reason  string    `json:"reason"`
}

// Plan is what a cleanup deletes and keeps, with a reason for each.
type Plan struct {
	Latest     uint64            `json:"latest"`
	Now        time.Time         `json:"now"`
	Cutoff     time.Time         `json:"older_than_cutoff"`
	MinAgeCut  time.Time         `json:"min_age_cutoff"`
	OldestKept time.Time         `json:"oldest_kept_timestamp"`
	Versions   []VersionDecision `json:"versions"`
	Files      []FileDecision    `json:"files"`
	// Untouched are the prefixes cleanup never lists or deletes.
	Untouched      []string       `json:"untouched_prefixes"`
	DeleteVersions int            `json:"delete_versions"`
	DeleteFiles    int            `json:"delete_files"`
	Bytes          int64          `json:"bytes_reclaimed"`
	Kept           map[string]int `json:"kept_by_reason"`
	// TaggedOld are old versions kept only because a tag names them
	// (Lance's cleanup would refuse to run).
	TaggedOld []uint64 `json:"tagged_old_versions"`
}

// Untouched is what cleanup never deletes.
var Untouched = []string{meta.MemWalDir, "_refs/", inflight.Dir, meta.HintKey}

// Collected are the prefixes whose objects the planner judges.
var Collected = []string{meta.DataDir, meta.DeletionsDir, meta.IndicesDir, meta.TransactionsDir, meta.VersionsDir}

// PlanCleanup is the pure planner.
func PlanCleanup(st State, o Options, now time.Time) Plan {
	p := Plan{
		Now: now, Cutoff: now.Add(-o.OlderThan), MinAgeCut: now.Add(-o.MinAge),
		Versions: []VersionDecision{}, Files: []FileDecision{}, Untouched: Untouched,
		Kept: map[string]int{}, TaggedOld: []uint64{},
	}
	vs := append([]Version(nil), st.Versions...)
	sort.Slice(vs, func(i, j int) bool { return vs[i].Version > vs[j].Version }) // newest first
	if len(vs) > 0 {
		p.Latest = vs[0].Version
	}
	keptRefs, delRefs := refSet{}, refSet{}
	for _, d := range st.Detached {
		keptRefs.add(d.Refs)
	}
	var oldestKept time.Time
	for i, v := range vs {
		d := VersionDecision{Version: v.Version, Key: v.Key, Bytes: v.Bytes, Timestamp: v.Timestamp, Tags: st.Tags[v.Version]}
		old := !v.Timestamp.IsZero() && v.Timestamp.Before(p.Cutoff)
		switch {
		case i == 0:
			d.Reason = ReasonLatest
		case i < o.RetainVersions:
			d.Reason = ReasonRetainedCount
		case v.Timestamp.IsZero():
			d.Reason = ReasonNoTimestamp // failing safe: age unknown
		case !old:
			d.Reason = ReasonYoungerThan
		case len(d.Tags) > 0:
			d.Reason = ReasonTagged
			p.TaggedOld = append(p.TaggedOld, v.Version)
		case st.Watermark.ReadVersion > 0 && v.Version >= st.Watermark.ReadVersion:
			d.Reason = ReasonInFlight
		default:
			d.Reason, d.Delete = ReasonOld, true
		}
		if d.Delete {
			delRefs.add(v.Refs)
			p.DeleteVersions++
			p.Bytes += v.Bytes
		} else {
			keptRefs.add(v.Refs)
			p.Kept[d.Reason]++
			if !v.Timestamp.IsZero() && (oldestKept.IsZero() || v.Timestamp.Before(oldestKept)) {
				oldestKept = v.Timestamp
			}
		}
		p.Versions = append(p.Versions, d)
	}
	p.OldestKept = oldestKept
	detached := refSet{}
	for _, d := range st.Detached {
		detached.add(d.Refs)
	}
	objs := append([]storage.Attrs(nil), st.Objects...)
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	for _, a := range objs {
		f := FileDecision{Key: a.Key, Bytes: a.Size, ModTime: a.ModTime}
		f.Reason = judgeFile(a, keptRefs, delRefs, detached, oldestKept, p.MinAgeCut, st.Watermark)
		switch f.Reason {
		case ReasonReferencedOnlyDeleted, ReasonUnrefOld:
			f.Delete = true
			p.DeleteFiles++
			p.Bytes += a.Size
		default:
			p.Kept[f.Reason]++
		}
		p.Files = append(p.Files, f)
	}
	return p
}

// judgeFile returns the reason for one object (see the package doc).
func judgeFile(a storage.Attrs, kept, del, detached refSet, oldestKept, minAgeCut time.Time, wm inflight.Watermark) string {
	kind, id := classify(a.Key)
	switch kind {
	case kindHint:
		return ReasonVersionHint
	case kindDetached:
		return ReasonDetachedManifest
	case kindOther:
		return ReasonNotCollected
	}
	if kind != kindTemp {
		if detached.has(kind, id) {
			return ReasonReferencedByDetached
		}
		if kept.has(kind, id) {
			return ReasonReferencedByKept
		}
		if del.has(kind, id) {
			if !oldestKept.IsZero() && !a.ModTime.Before(oldestKept) && !a.ModTime.Before(minAgeCut) {
				return ReasonNewerThanOldestKept
			}
			return ReasonReferencedOnlyDeleted
		}
	}
	// Referenced by no version. The modification time is the store's
	// clock; an unknown one (zero) is treated as now.
	if a.ModTime.IsZero() || !a.ModTime.Before(minAgeCut) {
		return ReasonUnrefYoung
	}
	if !wm.Started.IsZero() && !a.ModTime.Before(wm.Started) {
		return ReasonUnrefInFlight
	}
	return ReasonUnrefOld
}

type fileKind int

const (
	kindOther fileKind = iota
	kindFile           // data, deletion or transaction file: id is the key
	kindIndex          // a file of _indices/{uuid}/: id is the uuid
	kindTemp           // _versions/.tmp*: never referenced
	kindHint
	kindDetached
)

// classify sorts a key as Lance's cleanup does (path_if_not_referenced):
// only the shapes it recognises are collected.
func classify(key string) (fileKind, string) {
	switch {
	case strings.HasPrefix(key, meta.IndicesDir):
		uuid, rest, ok := strings.Cut(strings.TrimPrefix(key, meta.IndicesDir), "/")
		if !ok || uuid == "" || rest == "" {
			return kindOther, ""
		}
		return kindIndex, uuid
	case strings.HasPrefix(key, meta.DataDir):
		if strings.HasSuffix(key, ".lance") {
			return kindFile, key
		}
	case strings.HasPrefix(key, meta.DeletionsDir):
		if strings.HasSuffix(key, ".arrow") || strings.HasSuffix(key, ".bin") {
			return kindFile, key
		}
	case strings.HasPrefix(key, meta.TransactionsDir):
		if strings.HasSuffix(key, ".txn") {
			return kindFile, key
		}
	case key == meta.HintKey:
		return kindHint, ""
	case strings.HasPrefix(key, meta.VersionsDir+".tmp"):
		return kindTemp, ""
	case strings.HasPrefix(key, meta.VersionsDir+"d") && strings.HasSuffix(key, ".manifest"):
		return kindDetached, ""
	}
	return kindOther, ""
}

type refSet struct {
	files, indices map[string]bool
}

func (r *refSet) add(refs Refs) {
	if r.files == nil {
		r.files, r.indices = map[string]bool{}, map[string]bool{}
	}
	for _, f := range refs.Files {
		r.files[f] = true
	}
	for _, u := range refs.Indices {
		r.indices[u] = true
	}
}

func (r refSet) has(kind fileKind, id string) bool {
	if kind == kindIndex {
		return r.indices[id]
	}
	return r.files[id]
}

// DeleteKeys returns the keys of the planned deletions: versions (oldest
// first) and files.
func (p Plan) DeleteKeys() (versions, files []string) {
	for i := len(p.Versions) - 1; i >= 0; i-- {
		if p.Versions[i].Delete {
			versions = append(versions, p.Versions[i].Key)
		}
	}
	for _, f := range p.Files {
		if f.Delete {
			files = append(files, f.Key)
		}
	}
	return versions, files
}
