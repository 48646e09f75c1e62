package index

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

// DefaultMaxSegments is the segments an index may have before catch-up
// rebuilds it into one instead of adding a delta.
const DefaultMaxSegments = 8

// Options configure CatchUp.
type Options struct {
	// Indices are the logical indexes to catch up; nil means every index
	// Buildable accepts.
	Indices []string
	// Rebuild replaces every segment of an index that lags with one
	// segment over the whole version instead of adding a delta.
	Rebuild bool
	// MaxSegments: an index whose delta would make more segments than this
	// is rebuilt (0: DefaultMaxSegments; negative: never); a full-text
	// index whose new partition would make more partitions than this is
	// rebuilt into one.
	MaxSegments int
	// Clock is the clock of created_at (the wall clock if nil).
	Clock clock.Clock
	// Attempts bounds the tries after a retryable conflict (0: those of
	// DefaultConfig).
	Attempts int
	// FRI is the read version's fragment-reuse index (nil: none). CatchUp
	// loads it; Plan judges coverage through its load-time remap.
	FRI *fri.Index
}

// IndexResult is what catch-up did to one index.
type IndexResult struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Fragments are the fragments the new segment covers that no segment
	// covered before.
	Fragments []uint32 `json:"fragments"`
	// Rows are the entries of the new segment.
	Rows    int    `json:"rows"`
	Segment string `json:"segment"`
	// Rebuilt: the new segment replaced Removed (every old segment).
	Rebuilt bool     `json:"rebuilt"`
	Removed []string `json:"removed,omitempty"`
}

// Skip is an index catch-up left alone, and why.
type Skip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Result is a catch-up's outcome.
type Result struct {
	// ReadVersion is the version planned from; Version the one committed
	// (0 when nothing needed committing).
	ReadVersion uint64        `json:"read_version"`
	Version     uint64        `json:"version"`
	Committed   bool          `json:"committed"`
	Indices     []IndexResult `json:"indices"`
	// Credited are the MemWAL catch-up positions a record-only commit
	// raised (no index lagged, but a maintained index's coverage was
	// proven at the read version while its record stayed behind).
	Credited []commit.Advance `json:"credited,omitempty"`
	Skipped  []Skip           `json:"skipped,omitempty"`
	Attempts int              `json:"attempts"`
}

// CatchUp builds, for every btree, bitmap and vector index (Buildable)
// that does not cover every fragment of the latest version, a segment
// over the fragments it lacks (or a rebuilt one) and commits them in one
// CreateIndex. The new segments' dataset_version is the read version, so
// the commit earns the MemWAL catch-up the read version's merged
// generations allow. A vector segment encodes its rows with the index's
// own centroids and quantizer, without retraining.
//
// When no index lags, a maintained index whose coverage is proven at the
// read version (it covers every fragment live there) while its catch-up
// record stays behind gets that credit recorded by a record-only commit
// (commit.NewRecordOnly): nothing else would ever record it, and trim
// would keep those generations for ever.
func CatchUp(ctx context.Context, h *table.Handle, o Options) (*Result, error) {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.MaxSegments == 0 {
		o.MaxSegments = DefaultMaxSegments
	}
	attempts := o.Attempts
	if attempts <= 0 {
		attempts = DefaultConfig().Replans + 1
	}
	var last error
	for i := 1; i <= attempts; i++ {
		res, err := catchUpOnce(ctx, h, o)
		if res != nil {
			res.Attempts = i
		}
		if err == nil || !errors.Is(err, commit.ErrRetryable) {
			return res, err
		}
		last = err
	}
	return nil, fmt.Errorf("index catch-up: gave up after %d conflicting attempts: %w", attempts, last)
}

// Job is the catch-up of one index: the fragments of the read version no
// segment names, and whether the index is rebuilt instead.
type Job struct {
	Name     string
	Kind     string
	Field    *pb.Field
	Segments []*pb.IndexMetadata
	Missing  *roaring.Bitmap
	Rebuild  bool
}

