package compact

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Env is what a run needs beyond the options.
type Env struct {
	// Clock stamps the fragment-reuse index entry (created_at); nil is the
	// wall clock.
	Clock clock.Clock
	// Attempts bounds the tries after a retryable conflict (0: those of
	// DefaultConfig).
	Attempts int
	// Parallelism bounds the groups executed at once (default GOMAXPROCS;
	// a compaction smaller than BytesPerWorker per group runs fewer).
	Parallelism int
	// Memory, when set, is shared by every compaction of the process: a
	// group starts only once its working memory (groupMemory) fits in
	// what the groups running meanwhile left of it.
	Memory *MemoryBudget
	// BeforeCommit, when set, runs after the new files are written and
	// before the Rewrite commits (tests use it to land a concurrent
	// writer's commit in between).
	BeforeCommit func(ctx context.Context, p *Plan) error
}

// Result is a run.
type Result struct {
	Plan *Plan
	// Commit is the landed Rewrite (nil when there was nothing to do).
	Commit *commit.Result
	// Reserved is the landed ReserveFragments.
	Reserved *commit.Result
	Stats    Stats
	// Rebased counts concurrent deletes carried onto the new fragments;
	// Retried counts re-plans after a retryable conflict.
	Rebased int
	Retried int
	// FragReuse is the index entry the Rewrite installed (deferred remap).
	FragReuse *pb.IndexMetadata
	// Removed are the fully deleted fragments the FRI version records.
	Removed []uint64
	// RewrittenIndices counts the index segments remapped in the
	// Rewrite (inline remap).
	RewrittenIndices int
}

// Run plans, executes and commits one compaction of the table's latest
// version. A retryable conflict re-plans on the new head, up to
// env.Attempts times; a concurrent Delete of rows being rewritten is
// rebased instead (its deletes follow the rows onto the new fragments).
func Run(ctx context.Context, h *table.Handle, o Options, env Env) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// The decode buffers the run's streams pass on to each other are not
	// kept for the daemon's idle time after it.
	defer file.DropSpareBuffers()
	if env.Clock == nil {
		env.Clock = clock.Real()
	}
	if env.Attempts <= 0 {
		env.Attempts = DefaultConfig().Replans + 1
	}
	if env.Parallelism <= 0 {
		env.Parallelism = runtime.GOMAXPROCS(0)
	}
	retried := 0
	for {
		res, err := runOnce(ctx, h, o, env)
		if res != nil {
			res.Retried = retried
		}
		var ce *commit.ConflictError
		if err != nil && errors.As(err, &ce) && errors.Is(err, commit.ErrRetryable) && retried+1 < env.Attempts {
			retried++
			continue
		}
		return res, err
	}
}

// PlanLatest reads the latest version and plans on it.
func PlanLatest(ctx context.Context, h *table.Handle, o Options) (*Plan, *meta.ManifestFile, meta.Naming, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	if read.Manifest.GetWriterFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, nil, 0, fmt.Errorf("compact: the table uses stable row ids; compactord does not rewrite their row-id sequences")
	}
	// Before anything is written or reserved: a segment (or FRI) of an
	// index version compactord does not implement can be neither remapped
	// inline nor trusted to absorb a deferred remap as lance 12 does.
	for _, ix := range read.Indices {
		if err := meta.CheckIndexVersion(ix); err != nil {
			return nil, nil, 0, fmt.Errorf("compact: %w", err)
		}
	}
	// A full-text segment in a format compactord does not read (positions,
	// another block size or token set) cannot be remapped: found here, so
	// that its fragments stay out of the plan instead of failing the run.
	o.Unremappable = map[string]string{}
	for _, ix := range read.Indices {
		if meta.IndexKind(ix) == index.KindInverted {
			if err := index.CanRemapInverted(ctx, h.Bucket, ix); err != nil {
				if ctx.Err() != nil {
					return nil, nil, 0, ctx.Err()
				}
				o.Unremappable[meta.UUIDString(ix.GetUuid())] = err.Error()
			}
		}
	}
	var reuse []ReuseGroup
	if segs := meta.FindIndex(read.Indices, meta.FragReuseIndexName); len(segs) > 0 {
		in, err := meta.FragReuseContent(ctx, h.Bucket, segs[0])
		if err != nil {
			return nil, nil, 0, err
		}
		reuse = ReuseGroups(in)
	}
	p, err := PlanCompaction(read, reuse, o)
	if err != nil {
		return nil, nil, 0, err
	}
	return p, read, naming, nil
}

