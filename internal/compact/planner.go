// Package compact rewrites small or deletion-heavy fragments into fewer,
// larger ones (the "compact" job).
//
// Spec → Job → Attempt: the Config is the spec; Plan, a pure function of
// one manifest and an Env, decides the jobs (groups of fragments); an
// Execute writes the new fragments of every job (files invisible until
// committed) and Commit publishes them as one Rewrite, planned and
// committed against the same read version.
//
// Index remapping is deferred by default: the Rewrite carries a
// fragment-reuse (FRI) version and the indices keep their old addresses
// until the index job remaps them. With inline remap the job rewrites every
// affected index segment itself and commits the new segments with the new
// fragments.
package compact

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/table"
)

// Env is everything Plan depends on besides the manifest.
type Env struct {
	// TargetRowsPerFragment: a fragment with fewer live rows is small, and
	// no output fragment holds more.
	TargetRowsPerFragment uint64
	// DeletionThreshold: a fragment whose deleted share of physical rows is
	// at least this is deletion-heavy (0 < t <= 1).
	DeletionThreshold float64
	// MaxBytesPerGroup bounds the input data bytes of one job (0: no bound).
	// A single deletion-heavy fragment larger than it still forms a job.
	MaxBytesPerGroup uint64
	// InFlight lists fragments claimed by jobs still running; they are
	// left alone and break adjacency.
	InFlight []uint32
	// Only, when non-empty, restricts the plan to these fragments (an
	// operator's selection).
	Only []uint32
	// Now stamps the jobs; it never influences a decision.
	Now time.Time
}

// Validate checks the environment.
func (e Env) Validate() error {
	switch {
	case e.TargetRowsPerFragment == 0:
		return fmt.Errorf("compact: target rows per fragment must be positive")
	case !(e.DeletionThreshold > 0 && e.DeletionThreshold <= 1):
		return fmt.Errorf("compact: deletion threshold must be in (0, 1], got %v", e.DeletionThreshold)
	}
	return nil
}

// Job is one group of adjacent fragments to rewrite together.
type Job struct {
	// ReadVersion is the version the job was planned from; the commit uses
	// it (never the head: Lance #6653 brought deleted rows back that way).
	ReadVersion uint64 `json:"read_version"`
	// Fragments, ascending.
	Fragments []uint32 `json:"fragments"`
	// LiveRows, DeletedRows and Bytes are the inputs' totals.
	LiveRows    uint64 `json:"live_rows"`
	DeletedRows uint64 `json:"deleted_rows"`
	Bytes       uint64 `json:"bytes"`
	// OutputFragments is how many fragments the job writes.
	OutputFragments uint64 `json:"output_fragments"`
	// Reason: "small", "deletions" or "small,deletions".
	Reason string `json:"reason"`
	// Indices are the segments covering the group, as "name/uuid"; every
	// fragment of the group is covered by exactly these.
	Indices   []string  `json:"indices"`
	PlannedAt time.Time `json:"planned_at"`
}

// fragInfo is what the planner needs of one fragment.
type fragInfo struct {
	f        *pb.Fragment
	live     uint64
	deleted  uint64
	bytes    uint64
	small    bool
	heavy    bool
	coverKey string
	cover    []string
}