func catchUpOnce(ctx context.Context, h *table.Handle, o Options) (_ *Result, retErr error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	// A cleanup that removed the read version took files being read: a
	// lost race, which CatchUp re-plans.
	defer func() { retErr = table.ReadCleanedUp(ctx, h.Bucket, naming, read, "index catch-up", retErr) }()
	m := read.Manifest
	res := &Result{ReadVersion: m.GetVersion(), Indices: []IndexResult{}, Credited: []commit.Advance{}}
	if o.FRI, err = fri.Load(ctx, h.Bucket, read); err != nil {
		return nil, err
	}
	plans, skipped, err := Plan(read, o)
	if err != nil {
		return nil, err
	}
	res.Skipped = skipped
	if len(plans) == 0 {
		return recordCredit(ctx, h, read, naming, o, res)
	}
	live := roaring.New()
	for _, f := range m.GetFragments() {
		live.Add(uint32(f.GetId()))
	}
	op := &pb.Transaction_CreateIndex{}
	var keys []string
	cleanup := func() {
		for _, k := range keys {
			_ = h.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
	}
	covers := func(p Job) *roaring.Bitmap {
		if p.Rebuild {
			return live
		}
		return p.Missing
	}
	// Progress: the rows every index's new segment indexes (Collect
	// counts them per batch read).
	var total int64
	for _, p := range plans {
		total += LiveRows(m, covers(p))
	}
	progress.From(ctx).Start("index catchup", progress.Units{Rows: total})
	for _, p := range plans {
		frags := covers(p)
		if ix, ks, rows, ok, err := buildOther(ctx, h.Bucket, p, m.GetVersion(), frags, o.Clock.Now()); ok {
			keys = append(keys, ks...)
			if err != nil {
				cleanup()
				return nil, err
			}
			op.NewIndices = append(op.NewIndices, ix)
			ir := IndexResult{Name: p.Name, Kind: p.Kind, Fragments: p.Missing.ToArray(), Rows: rows, Segment: meta.UUIDString(ix.GetUuid()), Rebuilt: p.Rebuild}
			if p.Rebuild {
				op.RemovedIndices = append(op.RemovedIndices, p.Segments...)
				for _, s := range p.Segments {
					ir.Removed = append(ir.Removed, meta.UUIDString(s.GetUuid()))
				}
			}
			res.Indices = append(res.Indices, ir)
			continue
		}
		if p.Kind == KindInverted {
			maxParts := o.MaxSegments
			if o.Rebuild {
				maxParts = 1
			}
			ix, ks, rows, rebuilt, skip, err := catchUpInverted(ctx, h.Bucket, o.FRI, m.GetVersion(), p, live, maxParts, o.Clock.Now())
			keys = append(keys, ks...)
			if err != nil {
				cleanup()
				return nil, fmt.Errorf("index %s: %w", p.Name, err)
			}
			if skip != "" {
				res.Skipped = append(res.Skipped, Skip{p.Name, skip})
				continue
			}
			op.NewIndices = append(op.NewIndices, ix)
			op.RemovedIndices = append(op.RemovedIndices, p.Segments...)
			res.Indices = append(res.Indices, IndexResult{Name: p.Name, Kind: p.Kind, Fragments: p.Missing.ToArray(), Rows: rows,
				Segment: meta.UUIDString(ix.GetUuid()), Rebuilt: rebuilt, Removed: []string{meta.UUIDString(p.Segments[0].GetUuid())}})
			continue
		}
		e, err := collectFor(p.Kind)(ctx, h.Bucket, m.GetVersion(), p.Field, frags)
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("index %s: %w", p.Name, err)
		}
		w, err := WriteSegment(ctx, h.Bucket, p.Kind, p.Field, e)
		if w != nil {
			keys = append(keys, w.Keys...)
		}
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("index %s: %w", p.Name, err)
		}
		ix, err := SegmentMetadata(p.Name, p.Segments[0].GetFields(), p.Kind, p.Segments[0], m.GetVersion(), frags, w, o.Clock.Now())
		if err != nil {
			cleanup()
			return nil, err
		}
		op.NewIndices = append(op.NewIndices, ix)
		ir := IndexResult{Name: p.Name, Kind: p.Kind, Fragments: p.Missing.ToArray(), Rows: e.Len(), Segment: meta.UUIDString(w.UUID), Rebuilt: p.Rebuild}
		if p.Rebuild {
			op.RemovedIndices = append(op.RemovedIndices, p.Segments...)
			for _, s := range p.Segments {
				ir.Removed = append(ir.Removed, meta.UUIDString(s.GetUuid()))
			}
		}
		res.Indices = append(res.Indices, ir)
	}
	if len(op.NewIndices) == 0 {
		// Every lagging index was left alone (a full-text index compactord
		// cannot tokenize for): nothing to commit but what is due.
		cleanup()
		return recordCredit(ctx, h, read, naming, o, res)
	}
	txn := commit.NewTransaction(m.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if err != nil {
		return nil, fmt.Errorf("index catch-up: %w", err)
	}
	res.Version, res.Committed = cr.Version, true
	return res, nil
}

// recordCredit commits the catch-up positions due at read (commit.CreditDue)
// of the indexes o names (all when it names none) in a record-only commit.
func recordCredit(ctx context.Context, h *table.Handle, read *meta.ManifestFile, naming meta.Naming, o Options, res *Result) (*Result, error) {
	due, err := commit.CreditDue(read)
	if err != nil {
		return nil, fmt.Errorf("index catch-up: %w", err)
	}
	due = slices.DeleteFunc(due, func(a commit.Advance) bool {
		return o.Indices != nil && !slices.Contains(o.Indices, a.Index)
	})
	if len(due) == 0 {
		return res, nil
	}
	txn := commit.NewRecordOnly(read.Manifest.GetVersion())
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, RecordOnly: true})
	if errors.Is(err, commit.ErrNothingToRecord) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("index catch-up: record the catch-up: %w", err)
	}
	// Report what landed (built on the head, not on read) against read.
	if adv, err := commit.CatchupAdvances(read.Indices, cr.Manifest.Indices); err == nil {
		due = adv
	}
	res.Version, res.Committed, res.Credited = cr.Version, true, due
	return res, nil
}