func runOnce(ctx context.Context, h *table.Handle, o Options, env Env) (*Result, error) {
	b := h.Bucket
	p, read, naming, err := PlanLatest(ctx, h, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: p}
	if len(p.Groups) == 0 {
		return res, nil
	}
	progress.From(ctx).Start("compact", planTotal(p))
	outs, err := executeAll(ctx, h, read.Manifest, p, o, workers(p, env.Parallelism), env.Memory)
	var files []string
	for _, out := range outs {
		if out != nil {
			files = append(files, out.Files...)
			res.Stats.add(out.Stats)
		}
	}
	if err != nil {
		removeQuietly(h, files)
		// A cleanup that removed the read version took files being read:
		// a lost race, which Run re-plans.
		return res, table.ReadCleanedUp(ctx, b, naming, read, "compact", err)
	}
	// Reserve the new fragments' ids first, as Lance's compaction does:
	// the row map names the new fragments by id before the Rewrite lands.
	n := 0
	for _, out := range outs {
		n += len(out.New)
	}
	if n > 0 {
		rread, rnaming, err := h.ReadForWrite(ctx)
		if err != nil {
			removeQuietly(h, files)
			return res, err
		}
		rtxn := commit.NewTransaction(rread.Manifest.GetVersion())
		rtxn.Operation = &pb.Transaction_ReserveFragments_{ReserveFragments: &pb.Transaction_ReserveFragments{NumFragments: uint32(n)}}
		rr, err := h.Committer.Commit(ctx, &commit.Txn{Read: rread, Naming: rnaming, Transaction: rtxn})
		if err != nil {
			removeQuietly(h, files)
			return res, fmt.Errorf("compact: reserve %d fragment ids: %w", n, err)
		}
		res.Reserved = rr
		next := uint64(rr.Manifest.Manifest.GetMaxFragmentId()) + 1 - uint64(n)
		for _, out := range outs {
			for _, nf := range out.New {
				nf.Id = next
				next++
			}
		}
	}

	rw := &pb.Transaction_Rewrite{}
	v := fri.Version{DatasetVersion: read.Manifest.GetVersion()}
	for _, out := range outs {
		rw.Groups = append(rw.Groups, &pb.Transaction_Rewrite_RewriteGroup{OldFragments: out.Old, NewFragments: out.New})
		g := fri.Group{Changed: out.Changed}
		for _, f := range out.Old {
			g.Old = append(g.Old, fri.Digest{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows(), NumDeletedRows: out.Deleted[f.GetId()].GetCardinality()})
		}
		for _, f := range out.New {
			g.New = append(g.New, fri.Digest{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows()})
		}
		v.Groups = append(v.Groups, g)
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_Rewrite_{Rewrite: rw}
	ct := &commit.Txn{Read: read, Naming: naming, Transaction: txn}

	prev, err := fri.Load(ctx, b, read)
	if err != nil {
		removeQuietly(h, files)
		return res, table.ReadCleanedUp(ctx, b, naming, read, "compact", err)
	}
	for _, out := range outs {
		var old []uint64
		for _, f := range out.Old {
			old = append(old, f.GetId())
		}
		if err := fri.Straddles(read.Indices, prev, old); err != nil {
			removeQuietly(h, files)
			return res, fmt.Errorf("compact: planned group %v: %w", old, err)
		}
	}
	removed := fri.RemovedFragments(read, prev)
	if o.DeferRemap {
		// Removed fragments are compactord's field (LanceDB 0.39 keeps it
		// as an unknown field). A Lance that applies it at load would drop
		// their rows from every index, and an HNSW graph would keep nodes
		// its vector storage lost until the physical remap rebuilds it. So
		// the fragments an HNSW index or an index compactord cannot remap
		// covers stay out of it (liveness masks their rows, as after any
		// whole-fragment delete of LanceDB's; a btree keeps their entries
		// until it is rebuilt).
		removed.AndNot(unremappableCoverage(read, prev, p.unremappable))
	}
	if !removed.IsEmpty() {
		v.Removed = removed
		for _, id := range removed.ToArray() {
			res.Removed = append(res.Removed, uint64(id))
		}
	}
	if o.DeferRemap {
		var prevMeta *pb.IndexMetadata
		if prev != nil {
			prevMeta = prev.Meta
		}
		ix, friFiles, err := fri.AppendVersion(ctx, b, prev, prevMeta, v, env.Clock.Now())
		files = append(files, friFiles...)
		if err != nil {
			removeQuietly(h, files)
			return res, fmt.Errorf("compact: %w", err)
		}
		ct.Extra.FragReuse = ix
		res.FragReuse = ix
	} else {
		// The groups are written: the decode buffers kept for the next
		// stream would sit beside the remap's own, so the garbage
		// collector gets them first and the remap reuses that memory.
		file.DropSpareBuffers()
		ris, keys, err := remapInline(ctx, h, read, prev, v, outs, env.Clock.Now(), env.Memory)
		files = append(files, keys...)
		if err != nil {
			removeQuietly(h, files)
			// A cleanup that removed the read version took the segments
			// being remapped too (an index replaced since): a lost race.
			return res, table.ReadCleanedUp(ctx, b, naming, read, "compact", err)
		}
		rw.RewrittenIndices = ris
		res.RewrittenIndices = len(ris)
	}
	ct.Files = files
	rb := newRebaser(h, outs)
	ct.Rebase, ct.Prepare = rb.rebase, rb.prepare

	if env.BeforeCommit != nil {
		if err := env.BeforeCommit(ctx, p); err != nil {
			removeQuietly(h, files)
			return res, err
		}
	}
	cr, err := h.Committer.Commit(ctx, ct)
	if err != nil {
		return res, err
	}
	res.Commit = cr
	res.Rebased = cr.Rebases
	return res, nil
}

// remapInline rebuilds every index segment covering a rewritten fragment
// with its addresses passed through this rewrite's row map, for the
// Rewrite's rewritten_indices (new uuids; BuildManifest swaps the bitmaps
// as Lance does). A segment that has not absorbed the table's earlier FRI
// versions is refused: its bitmap names fragments Lance's bitmap swap
// would not find.
//
// Each remap holds its working memory from budget (as the groups do)
// while it runs: a streamed remap's window, or a vector or full-text
// partition at a time.
func remapInline(ctx context.Context, h *table.Handle, read *meta.ManifestFile, prev *fri.Index, v fri.Version, outs []*Output, now time.Time, budget *MemoryBudget) ([]*pb.Transaction_Rewrite_RewrittenIndex, []string, error) {
	var versions []fri.Version
	if prev != nil {
		versions = append(versions, prev.Versions...)
	}
	chain, err := fri.New(append(versions, v))
	if err != nil {
		return nil, nil, fmt.Errorf("compact: %w", err)
	}
	remap := chain.Remapper(0)
	full := map[uint32]uint64{}
	for _, f := range read.Manifest.GetFragments() {
		full[uint32(f.GetId())] = f.GetPhysicalRows()
	}
	old := roaring.New()
	for _, out := range outs {
		for _, f := range out.Old {
			full[uint32(f.GetId())] = f.GetPhysicalRows()
			old.Add(uint32(f.GetId()))
		}
	}
	fields := map[int32]*pb.Field{}
	for _, f := range read.Manifest.GetFields() {
		fields[f.GetId()] = f
	}
	var ris []*pb.Transaction_Rewrite_RewrittenIndex
	var keys []string
	for _, m := range read.Indices {
		if meta.IsSystemIndex(m) {
			continue
		}
		bm, known, err := meta.FragmentBitmap(m)
		if err != nil {
			return nil, keys, err
		}
		if !known {
			return nil, keys, fmt.Errorf("compact: index %s (%s) has no fragment bitmap, so the segments to remap inline are unknown; use the deferred remap", m.GetName(), meta.UUIDString(m.GetUuid()))
		}
		if !bm.Intersects(old) {
			continue
		}
		if prev.NeedsRemap(m) {
			return nil, keys, fmt.Errorf("compact: index %s has fragment-reuse versions it has not absorbed (a deferred compaction's); run `compactord index remap` first", m.GetName())
		}
		if len(m.GetFields()) != 1 || fields[m.GetFields()[0]] == nil {
			return nil, keys, fmt.Errorf("compact: index %s is on fields %v; compactord remaps single-field indexes only", m.GetName(), m.GetFields())
		}
		nm, ks, _, err := index.Remap(ctx, h.Bucket, m, remap, index.RemapOptions{
			Field: fields[m.GetFields()[0]], DatasetVersion: read.Manifest.GetVersion(), Bitmap: chain.RemapBitmap(m),
			Full: func(frag uint32) (uint64, bool) { n, ok := full[frag]; return n, ok }, Now: now, Memory: budget.Hold})
		keys = append(keys, ks...)
		if err != nil {
			return nil, keys, fmt.Errorf("compact: remap index %s: %w", m.GetName(), err)
		}
		ris = append(ris, &pb.Transaction_Rewrite_RewrittenIndex{OldId: m.GetUuid(), NewId: nm.GetUuid(),
			NewIndexDetails: nm.GetIndexDetails(), NewIndexVersion: uint32(nm.GetIndexVersion()), NewIndexFiles: nm.GetFiles()})
	}
	return ris, keys, nil
}

// unremappableCoverage is the fragments the indexes compactord cannot
// remap, and HNSW indexes, cover, read through the FRI; every fragment for
// one without a bitmap.
func unremappableCoverage(read *meta.ManifestFile, prev *fri.Index, unremappable map[string]string) *roaring.Bitmap {
	out := roaring.New()
	for _, m := range read.Indices {
		if meta.IsSystemIndex(m) || (Remappable(m) && !vector.HasGraph(m) && unremappable[meta.UUIDString(m.GetUuid())] == "") {
			continue
		}
		bm := prev.RemapBitmap(m)
		if bm == nil {
			out.AddRange(0, uint64(read.Manifest.GetMaxFragmentId())+1)
			continue
		}
		out.Or(bm)
	}
	return out
}

// planTotal is the rows and bytes a plan reads: the ETA of the progress
// Execute reports. The bytes are unknown (0) when a fragment's manifest
// entry records no file size.
func planTotal(p *Plan) progress.Units {
	var t progress.Units
	sized := true
	for _, g := range p.Groups {
		for _, c := range g.Candidates {
			t.Rows += int64(c.Fragment.GetPhysicalRows())
			for _, df := range c.Fragment.GetFiles() {
				t.Bytes += int64(df.GetFileSizeBytes())
				sized = sized && df.GetFileSizeBytes() > 0
			}
		}
	}
	if !sized {
		t.Bytes = 0
	}
	return t
}

// BytesPerWorker is the input to re-encode a compaction gives each group
// it executes at once: a smaller one runs its groups one after another.
// Re-encoding is bound by memory bandwidth (copies, page faults, bit
// unpacking), so on the 2-core benchmark machine a second concurrent
// group made the same work cost 25-35 % more CPU and added a group's
// working set (about 20 MiB) to the peak RSS, to save a quarter of a
// second of wall time on a 152 MiB compaction. Above this size the wall
// time is worth it. Fragments without deletions are copied, not
// re-encoded, and do not count.
const BytesPerWorker = 256 << 20

// workers is the groups of p executed at once: one per BytesPerWorker of
// input to re-encode, at least one and at most par (all of par when
// nothing is re-encoded or a file's size is not recorded).
func workers(p *Plan, par int) int {
	var rewrite int64
	for _, g := range p.Groups {
		for _, c := range g.Candidates {
			if c.Fragment.GetDeletionFile() == nil {
				continue // copied, if its file matches the schema
			}
			for _, df := range c.Fragment.GetFiles() {
				if df.GetFileSizeBytes() == 0 {
					return par
				}
				rewrite += int64(df.GetFileSizeBytes())
			}
		}
	}
	if rewrite == 0 {
		return par
	}
	return int(min((rewrite+BytesPerWorker-1)/BytesPerWorker, int64(par)))
}

// MemoryBudget bounds the working memory of the groups the compactions
// sharing it execute at once, and of their inline index remaps (a remap
// holds its estimate while it runs, index.RemapOptions.Memory; so does the
// index job's remap of a deferred compaction in the daemon). Each group takes its estimate
// (groupMemory, at most the whole budget) before it starts and gives it
// back when it ends, so N tables compacting at parallelism P on a wide
// schema wait for each other instead of holding N*P groups' pages. nil
// is no bound.
type MemoryBudget struct {
	size int64
	sem  *semaphore.Weighted
	held atomic.Int64
	// taken, when set (tests), is told of every acquisition: its bytes
	// and whether an index remap (not a group) took them.
	taken func(n int64, remap bool)
}

// NewMemoryBudget is a budget of bytes (at least 1).
func NewMemoryBudget(bytes int64) *MemoryBudget {
	bytes = max(bytes, 1)
	return &MemoryBudget{size: bytes, sem: semaphore.NewWeighted(bytes)}
}

// Size is the budget's bytes.
func (b *MemoryBudget) Size() int64 { return b.size }

// Held is the bytes groups and remaps hold from the budget now.
func (b *MemoryBudget) Held() int64 { return b.held.Load() }

// acquire takes n bytes (at most the whole budget, so that a group wider
// than the budget still runs, alone) and returns what it took.
func (b *MemoryBudget) acquire(ctx context.Context, n int64) (int64, error) {
	return b.take(ctx, n, false)
}

func (b *MemoryBudget) take(ctx context.Context, n int64, remap bool) (int64, error) {
	if b == nil {
		return 0, nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	b.held.Add(n)
	if b.taken != nil {
		b.taken(n, remap)
	}
	return n, nil
}

func (b *MemoryBudget) release(n int64) {
	if b != nil && n > 0 {
		b.held.Add(-n)
		b.sem.Release(n)
	}
}

// Hold is acquire for an index remap (index.RemapOptions.Memory, and
// the daemon's index.RemapJobOptions.Memory): n bytes, at most the whole
// budget, given back by the function returned. A nil budget holds nothing.
func (b *MemoryBudget) Hold(ctx context.Context, n int64) (func(), error) {
	held, err := b.take(ctx, n, true)
	if err != nil {
		return nil, err
	}
	return func() { b.release(held) }, nil
}

// groupMemory estimates a group's working memory on m's schema: per leaf
// column, the page being built for the file being written (pageBytes,
// plus slack for the batch that crosses it) and the decoded window and
// its read buffer (about as much again); plus the output's write buffer
// (1 MiB; on a local file system two 2 MiB buffers outside the Go heap,
// storage.DirectWrites, which the collector's headroom does not double)
// and the encoder's scratch. A vector column (fixed-width rows of 256
// bytes or more) holds its window of rows as stored (at least
// minWindowRows of them, up to maxWindowBytes) and a page of
// widePageBytes plus slack. It is the live heap, not the RSS, which the
// garbage collector's headroom makes up to about twice that.
func groupMemory(m *pb.Manifest) int64 {
	parents := map[int32]bool{}
	for _, f := range m.GetFields() {
		if f.GetParentId() >= 0 {
			parents[f.GetParentId()] = true
		}
	}
	need := int64(2 << 20)
	for _, f := range m.GetFields() {
		if parents[f.GetId()] {
			continue
		}
		if rb := int64(file.FixedRowBytes(f.GetLogicalType())); rb >= 256 {
			need += min(minWindowRows*rb, maxWindowBytes) + widePageBytes*5/4
			continue
		}
		need += 2 * pageBytes
	}
	return need
}

func executeAll(ctx context.Context, h *table.Handle, m *pb.Manifest, p *Plan, o Options, par int, budget *MemoryBudget) ([]*Output, error) {
	outs := make([]*Output, len(p.Groups))
	errs := make([]error, len(p.Groups))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The new data files share data/: fsync it once for all of them,
	// below, before anything can name them.
	ctx, dirs := storage.DeferDirSyncs(ctx)
	sem := make(chan struct{}, par)
	need := groupMemory(m)
	var wg sync.WaitGroup
	for i, g := range p.Groups {
		sem <- struct{}{}
		held, err := budget.acquire(ctx, need)
		if err != nil {
			<-sem
			errs[i] = err
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer budget.release(held)
			outs[i], errs[i] = Execute(ctx, h.Bucket, m, g, o)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return outs, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return outs, err
	}
	if err := dirs.Sync(); err != nil {
		return outs, fmt.Errorf("compact: %w", err)
	}
	return outs, nil
}

func removeQuietly(h *table.Handle, keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range keys {
		_ = h.Bucket.Delete(ctx, k)
	}
}

// rebaser carries deletes that landed on the rewritten fragments after the
// read onto the new fragments.
type rebaser struct {
	h *table.Handle
	// by old fragment id: its group's output.
	byOld map[uint64]*Output
	// deleted: the extra deletion vector of each new fragment so far.
	deleted map[uint64]*roaring.Bitmap
	// dirty: new fragments whose deletion file is not written yet.
	dirty map[uint64]bool
}

func newRebaser(h *table.Handle, outs []*Output) *rebaser {
	r := &rebaser{h: h, byOld: map[uint64]*Output{}, deleted: map[uint64]*roaring.Bitmap{}, dirty: map[uint64]bool{}}
	for _, out := range outs {
		for _, f := range out.Old {
			r.byOld[f.GetId()] = out
		}
	}
	return r
}

// rebase maps the rows theirs (a Delete) deleted in our old fragments
// since the read through the group row map (the k-th surviving old address
// is row k of the new fragments) and writes the new fragments' deletion
// files.
func (r *rebaser) rebase(ctx context.Context, cur, theirs *pb.Transaction, f *meta.ManifestFile) (*pb.Transaction, []string, error) {
	d := theirs.GetDelete()
	if d == nil {
		return nil, nil, fmt.Errorf("compact: no rebase over %s", commit.OpName(theirs))
	}
	// What theirs did is read from the version it made, not only from its
	// transaction: LanceDB rebases a delete over a concurrent one by
	// merging their deletion vectors, so the version can hold a merged
	// vector, or no longer hold a fragment its transaction lists as
	// updated (every row deleted between the two).
	live := map[uint64]*pb.DataFragment{}
	for _, lf := range f.Manifest.GetFragments() {
		live[lf.GetId()] = lf
	}
	gone := map[uint64]bool{}
	for _, id := range d.GetDeletedFragmentIds() {
		gone[id] = true
	}
	inCur := map[uint64]bool{}
	for _, g := range cur.GetRewrite().GetGroups() {
		for _, of := range g.GetOldFragments() {
			inCur[of.GetId()] = true
			if live[of.GetId()] == nil {
				gone[of.GetId()] = true
			}
		}
	}
	touched := map[uint64]*roaring.Bitmap{}
	for _, uf := range d.GetUpdatedFragments() {
		out := r.byOld[uf.GetId()]
		if out == nil || !inCur[uf.GetId()] {
			continue
		}
		lf := live[uf.GetId()]
		if lf == nil {
			gone[uf.GetId()] = true
			continue
		}
		dv, err := deletionOf(ctx, r.h, lf)
		if err != nil {
			return nil, nil, err
		}
		touched[uf.GetId()] = dv
	}
	for id := range gone {
		out := r.byOld[id]
		if out == nil || !inCur[id] {
			continue
		}
		var phys uint64
		for _, of := range out.Old {
			if of.GetId() == id {
				phys = of.GetPhysicalRows()
			}
		}
		all := roaring.New()
		all.AddRange(0, phys)
		touched[id] = all
	}
	changed := map[uint64]bool{}
	for id, dv := range touched {
		out := r.byOld[id]
		fresh := dv.Clone()
		fresh.AndNot(out.Deleted[id])
		it := fresh.Iterator()
		for it.HasNext() {
			off := it.Next()
			surv := out.Survivors[id]
			if !surv.Contains(off) {
				continue
			}
			// The row's position among the group's survivors: those of
			// the fragments before it (ascending ids), then its rank.
			k := surv.Rank(off) - 1
			for _, of := range out.Old {
				if of.GetId() == id {
					break
				}
				k += out.Survivors[of.GetId()].GetCardinality()
			}
			for _, nf := range out.New {
				if k < nf.GetPhysicalRows() {
					bm := r.deleted[nf.GetId()]
					if bm == nil {
						bm = roaring.New()
						r.deleted[nf.GetId()] = bm
					}
					if bm.CheckedAdd(uint32(k)) {
						changed[nf.GetId()] = true
					}
					break
				}
				k -= nf.GetPhysicalRows()
			}
		}
	}
	next := proto.Clone(cur).(*pb.Transaction)
	_, next.Uuid = meta.NewUUID()
	for _, g := range next.GetRewrite().GetGroups() {
		// Fragments theirs removed whole leave the group: the head no
		// longer has them, and their rows are deleted in the new ones.
		kept := g.OldFragments[:0]
		for _, of := range g.GetOldFragments() {
			if !gone[of.GetId()] {
				kept = append(kept, of)
			}
		}
		g.OldFragments = kept
	}
	for id := range changed {
		r.dirty[id] = true
	}
	return next, nil, nil
}

// prepare writes the deletion files of the new fragments the rebases
// since the last attempt changed, once per attempt.
func (r *rebaser) prepare(ctx context.Context, cur *pb.Transaction) (*pb.Transaction, []string, error) {
	if len(r.dirty) == 0 {
		return cur, nil, nil
	}
	next := proto.Clone(cur).(*pb.Transaction)
	var files []string
	for _, g := range next.GetRewrite().GetGroups() {
		for _, nf := range g.GetNewFragments() {
			if !r.dirty[nf.GetId()] {
				continue
			}
			if r.deleted[nf.GetId()].GetCardinality() >= nf.GetPhysicalRows() {
				// Every row of the new fragment was deleted meanwhile. Lance
				// drops a fully deleted fragment rather than keep it with
				// a full deletion vector (LanceDB's compaction planner
				// asserts on one), so the compaction re-plans on what is
				// left instead.
				return nil, files, &commit.ConflictError{Class: commit.ErrRetryable, Ours: commit.OpName(cur), Version: cur.GetReadVersion(),
					Reason: fmt.Sprintf("every row of new fragment %d was deleted meanwhile", nf.GetId())}
			}
			df, key, data, err := encodeDeletion(nf.GetId(), r.deleted[nf.GetId()], cur.GetReadVersion())
			if err != nil {
				return nil, files, err
			}
			if err := r.h.Bucket.Put(ctx, key, data); err != nil {
				return nil, files, fmt.Errorf("compact: write %s: %w", key, err)
			}
			files = append(files, key)
			nf.DeletionFile = df
		}
	}
	clear(r.dirty)
	return next, files, nil
}

func deletionOf(ctx context.Context, h *table.Handle, f *pb.DataFragment) (*roaring.Bitmap, error) {
	return deletion.Read(ctx, h.Bucket, f.GetId(), f.GetDeletionFile(), f.GetPhysicalRows())
}

func encodeDeletion(id uint64, bm *roaring.Bitmap, readVersion uint64) (*pb.DeletionFile, string, []byte, error) {
	return deletion.Encode(id, bm, readVersion)
}