// Plan groups adjacent (in fragment-id order) small or deletion-heavy
// fragments into jobs, in ascending order of their first fragment. It is a
// pure function of m and env.
//
// A group never spans fragments covered by different sets of index
// segments (coverage after the load-time FRI remap): otherwise some segment
// would cover part of the group, and the load-time remap would drop that
// part from the segment and leave its rows to a scan. A
// corrupt fragment bitmap is an error: coverage is unknown, so no group is
// provably safe.
func Plan(m *pb.Manifest, env Env) ([]Job, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	var segs []*pb.IndexMetadata
	for _, ix := range m.Indices {
		if !table.IsSystemIndex(ix) {
			segs = append(segs, ix)
		}
	}
	covers, err := fri.LoadCoverage(segs, table.FragReuse(m).GetVersions())
	if err != nil {
		return nil, fmt.Errorf("compact plan: %w", err)
	}
	excluded := roaring.BitmapOf(env.InFlight...)
	var only *roaring.Bitmap
	if len(env.Only) > 0 {
		only = roaring.BitmapOf(env.Only...)
	}
	frags := slices.Clone(m.Fragments)
	slices.SortFunc(frags, func(a, b *pb.Fragment) int { return cmpU32(a.Id, b.Id) })

	var jobs []Job
	var run []fragInfo
	flush := func() {
		jobs = append(jobs, pack(m.Version, run, env)...)
		run = run[:0]
	}
	for _, f := range frags {
		fi := describe(f, segs, covers, env)
		eligible := (fi.small || fi.heavy) && !excluded.Contains(f.Id) && (only == nil || only.Contains(f.Id))
		if !eligible {
			flush()
			continue
		}
		if len(run) > 0 && run[len(run)-1].coverKey != fi.coverKey {
			flush()
		}
		run = append(run, fi)
	}
	flush()
	return jobs, nil
}

func describe(f *pb.Fragment, segs []*pb.IndexMetadata, covers []*roaring.Bitmap, env Env) fragInfo {
	fi := fragInfo{f: f, live: table.LiveRows(f), bytes: f.GetDataFile().GetSizeBytes()}
	fi.deleted = f.PhysicalRows - fi.live
	fi.small = fi.live < env.TargetRowsPerFragment
	fi.heavy = fi.deleted > 0 && float64(fi.deleted) >= env.DeletionThreshold*float64(f.PhysicalRows)
	for i, c := range covers {
		// A segment of unknown coverage (no bitmap) cannot be straddled
		// by the load-time remap (it has no coverage to lose).
		if c != nil && c.Contains(f.Id) {
			fi.cover = append(fi.cover, segs[i].Name+"/"+segs[i].Uuid)
		}
	}
	slices.Sort(fi.cover)
	fi.coverKey = strings.Join(fi.cover, "\x00")
	return fi
}

// pack cuts one run of adjacent, equally covered candidates into jobs: a
// job grows while its live rows fit the target and its bytes fit the bound.
// A job of one fragment is kept only when the fragment is deletion-heavy:
// rewriting a lone small fragment gains nothing.
func pack(readVersion uint64, run []fragInfo, env Env) []Job {
	var out []Job
	var cur []fragInfo
	var rows, bytes uint64
	emit := func() {
		if len(cur) > 1 || len(cur) == 1 && cur[0].heavy {
			out = append(out, newJob(readVersion, cur, env))
		}
		cur, rows, bytes = nil, 0, 0
	}
	for _, fi := range run {
		fitsRows := rows+fi.live <= env.TargetRowsPerFragment
		fitsBytes := env.MaxBytesPerGroup == 0 || bytes+fi.bytes <= env.MaxBytesPerGroup
		if len(cur) > 0 && (!fitsRows || !fitsBytes) {
			emit()
		}
		cur = append(cur, fi)
		rows += fi.live
		bytes += fi.bytes
	}
	emit()
	return out
}

func newJob(readVersion uint64, fs []fragInfo, env Env) Job {
	j := Job{ReadVersion: readVersion, Indices: append([]string{}, fs[0].cover...), PlannedAt: env.Now}
	small, heavy := false, false
	for _, fi := range fs {
		j.Fragments = append(j.Fragments, fi.f.Id)
		j.LiveRows += fi.live
		j.DeletedRows += fi.deleted
		j.Bytes += fi.bytes
		small = small || fi.small
		heavy = heavy || fi.heavy
	}
	j.OutputFragments = (j.LiveRows + env.TargetRowsPerFragment - 1) / env.TargetRowsPerFragment
	switch {
	case small && heavy:
		j.Reason = "small,deletions"
	case heavy:
		j.Reason = "deletions"
	default:
		j.Reason = "small"
	}
	return j
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