// LiveRows is the rows of the fragments frags of m that no deletion vector
// masks: what Collect reads of them.
func LiveRows(m *pb.Manifest, frags *roaring.Bitmap) int64 {
	var n int64
	for _, f := range m.GetFragments() {
		if frags.Contains(uint32(f.GetId())) {
			n += int64(f.GetPhysicalRows() - min(f.GetDeletionFile().GetNumDeletedRows(), f.GetPhysicalRows()))
		}
	}
	return n
}

// Plan decides, from a read version, which indexes lag and how each is
// caught up: the fragments of the version no segment of the index names,
// and whether to rebuild.
func Plan(read *meta.ManifestFile, o Options) ([]Job, []Skip, error) {
	m := read.Manifest
	if m.GetReaderFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, nil, errors.New("index catch-up: tables with stable row ids are not supported (their indexes hold row ids, not addresses)")
	}
	maxSegs := o.MaxSegments
	if maxSegs == 0 {
		maxSegs = DefaultMaxSegments
	}
	hasFRI := len(meta.FindIndex(read.Indices, meta.FragReuseIndexName)) > 0
	if hasFRI && o.FRI == nil {
		return nil, nil, errors.New("index catch-up: the version has a fragment-reuse index; plan with it loaded (Options.FRI)")
	}
	var names []string
	for _, ix := range read.Indices {
		if !meta.IsSystemIndex(ix) && !slices.Contains(names, ix.GetName()) {
			names = append(names, ix.GetName())
		}
	}
	if o.Indices != nil {
		for _, n := range o.Indices {
			if !slices.Contains(names, n) {
				return nil, nil, fmt.Errorf("no index %q in version %d (indexes: %v)", n, m.GetVersion(), names)
			}
		}
		names = slices.Clone(o.Indices)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	byID := map[int32]*pb.Field{}
	for _, f := range m.GetFields() {
		byID[f.GetId()] = f
	}
	live := roaring.New()
	for _, f := range m.GetFragments() {
		live.Add(uint32(f.GetId()))
	}
	var plans []Job
	var skips []Skip
	for _, name := range names {
		segs := meta.FindIndex(read.Indices, name)
		kind := meta.IndexKind(segs[0])
		if !Buildable(segs[0]) {
			why := fmt.Sprintf("a %s index (compactord catches up btree, bitmap, label-list, full-text and vector indexes)", kind)
			if kind == vector.Kind {
				why = "a vector index compactord does not encode: " + vector.SegmentRefusal(segs[0])
			}
			skips = append(skips, Skip{name, why})
			continue
		}
		fields := segs[0].GetFields()
		if len(fields) != 1 {
			skips = append(skips, Skip{name, fmt.Sprintf("indexes %d fields", len(fields))})
			continue
		}
		f := byID[fields[0]]
		if f == nil || f.GetParentId() != -1 {
			skips = append(skips, Skip{name, fmt.Sprintf("field %d is not a top-level field of the schema", fields[0])})
			continue
		}
		union := roaring.New()
		unknown := false
		for _, s := range segs {
			if meta.IndexKind(s) != kind {
				return nil, nil, fmt.Errorf("index %q has segments of kinds %s and %s", name, kind, meta.IndexKind(s))
			}
			// The new segment is written "like" these (their index_version
			// included) with lance 12's content: refuse a newer version.
			if err := meta.CheckIndexVersion(s); err != nil {
				return nil, nil, err
			}
			bm, known, err := meta.FragmentBitmap(s)
			if err != nil {
				return nil, nil, err
			}
			unknown = unknown || !known
			// Coverage as a reader sees it: through the FRI's load-time
			// remap, a deferred compaction's new fragments are covered
			// by the segments that covered its old ones.
			if known && o.FRI != nil {
				bm = o.FRI.RemapBitmap(s)
			}
			union.Or(bm)
		}
		if unknown {
			skips = append(skips, Skip{name, "a segment has no fragment bitmap: its coverage is unknown"})
			continue
		}
		missing := roaring.AndNot(live, union)
		if missing.IsEmpty() {
			continue
		}
		if err := checkIndexable(kind, m.GetFields(), f); err != nil && kind != vector.Kind {
			skips = append(skips, Skip{name, err.Error()})
			continue
		}
		if why := vector.ColumnRefusal(f); kind == vector.Kind && why != "" {
			skips = append(skips, Skip{name, why})
			continue
		}
		// Coverage is judged through the FRI, so the missing fragments
		// hold no row a segment already indexes under an old address: a
		// delta indexes each row once even while segments wait for their
		// physical remap.
		// A full-text index gains a partition in a new segment replacing
		// its one segment (as LanceDB's optimize() does), or is rebuilt
		// into one partition by catchUpInverted: its segments do not pile
		// up.
		rebuild := kind != KindInverted && (o.Rebuild || (maxSegs > 0 && len(segs)+1 > maxSegs))
		plans = append(plans, Job{Name: name, Kind: kind, Field: f, Segments: segs, Missing: missing, Rebuild: rebuild})
	}
	return plans, skips, nil
}
