package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/parquet-go/parquet-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Compactor runs compaction jobs on one table. Construct it with New.
type Compactor struct {
	cfg     Config
	t       *ops.Table
	logger  *zap.Logger
	metrics *Metrics
	// IndexConfig bounds the segments an inline remap writes.
	IndexConfig index.BuildConfig

	mu       sync.Mutex
	inFlight map[uint32]int
}

// New checks its arguments and starts nothing. Zero config fields take
// DefaultConfig values; logger and metrics may be nil.
func New(cfg Config, t *ops.Table, logger *zap.Logger, metrics *Metrics) (*Compactor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New("compact: nil table")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Compactor{cfg: cfg, t: t, logger: logger.With(zap.String("component", "compact")), metrics: metrics, inFlight: map[uint32]int{}}, nil
}

// Config returns the effective configuration.
func (c *Compactor) Config() Config { return c.cfg }

// Stats describe one compaction.
type Stats struct {
	Groups                 int    `json:"groups"`
	FragmentsIn            int    `json:"fragments_in"`
	FragmentsOut           int    `json:"fragments_out"`
	Rows                   uint64 `json:"rows"`
	BytesRead              uint64 `json:"bytes_read"`
	BytesWritten           uint64 `json:"bytes_written"`
	RowGroupsCopied        int64  `json:"row_groups_copied"`
	RowsRewritten          int64  `json:"rows_rewritten"`
	IndexSegmentsRewritten int    `json:"index_segments_rewritten"`
}

func (s *Stats) add(o Stats) {
	s.Groups += o.Groups
	s.FragmentsIn += o.FragmentsIn
	s.FragmentsOut += o.FragmentsOut
	s.Rows += o.Rows
	s.BytesRead += o.BytesRead
	s.BytesWritten += o.BytesWritten
	s.RowGroupsCopied += o.RowGroupsCopied
	s.RowsRewritten += o.RowsRewritten
	s.IndexSegmentsRewritten += o.IndexSegmentsRewritten
}

// Prepared is an executed compaction: its files are written, and Txn, read
// at the plan's version, is ready to commit.
type Prepared struct {
	Read  *pb.Manifest
	Jobs  []Job
	Txn   *pb.Transaction
	Files []string
	Stats Stats
}

// Plan reads the head and plans against it; only, when set, restricts the
// candidates.
func (c *Compactor) Plan(ctx context.Context, only []uint32) (*pb.Manifest, []Job, error) {
	head, err := table.ReadLatest(ctx, c.t.Bucket)
	if err != nil {
		return nil, nil, err
	}
	env := c.cfg.Env(c.t.Now(), c.claimed())
	env.Only = only
	jobs, err := Plan(head, env)
	return head, jobs, err
}

