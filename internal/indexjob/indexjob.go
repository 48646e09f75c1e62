// Package indexjob is the index maintenance job (the "index" job):
// catch up the indices over fragments they do not cover, physically remap
// segments whose data predates fragment-reuse (FRI) versions, and trim the
// FRI versions every segment has absorbed.
//
// Each step plans against one read version, writes segment files that stay
// invisible until committed, and commits CreateIndex transactions. A
// retryable conflict (another writer replaced the same segments, or the FRI
// changed under a trim) plans the step again.
package indexjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Config of the index job.
type Config struct {
	// Indices limits the job to these logical indices. Empty: every index,
	// or only the MemWAL's maintained ones when OnlyMaintained is set.
	Indices        []string `yaml:"indices"`
	OnlyMaintained bool     `yaml:"only_maintained"`
	// Replans bounds how often a step plans again after a retryable
	// conflict (default 3).
	Replans int               `yaml:"replans"`
	Build   index.BuildConfig `yaml:"build"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Replans < 0 {
		return fmt.Errorf("indexjob.replans must not be negative, got %d", c.Replans)
	}
	return nil
}

// Job runs index maintenance on one table. Construct it with New.
type Job struct {
	cfg    Config
	t      *ops.Table
	logger *zap.Logger
}

// New checks its arguments and starts nothing; logger may be nil.
func New(cfg Config, t *ops.Table, logger *zap.Logger) (*Job, error) {
	if cfg.Replans == 0 {
		cfg.Replans = 3
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New("indexjob: nil table")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Job{cfg: cfg, t: t, logger: logger.With(zap.String("component", "indexjob"))}, nil
}

// Step is what one step committed.
type Step struct {
	// Version is the version the step committed, or the head it read when
	// there was nothing to do.
	Version   uint64 `json:"version"`
	Committed bool   `json:"committed"`
	// Indices names the logical indices changed.
	Indices []string `json:"indices,omitempty"`
	// Segments counts the segments written (catch-up, remap).
	Segments int `json:"segments"`
	// Dropped and Kept count FRI versions (trim).
	Dropped int `json:"fri_versions_dropped"`
	Kept    int `json:"fri_versions_kept"`
}

// Outcome of Run.
type Outcome struct {
	CatchUp *Step `json:"catchup"`
	Remap   *Step `json:"remap"`
	Trim    *Step `json:"trim"`
}

// Run catches up, remaps, then trims.
func (j *Job) Run(ctx context.Context) (*Outcome, error) {
	var out Outcome
	var err error
	if out.CatchUp, err = j.CatchUp(ctx); err != nil {
		return nil, err
	}
	if out.Remap, err = j.Remap(ctx); err != nil {
		return nil, err
	}
	if out.Trim, err = j.Trim(ctx); err != nil {
		return nil, err
	}
	return &out, nil
}

// retry runs step until it does not end in a retryable conflict.
func (j *Job) retry(ctx context.Context, name string, step func(context.Context) (*Step, error)) (s *Step, err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			j.logger.Warn("index step failed", zap.String("step", name), zap.Float64("duration_seconds", time.Since(start).Seconds()), zap.Error(err))
		} else if s.Committed {
			j.logger.Info("index step committed", zap.String("step", name), zap.Uint64("version", s.Version), zap.Float64("duration_seconds", time.Since(start).Seconds()))
		}
	}()
	for attempt := 0; ; attempt++ {
		s, err = step(ctx)
		if errors.Is(err, commit.ErrRetryable) && attempt < j.cfg.Replans {
			j.logger.Info("index step conflicted; planning again", zap.String("step", name), zap.Error(err))
			continue
		}
		return s, err
	}
}

// targets lists the logical indices the job maintains in m.
func (j *Job) targets(m *pb.Manifest) ([]string, error) {
	all := index.Names(m)
	var want []string
	switch {
	case len(j.cfg.Indices) > 0:
		want = j.cfg.Indices
	case j.cfg.OnlyMaintained:
		want = table.MemWal(m).GetMaintainedIndexes()
	default:
		return all, nil
	}
	for _, n := range want {
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("%w %q", index.ErrNoIndex, n)
		}
	}
	return want, nil
}

// CatchUp builds, for every target index, a delta segment over the live
// fragments it does not cover (after the load-time remap), and commits them
// in one CreateIndex.
func (j *Job) CatchUp(ctx context.Context) (*Step, error) {
	return j.retry(ctx, "catchup", j.catchUpOnce)
}

func (j *Job) catchUpOnce(ctx context.Context) (*Step, error) {
	head, err := table.ReadLatest(ctx, j.t.Bucket)
	if err != nil {
		return nil, err
	}
	names, err := j.targets(head)
	if err != nil {
		return nil, err
	}
	step := &Step{Version: head.Version}
	var work progress.Units
	for _, n := range names {
		ids, err := index.Unindexed(head, n)
		if err != nil {
			continue // CatchUpSegment reports it
		}
		for _, id := range ids {
			if f := table.FragmentByID(head, id); f != nil {
				work.Rows += int64(f.PhysicalRows)
				work.Bytes += int64(f.GetDataFile().GetSizeBytes())
			}
		}
	}
	progress.From(ctx).Start("index catchup", work)
	var segs []*pb.IndexMetadata
	for _, n := range names {
		seg, err := index.CatchUpSegment(ctx, j.t.Bucket, head, n, j.cfg.Build)
		if err != nil {
			j.removeFiles(ctx, index.SegmentFiles(segs...))
			return nil, err
		}
		if seg != nil {
			segs = append(segs, seg)
			step.Indices = append(step.Indices, n)
		}
	}
	if len(segs) == 0 {
		return step, nil
	}
	res, err := j.commit(ctx, head, &pb.CreateIndex{NewIndices: segs})
	if err != nil {
		return nil, err
	}
	step.Version, step.Committed, step.Segments = res.Manifest.Version, true, len(segs)
	return step, nil
}

// Remap physically remaps every segment whose data predates an FRI version
// that touches it (fri.NeedsRemap decides from the segment's data age, not
// from its already-remapped coverage: Lance #7286). The chain is compiled
// once; each rebuilt segment gets remapped addresses (rows deleted or in
// dead fragments dropped), a new uuid and dataset_version = the head read.
// One CreateIndex per logical index replaces its old segments.
func (j *Job) Remap(ctx context.Context) (*Step, error) {
	head, err := table.ReadLatest(ctx, j.t.Bucket)
	if err != nil {
		return nil, err
	}
	names, err := j.targets(head)
	if err != nil {
		return nil, err
	}
	total := &Step{Version: head.Version}
	for _, name := range names {
		s, err := j.retry(ctx, "remap", func(ctx context.Context) (*Step, error) { return j.remapIndex(ctx, name) })
		if err != nil {
			return nil, err
		}
		total.Version = max(total.Version, s.Version)
		if s.Committed {
			total.Committed = true
			total.Indices = append(total.Indices, name)
			total.Segments += s.Segments
		}
	}
	return total, nil
}

// remapIndex remaps the stale segments of logical index name, if any, in
// one CreateIndex.
func (j *Job) remapIndex(ctx context.Context, name string) (*Step, error) {
	head, err := table.ReadLatest(ctx, j.t.Bucket)
	if err != nil {
		return nil, err
	}
	step := &Step{Version: head.Version}
	versions := table.FragReuse(head).GetVersions()
	if len(versions) == 0 {
		return step, nil
	}
	segs, err := index.Segments(head, name)
	if errors.Is(err, index.ErrNoIndex) {
		return step, nil // dropped since the job started
	}
	if err != nil {
		return nil, err
	}
	var stale []*pb.IndexMetadata
	for _, s := range segs {
		if fri.NeedsRemap(s, versions) {
			stale = append(stale, s)
		}
	}
	if len(stale) == 0 {
		return step, nil
	}
	// The chain is composed once for the logical index; each segment
	// enters it at its own dataset_version.
	chain, err := fri.Compile(versions)
	if err != nil {
		return nil, fmt.Errorf("index %q: fragment-reuse index: %w", name, err)
	}
	live := roaring.New()
	for _, f := range head.Fragments {
		live.Add(f.Id)
	}
	var work progress.Units
	for _, s := range stale {
		work.Rows += int64(s.GetScalar().GetNumEntries())
		work.Bytes += int64(s.GetScalar().GetSizeBytes())
	}
	prog := progress.From(ctx)
	prog.Start("index remap "+name, work)
	op := &pb.CreateIndex{}
	for _, s := range stale {
		cover, err := index.Coverage(s, versions)
		if err != nil {
			j.removeFiles(ctx, index.SegmentFiles(op.NewIndices...))
			return nil, err
		}
		if cover == nil {
			// Unknown coverage: claim nothing. The rewrite keeps no
			// entry outside the cover, so the segment empties and its
			// fragments are caught up by a scan or a catch-up segment.
			cover = roaring.New()
		}
		cover.And(live)
		ns, err := index.Rewrite(ctx, j.t.Bucket, head, []*pb.IndexMetadata{s}, index.RewriteSpec{Chain: chain, Cover: cover}, j.cfg.Build)
		if err != nil {
			j.removeFiles(ctx, index.SegmentFiles(op.NewIndices...))
			return nil, err
		}
		op.NewIndices = append(op.NewIndices, ns)
		op.RemovedIndexUuids = append(op.RemovedIndexUuids, s.Uuid)
		prog.Add(int64(s.GetScalar().GetNumEntries()), int64(s.GetScalar().GetSizeBytes()))
	}
	res, err := j.commit(ctx, head, op)
	if err != nil {
		return nil, err
	}
	step.Version, step.Committed, step.Segments, step.Indices = res.Manifest.Version, true, len(op.NewIndices), []string{name}
	return step, nil
}

// Trim drops the FRI versions no segment needs any more (fri.Trim: every
// segment has absorbed the version or is disjoint from its old and new
// fragments, Lance #7870) by committing the new __frag_reuse singleton, or
// its removal when no version is left.
func (j *Job) Trim(ctx context.Context) (*Step, error) {
	return j.retry(ctx, "trim", j.trimOnce)
}

func (j *Job) trimOnce(ctx context.Context) (*Step, error) {
	head, err := table.ReadLatest(ctx, j.t.Bucket)
	if err != nil {
		return nil, err
	}
	step := &Step{Version: head.Version}
	details := table.FragReuse(head)
	if len(details.GetVersions()) == 0 {
		return step, nil
	}
	kept, dropped := fri.Trim(details, head.Indices)
	step.Dropped, step.Kept = dropped, len(kept.Versions)
	if dropped == 0 {
		return step, nil
	}
	singleton := &pb.IndexMetadata{
		Uuid: uuid.NewString(), Name: table.FragReuseIndexName, Type: table.FragReuseIndexName,
		DatasetVersion: head.Version,
		Details:        &pb.IndexMetadata_FragReuse{FragReuse: kept},
	}
	res, err := j.commit(ctx, head, &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{singleton}})
	if err != nil {
		return nil, err
	}
	step.Version, step.Committed = res.Manifest.Version, true
	step.Indices = []string{table.FragReuseIndexName}
	return step, nil
}

func (j *Job) commit(ctx context.Context, read *pb.Manifest, op *pb.CreateIndex) (*commit.Result, error) {
	txn := j.t.NewTxn(read.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: op}
	return j.t.CommitOrClean(ctx, txn, index.SegmentFiles(op.NewIndices...))
}

func (j *Job) removeFiles(ctx context.Context, files []string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, f := range files {
		if err := j.t.Bucket.Delete(dctx, f); err != nil && !storage.IsNotFound(err) {
			j.logger.Warn("could not remove an uncommitted segment file; orphan cleanup will", zap.String("key", f), zap.Error(err))
		}
	}
}
