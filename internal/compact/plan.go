// Package compact compacts Lance tables as Lance's optimize does: adjacent
// small or deletion-heavy fragments are rewritten into fewer, larger ones
// with their deleted rows dropped, and the Rewrite commits either with
// every affected index remapped in place (the default, as LanceDB's
// optimize does) or with a fragment-reuse index version (deferred remap,
// an opt-in: see Options.DeferRemap).
//
// Only btree, bitmap, label-list and full-text segments can be remapped by
// compactord. A fragment covered by an index of any other kind (vector) is
// left out of the plan (a Skip): LanceDB would load such an index through
// a fragment-reuse version it cannot apply (an HNSW graph keeps its nodes
// while its vector storage loses the deleted rows, and every search fails).
//
// Plan is pure (a manifest and options in, groups out); Execute writes the
// new data files; Run reserves fragment ids, executes, and commits.
package compact

import (
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
)

// Options are Lance's CompactionOptions, with its defaults.
type Options struct {
	// TargetRowsPerFragment: fragments with fewer physical rows are small,
	// and a group holds at least this many live rows (split_for_size).
	// Lance: 1 Mi. It does not cap an output at the target: LanceDB 0.39
	// (Lance 12) spreads a group's rows evenly over as many fragments as
	// the target fits in them (a group of 1 179 648 live rows is one
	// fragment, not 1 048 576 + 131 072), and so does compactord unless
	// MaxRowsPerFile says otherwise (evenSplit).
	TargetRowsPerFragment uint64
	// MaxRowsPerFile cuts a new data file before it would pass this many
	// rows; 0 splits a group as LanceDB's optimize() does.
	MaxRowsPerFile uint64
	// MaxRowsPerGroup is Lance's max_rows_per_group, accepted so that
	// Lance's options carry over; it changes nothing here: compactord's
	// writer cuts pages by bytes (8 MiB).
	MaxRowsPerGroup uint64
	// MaxBytesPerFile cuts a new data file once it reaches this size
	// (Lance's max_bytes_per_file; 0 is Lance's default of 90 GB).
	MaxBytesPerFile uint64
	// MaterializeDeletions rewrites a fragment whose deleted share is above
	// DeletionThreshold even when it has no small neighbour.
	MaterializeDeletions bool
	DeletionThreshold    float64
	// DeferRemap commits a fragment-reuse index version instead of
	// remapping the indexes in the same commit. Until the version is
	// absorbed (`index remap`), LanceDB's own compaction (optimize) remaps
	// the indexes through its row map only, over segments still holding
	// the pre-FRI addresses: a btree or bitmap then loses rows, deletes
	// and merge-inserts by key miss them. Off by default.
	DeferRemap bool
	// Fragments, when not empty, limits the candidates to these ids.
	Fragments []uint64
	// Unremappable are segments (by uuid) of a kind compactord remaps
	// whose content it cannot (a full-text format it does not read),
	// with the reason; their fragments are left out like those of an
	// unremappable kind. PlanLatest fills it.
	Unremappable map[string]string
}

// DefaultOptions are the options of DefaultConfig.
func DefaultOptions() Options { return DefaultConfig().Options() }

// DefaultMaxBytesPerFile is Lance's max_bytes_per_file default.
const DefaultMaxBytesPerFile = 90 << 30

// Validate checks the options.
func (o Options) Validate() error {
	if err := validateTargetRows(o.TargetRowsPerFragment); err != nil {
		return err
	}
	if o.MaxRowsPerFile > MaxTargetRows {
		return fmt.Errorf("max_rows_per_file must be at most %d, got %d", uint64(MaxTargetRows), o.MaxRowsPerFile)
	}
	if o.MaxRowsPerGroup == 0 {
		return fmt.Errorf("max_rows_per_group must be positive")
	}
	return validateDeletionThreshold(o.DeletionThreshold)
}

// Reason is why a fragment is in a group.
type Reason string

// Lance's two candidacies.
const (
	// Deletions: the fragment's deleted share is above the threshold.
	Deletions Reason = "deletions"
	// Small: the fragment has fewer rows than the target.
	Small Reason = "small"
)

// Candidate is one fragment of a group.
type Candidate struct {
	Fragment *pb.DataFragment
	Reason   Reason
	// Live rows (physical minus deleted).
	Live uint64
}

// Group is one task: adjacent fragments of the manifest, covered by the
// same index segments, rewritten together. Their rows land in ascending
// fragment id order, which the fragment-reuse index's row map requires.
type Group struct {
	Candidates []Candidate
	// Indexes are the uuids of the non-system index segments covering the
	// group (all of its fragments, or none).
	Indexes []string
}

// Old returns the group's fragments in ascending id order.
func (g Group) Old() []*pb.DataFragment {
	out := make([]*pb.DataFragment, len(g.Candidates))
	for i, c := range g.Candidates {
		out[i] = c.Fragment
	}
	slices.SortFunc(out, func(a, b *pb.DataFragment) int { return cmpU64(a.GetId(), b.GetId()) })
	return out
}