func (c *Compactor) claimed() []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint32, 0, len(c.inFlight))
	for id := range c.inFlight {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (c *Compactor) claim(jobs []Job, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range jobs {
		for _, id := range j.Fragments {
			if c.inFlight[id] += delta; c.inFlight[id] <= 0 {
				delete(c.inFlight, id)
			}
		}
	}
}

// groupResult is one rewritten group.
type groupResult struct {
	rw    *pb.RewriteGroup
	fri   *pb.FragReuseGroup
	stats Stats
}

// Execute rewrites every job's fragments, in parallel up to the configured
// limit, and prepares the Rewrite at read's version. Files written by a
// failed Execute are removed.
func (c *Compactor) Execute(ctx context.Context, read *pb.Manifest, jobs []Job) (_ *Prepared, err error) {
	p := &Prepared{Read: read, Jobs: jobs}
	var mu sync.Mutex
	addFiles := func(fs ...string) {
		mu.Lock()
		defer mu.Unlock()
		p.Files = append(p.Files, fs...)
	}
	defer func() {
		if err != nil {
			c.removeFiles(ctx, p.Files)
		}
	}()
	seen := roaring.New()
	for _, j := range jobs {
		if j.ReadVersion != read.Version {
			return nil, fmt.Errorf("compact: job planned at version %d executed against %d", j.ReadVersion, read.Version)
		}
		for _, id := range j.Fragments {
			if table.FragmentByID(read, id) == nil {
				return nil, fmt.Errorf("compact: fragment %d is not live at version %d", id, read.Version)
			}
			if !seen.CheckedAdd(id) {
				return nil, fmt.Errorf("compact: fragment %d is in two jobs", id)
			}
		}
	}
	results := make([]*groupResult, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Parallelism)
	for i, j := range jobs {
		g.Go(func() error {
			r, files, err := c.rewriteGroup(gctx, read, j)
			addFiles(files...)
			if err != nil {
				return fmt.Errorf("compact fragments %v: %w", j.Fragments, err)
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rw := &pb.Rewrite{}
	var friGroups []*pb.FragReuseGroup
	for _, r := range results {
		rw.Groups = append(rw.Groups, r.rw)
		friGroups = append(friGroups, r.fri)
		p.Stats.add(r.stats)
	}
	if c.cfg.InlineRemap {
		ri, files, n, err := c.inlineRemap(ctx, read, rw, friGroups)
		addFiles(files...)
		if err != nil {
			return nil, err
		}
		rw.Remap = &pb.Rewrite_RewrittenIndices{RewrittenIndices: ri}
		p.Stats.IndexSegmentsRewritten = n
	} else {
		// BuildManifest fills in the new ids, dataset_version and
		// removed_fragments, against the head it commits on.
		rw.Remap = &pb.Rewrite_FragReuseVersion{FragReuseVersion: &pb.FragReuseVersion{Groups: friGroups, ReadVersion: read.Version}}
	}
	p.Txn = c.t.NewTxn(read.Version)
	p.Txn.Operation = &pb.Transaction_Rewrite{Rewrite: rw}
	return p, nil
}

// Commit publishes a prepared compaction with the plan's read version
// (never the head: Lance #6653). Deletions committed since are rebased
// onto the new fragments by the commit loop.
func (c *Compactor) Commit(ctx context.Context, p *Prepared) (*commit.Result, error) {
	res, err := c.t.CommitOrClean(ctx, p.Txn, p.Files)
	if err != nil {
		return nil, err
	}
	c.metrics.fragmentsIn.Add(float64(p.Stats.FragmentsIn))
	c.metrics.fragmentsOut.Add(float64(p.Stats.FragmentsOut))
	return res, nil
}

// Abort removes a prepared compaction's files.
func (c *Compactor) Abort(ctx context.Context, p *Prepared) { c.removeFiles(ctx, p.Files) }

func (c *Compactor) removeFiles(ctx context.Context, files []string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, f := range files {
		if err := c.t.Bucket.Delete(dctx, f); err != nil && !storage.IsNotFound(err) {
			c.logger.Warn("could not remove an uncommitted file; orphan cleanup will", zap.String("key", f), zap.Error(err))
		}
	}
}

// Outcome is what Run did.
type Outcome struct {
	Read   *pb.Manifest
	Jobs   []Job
	Result *commit.Result // nil when there was nothing to do
	Stats  Stats
}

// Run plans, executes and commits one compaction of the head. A retryable
// conflict (another compaction took the same fragments) plans again, up to
// Config.Replans times.
func (c *Compactor) Run(ctx context.Context, only []uint32) (out *Outcome, err error) {
	start := time.Now()
	defer func() {
		fields := []zap.Field{zap.Float64("duration_seconds", time.Since(start).Seconds())}
		if err != nil {
			c.logger.Warn("compaction failed", append(fields, zap.Error(err))...)
			return
		}
		if out.Result != nil {
			fields = append(fields, zap.Uint64("version", out.Result.Manifest.Version), zap.Int("groups", out.Stats.Groups),
				zap.Int("fragments_in", out.Stats.FragmentsIn), zap.Int("fragments_out", out.Stats.FragmentsOut))
		}
		c.logger.Info("compaction done", fields...)
	}()
	for attempt := 0; ; attempt++ {
		read, jobs, err := c.Plan(ctx, only)
		if err != nil {
			return nil, err
		}
		out = &Outcome{Read: read, Jobs: jobs}
		if len(jobs) == 0 {
			return out, nil
		}
		c.claim(jobs, 1)
		progress.From(ctx).Start("compact", jobUnits(read, jobs))
		p, err := c.Execute(ctx, read, jobs)
		if err == nil {
			out.Stats = p.Stats
			out.Result, err = c.Commit(ctx, p)
		}
		c.claim(jobs, -1)
		if errors.Is(err, commit.ErrRetryable) && attempt < c.cfg.Replans {
			c.logger.Info("compaction conflicted; planning again", zap.Error(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// jobUnits is the work of jobs: the physical rows and data bytes of their
// fragments.
func jobUnits(read *pb.Manifest, jobs []Job) progress.Units {
	var u progress.Units
	for _, j := range jobs {
		for _, id := range j.Fragments {
			if f := table.FragmentByID(read, id); f != nil {
				u.Rows += int64(f.PhysicalRows)
				u.Bytes += int64(f.GetDataFile().GetSizeBytes())
			}
		}
	}
	return u
}

// rewriteGroup writes the fragments of one job into new fragments of at
// most TargetRowsPerFragment rows and returns the Rewrite group and its FRI
// group. It returns every file it created, even on error.
func (c *Compactor) rewriteGroup(ctx context.Context, read *pb.Manifest, j Job) (*groupResult, []string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wschema := outputSchema(read.Schema)
	out := &outWriter{ctx: ctx, b: c.t.Bucket, schema: wschema, target: c.cfg.TargetRowsPerFragment, batch: c.cfg.BatchRows, metrics: c.metrics}
	res := &groupResult{rw: &pb.RewriteGroup{}}
	var olds []fri.OldFragment
	for _, id := range j.Fragments {
		f := table.FragmentByID(read, id)
		del, err := table.ReadDeletionFile(ctx, c.t.Bucket, f.DeletionFile)
		if err != nil {
			out.abort(cancel)
			return nil, out.files, err
		}
		if err := c.copyFragment(ctx, out, wschema, f, del); err != nil {
			out.abort(cancel)
			return nil, out.files, fmt.Errorf("fragment %d: %w", id, err)
		}
		res.rw.OldFragments = append(res.rw.OldFragments, f)
		olds = append(olds, fri.OldFragment{ID: id, PhysicalRows: f.PhysicalRows, Deleted: del})
		res.stats.BytesRead += f.GetDataFile().GetSizeBytes()
	}
	news, err := out.close()
	if err != nil {
		out.abort(cancel)
		return nil, out.files, err
	}
	rows := make([]uint64, len(news))
	for i, nf := range news {
		rows[i] = nf.PhysicalRows
		res.stats.BytesWritten += nf.GetDataFile().GetSizeBytes()
		res.stats.Rows += nf.PhysicalRows
	}
	g, err := fri.BuildGroup(olds, rows)
	if err != nil {
		return nil, out.files, fmt.Errorf("%w: rows written do not match the survivors: %v", table.ErrCorrupt, err)
	}
	res.rw.NewFragments = news
	res.rw.SurvivingAddresses = g.SurvivingAddresses
	res.fri = g
	res.stats.Groups = 1
	res.stats.FragmentsIn = len(j.Fragments)
	res.stats.FragmentsOut = len(news)
	res.stats.RowGroupsCopied = out.copied
	res.stats.RowsRewritten = out.rewritten
	c.metrics.bytesRead.Add(float64(res.stats.BytesRead))
	c.metrics.bytesWritten.Add(float64(res.stats.BytesWritten))
	return res, out.files, nil
}

// copyFragment appends the live rows of f to out. A row group without
// deletions is copied verbatim (compressed pages spliced in, nothing
// decoded); one with deletions is re-encoded column by column, BatchRows
// values at a time, page by page (never a whole row group of decoded rows
// in memory), dropping the deleted offsets.
func (c *Compactor) copyFragment(ctx context.Context, out *outWriter, wschema *parquet.Schema, f *pb.Fragment, del *roaring.Bitmap) error {
	key := f.GetDataFile().GetPath()
	pf, closeFile, err := openParquet(ctx, c.t.Bucket, key, int64(f.GetDataFile().GetSizeBytes()))
	if err != nil {
		return err
	}
	defer closeFile()
	if !parquet.EqualNodes(pf.Schema(), wschema) {
		return fmt.Errorf("data file %s: %w: its Parquet schema differs from the table's", key, table.ErrCorrupt)
	}
	if pf.NumRows() != int64(f.PhysicalRows) {
		return fmt.Errorf("data file %s: %w: %d rows, manifest says %d", key, table.ErrCorrupt, pf.NumRows(), f.PhysicalRows)
	}
	// Progress counts the fragment's physical rows and its data file's
	// bytes in proportion, one row group at a time.
	prog := progress.From(ctx)
	size, rows := int64(f.GetDataFile().GetSizeBytes()), int64(f.PhysicalRows)
	var off uint64
	var bytesDone int64
	for _, rg := range pf.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := uint64(rg.NumRows())
		if del.IsEmpty() || !del.IntersectsWithInterval(off, off+n) {
			err = out.copyRowGroup(rg)
		} else {
			err = out.copyFiltered(rg, off, del)
		}
		if err != nil {
			return fmt.Errorf("data file %s: %w", key, err)
		}
		off += n
		b := size
		if uint64(rows) > off {
			b = int64(float64(size) * float64(off) / float64(rows))
		}
		prog.Add(int64(n), b-bytesDone)
		bytesDone = b
	}
	return nil
}

func openParquet(ctx context.Context, b storage.Bucket, key string, size int64) (*parquet.File, func(), error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("data file %s: %w: unknown size", key, table.ErrCorrupt)
	}
	ra := storage.NewReaderAt(ctx, b, key, size)
	closeRA := func() {
		if c, ok := ra.(io.Closer); ok {
			_ = c.Close()
		}
	}
	f, err := parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true))
	if err != nil {
		closeRA()
		if storage.IsNotFound(err) {
			return nil, nil, fmt.Errorf("data file %s is missing: %w", key, err)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("data file %s: %w: %v", key, table.ErrCorrupt, err)
	}
	return f, closeRA, nil
}

// outWriter writes a group's output fragments, starting a new one when the
// current one reaches the target.
type outWriter struct {
	ctx       context.Context
	b         storage.Bucket
	schema    *parquet.Schema
	target    uint64
	batch     int
	metrics   *Metrics
	cur       *fragWriter
	done      []*pb.Fragment
	files     []string
	copied    int64
	rewritten int64
	vals      []parquet.Value
	keep      []parquet.Value
	drop      []uint64
}

func (o *outWriter) ensure() error {
	if o.cur != nil {
		return nil
	}
	w, err := newFragWriter(o.ctx, o.b, o.schema)
	if err != nil {
		return err
	}
	o.cur = w
	o.files = append(o.files, w.key)
	return nil
}

func (o *outWriter) roll() error {
	if o.cur == nil {
		return nil
	}
	f, err := o.cur.close()
	o.cur = nil
	if err != nil {
		return err
	}
	o.done = append(o.done, f)
	return nil
}

// copyRowGroup appends a whole source row group verbatim. A row group is
// never split: when it does not fit the current output, a new one starts.
func (o *outWriter) copyRowGroup(rg parquet.RowGroup) error {
	n := uint64(rg.NumRows())
	if n == 0 {
		return nil
	}
	if o.cur != nil && o.cur.rows > 0 && o.cur.rows+n > o.target {
		if err := o.roll(); err != nil {
			return err
		}
	}
	if err := o.ensure(); err != nil {
		return err
	}
	if _, err := o.cur.pw.WriteRowGroup(rg); err != nil {
		return fmt.Errorf("copy a row group into %s: %w", o.cur.key, err)
	}
	o.cur.rows += n
	o.copied++
	o.metrics.rowGroupsCopied.Inc()
	return nil
}

// deletedIn counts the offsets of del in [lo, hi).
func deletedIn(del *roaring.Bitmap, lo, hi uint64) uint64 {
	if hi <= lo {
		return 0
	}
	n := del.Rank(uint32(hi - 1))
	if lo > 0 {
		n -= del.Rank(uint32(lo - 1))
	}
	return n
}

// copyFiltered appends the rows of rg (physical offsets [start, start+n) of
// its fragment) that del does not delete, each output row group written
// column by column: no rows are assembled, values go straight from the
// source pages to the column writers.
func (o *outWriter) copyFiltered(rg parquet.RowGroup, start uint64, del *roaring.Bitmap) error {
	n := uint64(rg.NumRows())
	for lo := uint64(0); lo < n; {
		left := (n - lo) - deletedIn(del, start+lo, start+n)
		if left == 0 {
			return nil
		}
		if err := o.ensure(); err != nil {
			return err
		}
		space := o.target - min(o.cur.rows, o.target)
		if space == 0 {
			if err := o.roll(); err != nil {
				return err
			}
			continue
		}
		take, hi := left, n
		if left > space {
			// The smallest hi holding exactly space survivors.
			take = space
			a, b := lo+space, n
			for a < b {
				m := a + (b-a)/2
				if (m-lo)-deletedIn(del, start+lo, start+m) >= space {
					b = m
				} else {
					a = m + 1
				}
			}
			hi = a
		}
		if err := o.writeRange(rg, lo, hi, start, del, take); err != nil {
			return err
		}
		o.cur.rows += take
		o.rewritten += int64(take)
		o.metrics.rowsRewritten.Add(float64(take))
		lo = hi
	}
	return nil
}

// writeRange writes the surviving rows [lo, hi) of rg as one output row
// group: each column's values are read page by page and the survivors
// written to its column writer.
func (o *outWriter) writeRange(rg parquet.RowGroup, lo, hi, start uint64, del *roaring.Bitmap, want uint64) error {
	if cap(o.vals) < o.batch {
		o.vals = make([]parquet.Value, o.batch)
		o.keep = make([]parquet.Value, 0, o.batch)
	}
	// The deleted offsets of [lo, hi), relative to the row group, listed
	// once for every column: survivors are then copied run by run
	// between them. (A bitmap lookup per value and column cost a tenth of
	// the rewrite; a survivor mask still cost a branch and a copy per
	// value.)
	drop := o.drop[:0]
	it := del.Iterator()
	it.AdvanceIfNeeded(uint32(start + lo))
	for it.HasNext() {
		d := uint64(it.Next())
		if d >= start+hi {
			break
		}
		drop = append(drop, d-start)
	}
	o.drop = drop
	dst := o.cur.pw.ColumnWriters()
	for i, cc := range rg.ColumnChunks() {
		var r, wrote uint64
		di := 0
		err := table.ReadColumnValues(cc, o.vals[:o.batch], func(vs []parquet.Value) error {
			b0 := r
			r += uint64(len(vs))
			a, e := max(b0, lo), min(r, hi)
			if a >= e {
				return nil
			}
			for di < len(drop) && drop[di] < a {
				di++
			}
			keep := vs[a-b0 : e-b0]
			if di < len(drop) && drop[di] < e {
				keep = o.keep[:0]
				for a < e {
					next := e
					if di < len(drop) && drop[di] < e {
						next = drop[di]
						di++
					}
					keep = append(keep, vs[a-b0:next-b0]...)
					a = next + 1
				}
			}
			if len(keep) == 0 {
				return nil
			}
			wrote += uint64(len(keep))
			_, err := dst[i].WriteRowValues(keep)
			return err
		}, func() bool { return r >= hi })
		if err != nil {
			return err
		}
		if wrote != want {
			return fmt.Errorf("%w: column %d gave %d rows, want %d", table.ErrCorrupt, i, wrote, want)
		}
	}
	return o.cur.pw.Flush()
}

func (o *outWriter) close() ([]*pb.Fragment, error) {
	if err := o.roll(); err != nil {
		return nil, err
	}
	return o.done, nil
}

// abort abandons the current output: its upload is canceled, never
// published.
func (o *outWriter) abort(cancel context.CancelFunc) {
	cancel()
	if o.cur != nil {
		_, _ = o.cur.close()
		o.cur = nil
	}
}