// LiveRows is the rows the group's new fragments hold.
func (g Group) LiveRows() uint64 {
	n := uint64(0)
	for _, c := range g.Candidates {
		n += c.Live
	}
	return n
}

// Skip is a fragment the planner left out although it would qualify.
type Skip struct {
	Fragment uint64 `json:"fragment"`
	// Code is the class of Reason, one of the Skip* constants (a metric
	// label).
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// The classes of Skip.
const (
	// SkipIndex: an index compactord cannot remap (a kind it does not
	// know, a full-text segment in a format or with a tokenizer
	// it does not read; HNSW in a deferred compaction) covers the
	// fragment.
	SkipIndex = "unremappable_index"
	// SkipFiles: the fragment has more than one data file.
	SkipFiles = "data_files"
	// SkipBase: a file of the fragment is in another base path.
	SkipBase = "base_path"
	// SkipRows: the fragment's physical row count is not recorded.
	SkipRows = "row_count"
)

// SkipCodes are every class of Skip.
var SkipCodes = []string{SkipIndex, SkipFiles, SkipBase, SkipRows}

// Remappable reports whether compactord can remap an index segment:
// btree, bitmap, label list, full-text, and the vector kinds package
// index/vector remaps.
func Remappable(ix *pb.IndexMetadata) bool { return index.SegmentRemappable(ix) }

// Plan is the groups of one read version.
type Plan struct {
	ReadVersion uint64
	Groups      []Group
	Skips       []Skip
	// unremappable is Options.Unremappable of the plan.
	unremappable map[string]string
}

// ReuseGroup is one group of a fragment-reuse index version, by fragment
// id: an index bitmap naming its old fragments reads as naming its new
// ones (Lance remaps index bitmaps so at load).
type ReuseGroup struct{ Old, New []uint64 }

// PlanCompaction groups the fragments of read as Lance's plan_compaction
// does: a fragment is a candidate when its deleted share is above the
// threshold (it is rewritten even alone) or when it has fewer physical rows
// than the target (only together with another candidate); runs of adjacent
// candidates covered by the same index segments form bins, which are split
// into groups of at least the target's live rows.
//
// reuse is the table's fragment-reuse index, oldest version first, by
// which index bitmaps are read as LanceDB reads them. Pure.
func PlanCompaction(read *meta.ManifestFile, reuse []ReuseGroup, o Options) (*Plan, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m := read.Manifest
	p := &Plan{ReadVersion: m.GetVersion(), unremappable: o.Unremappable}
	var bitmaps []*roaring.Bitmap
	var uuids []string
	// Indexes compactord cannot remap, and the fragments they cover.
	type fixed struct {
		name, why string
		bm        *roaring.Bitmap
	}
	var pinned []fixed
	for _, ix := range read.Indices {
		if meta.IsSystemIndex(ix) {
			continue
		}
		bm, known, err := meta.FragmentBitmap(ix)
		if err != nil {
			return nil, err
		}
		if !known {
			// Lance reads a bitmap-less segment as covering every
			// fragment up to the max id of its version; every fragment
			// of ours is newer than none of them, so treat it as all.
			bm = roaring.New()
			bm.AddRange(0, uint64(m.GetMaxFragmentId())+1)
		}
		eff := EffectiveBitmap(bm, reuse)
		bitmaps = append(bitmaps, eff)
		uuids = append(uuids, meta.UUIDString(ix.GetUuid()))
		switch kind := meta.IndexKind(ix); {
		case !Remappable(ix):
			pinned = append(pinned, fixed{name: ix.GetName(), why: kind + " index %q, which compactord cannot remap (rebuild or optimize it with LanceDB)", bm: eff})
		case o.DeferRemap && vector.HasGraph(ix):
			// LanceDB remaps a vector index's storage through the FRI at
			// load but not its HNSW graphs, and refuses to search a graph
			// with more nodes than storage rows until index remap runs.
			pinned = append(pinned, fixed{name: ix.GetName(), why: "HNSW vector index %q, whose graphs a deferred remap breaks until index remap; compact with the inline remap", bm: eff})
		case o.Unremappable[meta.UUIDString(ix.GetUuid())] != "":
			why := strings.ReplaceAll(o.Unremappable[meta.UUIDString(ix.GetUuid())], "%", "%%")
			pinned = append(pinned, fixed{name: ix.GetName(), why: kind + " index %q, which compactord cannot remap: " + why, bm: eff})
		case !known && !o.DeferRemap:
			// The Rewrite swaps the remapped segment's fragments in its
			// bitmap; without one there is nothing to swap.
			pinned = append(pinned, fixed{name: ix.GetName(), why: kind + " index %q, which has no fragment bitmap to remap inline", bm: eff})
		}
	}
	only := map[uint64]bool{}
	for _, id := range o.Fragments {
		only[id] = true
	}
	type bin struct {
		cands []Candidate
		key   string
		idx   []string
	}
	var bins []bin
	var cur *bin
	flush := func() {
		if cur != nil {
			bins = append(bins, *cur)
			cur = nil
		}
	}
	for _, f := range m.GetFragments() {
		id := f.GetId()
		phys := f.GetPhysicalRows()
		del := f.GetDeletionFile().GetNumDeletedRows()
		if f.GetDeletionFile() == nil {
			del = 0
		}
		if del > phys {
			return nil, fmt.Errorf("fragment %d: %d deleted rows of %d", id, del, phys)
		}
		var reason Reason
		switch {
		case o.MaterializeDeletions && o.DeletionThreshold < 1 && phys > 0 && float64(del)/float64(phys) > o.DeletionThreshold:
			reason = Deletions
		case phys < o.TargetRowsPerFragment:
			reason = Small
		}
		if reason != "" && len(only) > 0 && !only[id] {
			reason = ""
		}
		if reason != "" {
			if code, why := unsupported(f); why != "" {
				p.Skips = append(p.Skips, Skip{Fragment: id, Code: code, Reason: why})
				reason = ""
			}
		}
		if reason != "" {
			for _, x := range pinned {
				if x.bm.Contains(uint32(id)) {
					p.Skips = append(p.Skips, Skip{Fragment: id, Code: SkipIndex, Reason: "covered by " + fmt.Sprintf(x.why, x.name)})
					reason = ""
					break
				}
			}
		}
		if reason == "" {
			flush()
			continue
		}
		var idx []string
		for i, bm := range bitmaps {
			if bm.Contains(uint32(id)) {
				idx = append(idx, uuids[i])
			}
		}
		slices.Sort(idx)
		key := strings.Join(idx, ",")
		c := Candidate{Fragment: f, Reason: reason, Live: phys - del}
		if cur != nil && cur.key != key {
			flush()
		}
		if cur == nil {
			cur = &bin{key: key, idx: idx}
		}
		cur.cands = append(cur.cands, c)
	}
	flush()
	for _, b := range bins {
		if len(b.cands) == 1 && b.cands[0].Reason == Small {
			continue // nothing to merge it with
		}
		for _, part := range splitForSize(b.cands, o.TargetRowsPerFragment) {
			p.Groups = append(p.Groups, Group{Candidates: part, Indexes: b.idx})
		}
	}
	return p, nil
}

// splitForSize cuts a bin into parts of at least target live rows each,
// the remainder joining the last part, as Lance's split_for_size.
func splitForSize(cs []Candidate, target uint64) [][]Candidate {
	var out [][]Candidate
	for {
		n, rows := 0, uint64(0)
		for rows < target && n < len(cs) {
			rows += cs[n].Live
			n++
		}
		rest := uint64(0)
		for _, c := range cs[n:] {
			rest += c.Live
		}
		if rest >= target {
			out = append(out, cs[:n:n])
			cs = cs[n:]
			continue
		}
		return append(out, cs)
	}
}

// unsupported says why compactord cannot rewrite a fragment, and the
// Skip class of that ("" if it can).
func unsupported(f *pb.DataFragment) (string, string) {
	if len(f.GetFiles()) != 1 {
		return SkipFiles, fmt.Sprintf("%d data files (added columns); compactord rewrites single-file fragments only", len(f.GetFiles()))
	}
	if f.GetFiles()[0].BaseId != nil {
		return SkipBase, "data file in another base path"
	}
	if f.GetDeletionFile() != nil && f.GetDeletionFile().BaseId != nil {
		return SkipBase, "deletion file in another base path"
	}
	if f.GetPhysicalRows() == 0 {
		return SkipRows, "physical row count unknown"
	}
	return "", ""
}

// SkipCounts counts a plan's skips by class, every class present (0 when
// none).
func (p *Plan) SkipCounts() map[string]int {
	out := map[string]int{}
	for _, c := range SkipCodes {
		out[c] = 0
	}
	for _, s := range p.Skips {
		out[s.Code]++
	}
	return out
}

// EffectiveBitmap is an index bitmap as Lance reads it through the
// fragment-reuse index: each group whose old fragments it holds reads as
// holding the new ones instead.
func EffectiveBitmap(bm *roaring.Bitmap, reuse []ReuseGroup) *roaring.Bitmap {
	out := bm.Clone()
	for _, g := range reuse {
		hit := false
		for _, id := range g.Old {
			if out.Contains(uint32(id)) {
				out.Remove(uint32(id))
				hit = true
			}
		}
		if hit {
			for _, id := range g.New {
				out.Add(uint32(id))
			}
		}
	}
	return out
}

// ReuseGroups lists the groups of a fragment-reuse index's content, oldest
// version first.
func ReuseGroups(in *pb.FragmentReuseIndexDetails_InlineContent) []ReuseGroup {
	vs := slices.Clone(in.GetVersions())
	slices.SortStableFunc(vs, func(a, b *pb.FragmentReuseIndexDetails_Version) int {
		return cmpU64(a.GetDatasetVersion(), b.GetDatasetVersion())
	})
	var out []ReuseGroup
	for _, v := range vs {
		for _, g := range v.GetGroups() {
			var rg ReuseGroup
			for _, d := range g.GetOldFragments() {
				rg.Old = append(rg.Old, d.GetId())
			}
			for _, d := range g.GetNewFragments() {
				rg.New = append(rg.New, d.GetId())
			}
			out = append(out, rg)
		}
	}
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
