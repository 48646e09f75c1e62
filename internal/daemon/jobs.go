package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/trim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
)

// This file is the one place where the real jobs are wired to the
// scheduler; the jobs are below. Each JobFunc reads its settings
// through cfg(table), the table's policy (defaults and its override), at
// the start of every attempt, so that a reload (SIGHUP) applies to the
// next attempt. An attempt that finds no work reports
// NothingToDo (result "skipped"). Errors are returned as the jobs produce
// them, carrying the classes their packages mark (internal/jobclass: the
// commit loop's ErrRetryable retries, ErrIncompatible is skipped);
// jobErr makes corrupt metadata quarantine the table.
func jobSet(cfg func(table string) JobsConfig, reg prometheus.Registerer) map[scheduler.Kind]scheduler.JobFunc {
	cm := newCompactMetrics(reg)
	mem := &memoryBudget{}
	return map[scheduler.Kind]scheduler.JobFunc{
		scheduler.KindMerge:   tableJob(absorbing(cfg, mem, mergeJob(cfg))),
		scheduler.KindCompact: tableJob(absorbing(cfg, mem, compactJob(cfg, cm, mem))),
		scheduler.KindIndex:   tableJob(absorbing(cfg, mem, indexJob(cfg, mem))),
		scheduler.KindTrim:    tableJob(absorbing(cfg, mem, trimJob(cfg))),
		scheduler.KindCleanup: tableJob(absorbing(cfg, mem, cleanupJob(cfg))),
	}
}

// memoryBudget is the one jobs.compact.memory_budget_mib budget of the
// daemon: every table's compaction groups and inline index remaps, and
// the index remaps that absorb a deferred compaction's FRI (the index
// job's, and any job's absorbFRI), hold their working memory from it. It
// is made again when a reload changes its size (jobs running meanwhile
// give back to the old one).
type memoryBudget struct {
	mu     sync.Mutex
	budget *compact.MemoryBudget
}

// of returns the budget of mib MiB (nil: no bound, mib <= 0).
func (m *memoryBudget) of(mib int) *compact.MemoryBudget {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case mib <= 0:
		m.budget = nil
	case m.budget == nil || m.budget.Size() != int64(mib)<<20:
		m.budget = compact.NewMemoryBudget(int64(mib) << 20)
	}
	return m.budget
}

// remapOptions are the index remap's options for a job on table name:
// jobs.index's, holding memory from the shared budget.
func (m *memoryBudget) remapOptions(c JobsConfig, clk clock.Clock) index.RemapJobOptions {
	o := c.Index.RemapJobOptions(clk)
	if b := m.of(c.Compact.MemoryBudgetMiB); b != nil {
		o.Memory = b.Hold
	}
	return o
}

// absorbing runs job after absorbing a pending fragment-reuse index
// version (absorbFRI). A pending version is a hazard while it lasts:
// LanceDB's own compaction (optimize) remaps the indexes through its row
// map only, over btree and bitmap segments that still hold the addresses
// the FRI version remaps, and they lose rows (deletes and merge-inserts
// by key then miss them). So no job of the daemon runs on a table that
// has one; a table only has one when a compaction deferred its remap
// (jobs.compact.inline_remap: false) or another tool left it.
func absorbing(cfg func(table string) JobsConfig, mem *memoryBudget, job lanceJob) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		c := cfg(t.Name)
		o := mem.remapOptions(c, t.Clock)
		o.Indices = nil // every index the FRI holds back, whatever jobs.index.indices says
		note, version, err := absorbFRI(ctx, lance, o)
		if err != nil {
			return scheduler.Outcome{}, fmt.Errorf("absorb the pending fragment-reuse index: %w", err)
		}
		out, err := job(ctx, t, lance)
		if note != "" {
			out.Summary = note + "; " + out.Summary
			out.Version = max(out.Version, version)
			out.NothingToDo = false
		}
		return out, err
	}
}

// absorbFRI physically remaps, through the table's fragment-reuse index,
// every btree, bitmap and vector segment that needs it and trims the FRI
// (index.RemapIndexes over every index), when the latest version has an
// FRI. It returns a note of what it did ("" when there was no FRI) and
// the last version it committed.
func absorbFRI(ctx context.Context, lance *table.Handle, o index.RemapJobOptions) (string, uint64, error) {
	if lance == nil {
		return "", 0, nil
	}
	read, _, err := lance.ReadForWrite(ctx)
	if err != nil {
		return "", 0, err
	}
	if len(meta.FindIndex(read.Indices, meta.FragReuseIndexName)) == 0 {
		return "", 0, nil
	}
	rm, err := index.RemapIndexes(ctx, lance, o)
	if err != nil {
		return "", 0, err
	}
	if rm.FRIVersions == 0 {
		return "", 0, nil
	}
	parts := remapNotes(rm)
	var version uint64
	if n := len(rm.Versions); n > 0 {
		version = rm.Versions[n-1]
	}
	if rm.Trim != nil {
		version = max(version, rm.Trim.Version)
	}
	if len(parts) == 0 {
		return "", 0, nil
	}
	return "absorbed the fragment-reuse index: " + strings.Join(parts, ", "), version, nil
}

// remapNotes describe what index.RemapIndexes did.
func remapNotes(rm *index.RemapResult) []string {
	var out []string
	for _, ri := range rm.Indices {
		out = append(out, fmt.Sprintf("%s: remapped %d segments (%d rows dropped)", ri.Name, len(ri.Segments), ri.Dropped))
	}
	if tr := rm.Trim; tr != nil {
		if tr.Removed {
			out = append(out, fmt.Sprintf("FRI removed (%d versions)", len(tr.Dropped)))
		} else if len(tr.Dropped) > 0 {
			out = append(out, fmt.Sprintf("FRI trimmed of %d versions, %d kept", len(tr.Dropped), len(tr.Kept)))
		}
	}
	return out
}

// compactMetrics count the work of committed compactions
// (compactord_compact_*).
type compactMetrics struct {
	bytesRead, bytesWritten, fragmentsIn, fragmentsOut, fragmentsCopied, rowsRewritten prometheus.Counter
	// skipped is the fragments the table's last compaction plan left out,
	// by class (compact.SkipCodes, every class set, 0 when none).
	skipped *prometheus.GaugeVec
}

func newCompactMetrics(reg prometheus.Registerer) *compactMetrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_" + name + "_total", Help: help})
	}
	return &compactMetrics{
		bytesRead:       c("bytes_read", "Data-file bytes read by committed compactions."),
		bytesWritten:    c("bytes_written", "Data-file bytes written by committed compactions."),
		fragmentsIn:     c("fragments_in", "Fragments rewritten away by committed compactions."),
		fragmentsOut:    c("fragments_out", "Fragments written by committed compactions."),
		fragmentsCopied: c("fragments_copied", "Input fragments whose rows were copied without dropping any (no deletions)."),
		rowsRewritten:   c("rows_rewritten", "Rows re-encoded to drop deleted rows."),
		skipped: f.NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_compact_fragments_skipped",
			Help: "Fragments the table's last compaction plan left out although they qualified, by reason (unremappable_index: covered by an index compactord cannot remap)."},
			[]string{"table", "reason"}),
	}
}

// planned records the skips of a table's last plan.
func (m *compactMetrics) planned(table string, p *compact.Plan) {
	if m == nil || p == nil {
		return
	}
	for code, n := range p.SkipCounts() {
		m.skipped.WithLabelValues(table, code).Set(float64(n))
	}
}

// skipNote says which fragments a plan left out and why, for the job's
// summary (the status page): "" when none.
func skipNote(p *compact.Plan) string {
	if p == nil || len(p.Skips) == 0 {
		return ""
	}
	var order []string
	byReason := map[string][]string{}
	for _, s := range p.Skips {
		if byReason[s.Reason] == nil {
			order = append(order, s.Reason)
		}
		byReason[s.Reason] = append(byReason[s.Reason], fmt.Sprint(s.Fragment))
	}
	var parts []string
	for _, r := range order {
		ids := byReason[r]
		if len(ids) > 8 {
			ids = append(ids[:8:8], fmt.Sprintf("and %d more", len(ids)-8))
		}
		parts = append(parts, fmt.Sprintf("fragments %s: %s", strings.Join(ids, ","), r))
	}
	return fmt.Sprintf("left out %d fragments (%s)", len(p.Skips), strings.Join(parts, "; "))
}

func (m *compactMetrics) add(s compact.Stats) {
	if m == nil {
		return
	}
	m.bytesRead.Add(float64(s.BytesRead))
	m.bytesWritten.Add(float64(s.BytesWritten))
	m.fragmentsIn.Add(float64(s.FragmentsIn))
	m.fragmentsOut.Add(float64(s.FragmentsOut))
	m.fragmentsCopied.Add(float64(s.FragmentsCopied))
	m.rowsRewritten.Add(float64(s.RowsRewritten))
}

// The daemon's jobs on Lance table. They read the jobs: section
// (jobs_config.go), mapped onto the Lance packages' options.

// jobErr gives corrupt Lance metadata the job's explicit class: it
// quarantines the table whatever else the error wraps (the error classes
// of commit and meta are marked where they are defined, internal/jobclass).
func jobErr(err error) error {
	if err != nil && errors.Is(err, meta.ErrCorrupt) {
		return scheduler.Quarantine(scheduler.ReasonCorrupt, err)
	}
	return err
}

// lanceTable is the daemon's handle of an open Lance table. The scheduler
// sees its observer (internal/memwal); the jobs reach the dataset and its
// commit loop through it (tableJob), so that the scheduler holds no Lance
// handle.
type lanceTable struct {
	*memwal.Observer
	lance *table.Handle
}

// lanceJob is one attempt of a job on a Lance table.
type lanceJob func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error)

// tableJob adapts a Lance job to the scheduler: it finds the table's Lance
// handle, and classifies the job's errors as jobErr says.
func tableJob(job lanceJob) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		lt, ok := t.Observer.(*lanceTable)
		if !ok {
			return scheduler.Outcome{}, scheduler.Quarantine(scheduler.ReasonFailing, fmt.Errorf("table %s was not opened as a Lance table", t.Name))
		}
		out, err := job(ctx, t, lt.lance)
		return out, jobErr(err)
	}
}

// openTable opens spec's table as a Lance dataset. A location with no table
// yet is opened too; one whose manifests are not Lance's (a table of
// compactord's retired private format) is an error, and nothing stays
// open.
func (d *Daemon) openTable(ctx context.Context, spec scheduler.TableSpec, cc commit.Config) (*scheduler.TableHandle, error) {
	b, err := storage.Open(ctx, spec.URL)
	if err != nil {
		return nil, err
	}
	wb := b
	if d.deps.WrapBucket != nil {
		wb = d.deps.WrapBucket(spec.Name, b)
	}
	// Created at 0 so that the first conflicts show as an increase; looked
	// up at each conflict, so that a racing open's handle, closed (which
	// deletes the series), never leaves this one counting into nothing.
	d.conflicts.conflicts.WithLabelValues(spec.Name)
	lost := func() { d.conflicts.conflicts.WithLabelValues(spec.Name).Inc() }
	ib := storage.WithMetrics(&conflictBucket{Bucket: wb, lost: lost}, d.storeMetrics)
	closeAll := func() error {
		d.conflicts.conflicts.DeleteLabelValues(spec.Name)
		return b.Close()
	}
	if _, err := meta.CheckLance(ctx, ib); err != nil {
		_ = closeAll()
		return nil, fmt.Errorf("table %s (%s): %w", spec.Name, spec.URL, err)
	}
	logger := d.deps.Logger.With(zap.String("table", spec.Name))
	// The committer runs on the daemon's clock, as the scheduler does: a test
	// that fakes time fakes the commit loop's backoff too.
	c, err := commit.NewCommitter(cc, ib, d.clock, d.commitMetrics, logger)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	lh, err := table.New(ib, c)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	// The status page plans the next compaction through the same handle,
	// for as long as the scheduler keeps the table open.
	d.plans.setHandle(spec.Name, lh)
	closeTable := func() error {
		d.plans.drop(spec.Name, lh)
		return closeAll()
	}
	obs := memwal.NewObserver(ib)
	// The table's own policy: its compaction target may be overridden.
	obs.Enrich = (&debt{b: ib, cfg: func() JobsConfig { return d.jobsCfg.Load().PolicyFor(spec.Name).Jobs }, logger: logger}).enrich
	return &scheduler.TableHandle{Name: spec.Name, URL: spec.URL, Bucket: ib, Observer: &lanceTable{obs, lh}, Logger: logger,
		Clock: d.clock, Close: closeTable}, nil
}

// mergeJob merges every shard's flushed generations, in generation
// order, one commit per shard of at most max_generations generations
// (planned by merge.PlanLatest, replanned after each commit, as the CLI's
// merge does); a shard that filled a job asks for another attempt
// (More) instead of looping here, so that an attempt stays bounded while
// writers keep flushing. A merge that lost to another merger is skipped for
// this attempt, never retried.
func mergeJob(cfg func(table string) JobsConfig) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		env := cfg(t.Name).Merge.Env("")
		h := lance
		var out scheduler.Outcome
		// done: the shards merged (one job each per attempt), lost or
		// skipped by the planner.
		done := map[string]bool{}
		var gens, rows, lost uint64
		var notes []string
		// One progress phase for the attempt: each shard's merge adds its
		// generations to the total (merge.Execute).
		progress.From(ctx).Start("merge", progress.Units{})
		for {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			p, err := merge.PlanLatest(ctx, h, env, done)
			if err != nil {
				return out, err
			}
			if memwal.Index(p.Read.Indices) == nil {
				return scheduler.Outcome{Summary: "no MemWAL configured", NothingToDo: true}, nil
			}
			for _, s := range p.Skips {
				if !done[s.Shard] {
					notes = append(notes, fmt.Sprintf("shard %s: %s", s.Shard, s.Reason))
					done[s.Shard] = true
				}
			}
			if len(p.Jobs) == 0 {
				break
			}
			job := p.Jobs[0]
			done[job.Shard] = true
			res, err := merge.Execute(ctx, h, p.Read, p.Naming, job)
			if errors.Is(err, commit.ErrIncompatible) {
				lost++
				t.Logger.Info("merge lost to another merger; skipped", zap.String("shard", job.Shard), zap.Error(err))
				continue
			}
			if err != nil {
				err = fmt.Errorf("merge shard %s generations %d..%d: %w", job.Shard, job.Generations[0].GetGeneration(), job.Through(), err)
				if gens == 0 || !errors.Is(err, commit.ErrRetryable) {
					return out, err
				}
				// Merges landed before this conflict: report them (their
				// counts) and try the rest again at once; an attempt that
				// lands nothing returns the conflict and backs off.
				t.Logger.Info("merge conflict after other shards landed; continuing in another attempt", zap.Error(err))
				notes = append(notes, fmt.Sprintf("shard %s: conflict, retried in the next attempt", job.Shard))
				out.More = true
				break
			}
			gens += uint64(len(res.Generations))
			rows += uint64(res.Inserted + res.Superseded + res.Deleted)
			out.Stats.FragmentsOut++
			if res.Commit != nil {
				out.Version = max(out.Version, res.Commit.Version)
			}
			if len(job.Generations) >= env.MaxGenerations {
				out.More = true // the shard may list more flushed generations
			}
		}
		out.Stats.SSTablesMerged = gens
		switch {
		case gens > 0:
			out.Summary = fmt.Sprintf("merged %d generations (%d rows changed)", gens, rows)
		case lost > 0:
			out.Summary = fmt.Sprintf("nothing merged; %d shards lost to another merger", lost)
			out.NothingToDo = true
		default:
			out.Summary = "nothing to merge"
			out.NothingToDo = true
		}
		if lost > 0 && gens > 0 {
			out.Summary += fmt.Sprintf("; %d shards lost to another merger", lost)
		}
		if len(notes) > 0 {
			out.Summary += "; skipped " + strings.Join(notes, ", ")
		}
		return out, nil
	}
}

// compactJob compacts a Lance table (internal/compact): Lance's
// candidacy with jobs.compact's target rows and deletion threshold, the
// indexes remapped in the compaction's commit (or, with inline_remap:
// false, deferred through the fragment-reuse index, which the next job on
// the table absorbs), replans bounding the re-plans after a retryable
// conflict. The fragments the plan left out (covered by an index
// compactord cannot remap, ...) are in the summary and in
// compactord_compact_fragments_skipped.
func compactJob(cfg func(table string) JobsConfig, m *compactMetrics, mem *memoryBudget) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		cc := cfg(t.Name).Compact
		res, err := compact.Run(ctx, lance, cc.Options(), cc.Env(t.Clock, mem.of(cc.MemoryBudgetMiB)))
		if res != nil {
			m.planned(t.Name, res.Plan)
		}
		if err != nil {
			return scheduler.Outcome{}, err
		}
		note := skipNote(res.Plan)
		if note != "" {
			if t.Logger != nil {
				t.Logger.Info("compaction plan left fragments out", zap.Int("fragments", len(res.Plan.Skips)), zap.String("why", note))
			}
			note = "; " + note
		}
		if res.Commit == nil {
			return scheduler.Outcome{Summary: fmt.Sprintf("nothing to compact at version %d%s", res.Plan.ReadVersion, note), NothingToDo: true}, nil
		}
		m.add(res.Stats)
		return scheduler.Outcome{Version: res.Commit.Version, Stats: scheduler.Stats{FragmentsIn: uint64(res.Stats.FragmentsIn), FragmentsOut: uint64(res.Stats.FragmentsOut)},
			Summary: fmt.Sprintf("version %d: %d groups, %d fragments into %d, %d rows dropped, %d deletes rebased, %d re-plans%s",
				res.Commit.Version, res.Stats.Groups, res.Stats.FragmentsIn, res.Stats.FragmentsOut, res.Stats.RowsDropped, res.Rebased, res.Retried, note)}, nil
	}
}

// indexJob first remaps, through the fragment-reuse index, the btree
// and bitmap segments a deferred compaction left with old row addresses and
// trims the FRI of the versions no index needs (index.RemapIndexes), then
// catches the indices up with the fragments they do not cover
// (internal/index: delta segments, or a rebuild past
// DefaultMaxSegments), in one CreateIndex whose catch-up positions the
// commit loop derives from the read version. The remap comes first: it
// moves the stored bitmaps onto the compactions' new fragments, which the
// MemWAL catch-up derivation reads (it does not apply the FRI), and it
// usually removes the FRI.
// jobs.index.indices limits both (only_maintained: catch-up to the MemWAL's
// maintained indices); replans bounds the re-plans after a retryable
// conflict. With nothing to index, a maintained index whose coverage is
// proven while its catch-up record lags gets the record raised by a
// record-only commit (index.CatchUp).
func indexJob(cfg func(table string) JobsConfig, mem *memoryBudget) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		c := cfg(t.Name)
		ic := c.Index
		rm, err := index.RemapIndexes(ctx, lance, mem.remapOptions(c, t.Clock))
		if err != nil {
			return scheduler.Outcome{}, err
		}
		remapped := remapNotes(rm)
		var remapVersion uint64
		if n := len(rm.Versions); n > 0 {
			remapVersion = rm.Versions[n-1]
		}
		o := ic.Options(t.Clock)
		if ic.OnlyMaintained && len(o.Indices) == 0 {
			read, _, err := lance.ReadForWrite(ctx)
			if err != nil {
				return scheduler.Outcome{}, err
			}
			ix := memwal.Index(read.Indices)
			if ix == nil {
				return scheduler.Outcome{Summary: "no MemWAL: no maintained index", NothingToDo: true}, nil
			}
			d, err := memwal.Details(ix)
			if err != nil {
				return scheduler.Outcome{}, err
			}
			if o.Indices = memwal.Maintained(d, read.Indices); len(o.Indices) == 0 {
				if remapVersion != 0 {
					return scheduler.Outcome{Version: remapVersion, Summary: strings.Join(remapped, "; ")}, nil
				}
				return scheduler.Outcome{Summary: "no maintained index", NothingToDo: true}, nil
			}
		}
		res, err := index.CatchUp(ctx, lance, o)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		rebuilt, rebuiltVersion, err := rebuildCrowded(ctx, lance, ic, o.Indices, t.Clock)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		if !res.Committed {
			if rebuiltVersion != 0 {
				return scheduler.Outcome{Version: rebuiltVersion, Summary: strings.Join(append(remapped, rebuilt...), "; ")}, nil
			}
			if remapVersion != 0 {
				return scheduler.Outcome{Version: remapVersion, Summary: strings.Join(append(remapped, rebuilt...), "; ")}, nil
			}
			sum := append([]string{"indices up to date"}, skippedNotes(res.Skipped)...)
			return scheduler.Outcome{Summary: strings.Join(append(sum, rebuilt...), "; "), NothingToDo: true}, nil
		}
		parts := remapped
		for _, ir := range res.Indices {
			what := "delta"
			if ir.Rebuilt {
				what = "rebuilt"
			}
			parts = append(parts, fmt.Sprintf("catch-up %s: %s over %d fragments (%d rows)", ir.Name, what, len(ir.Fragments), ir.Rows))
		}
		for _, a := range res.Credited {
			parts = append(parts, fmt.Sprintf("catch-up %s: shard %s recorded at generation %d (was %d; the index already covered it)", a.Index, a.Shard, a.To, a.From))
		}
		parts = append(parts, skippedNotes(res.Skipped)...)
		return scheduler.Outcome{Version: max(res.Version, rebuiltVersion), Summary: strings.Join(append(parts, rebuilt...), "; ")}, nil
	}
}

// skippedNotes are the job summary's lines for the indexes a catch-up
// left to LanceDB, each with its reason, so that the status page says why
// an index still lags (a tokenizer compactord does not reproduce, say).
func skippedNotes(skipped []index.Skip) []string {
	var out []string
	for _, s := range skipped {
		out = append(out, fmt.Sprintf("catch-up %s: left to LanceDB: %s", s.Name, s.Reason))
	}
	return out
}

// rebuildCrowded rebuilds (index.Rebuild) each index of names (all when
// empty) that has more segments, or full-text partitions, than
// jobs.index.rebuild_segments_over, so that they stop piling up: LanceDB's
// optimize() adds a partition per call and catch-up alone never merges
// what it did not add. It returns a note per index, rebuilt or left
// (with the reason), and the last version it committed (0: none).
func rebuildCrowded(ctx context.Context, lance *table.Handle, ic index.Config, names []string, clk clock.Clock) (notes []string, version uint64, err error) {
	if ic.RebuildSegmentsOver <= 0 {
		return nil, 0, nil
	}
	read, _, err := lance.ReadForWrite(ctx)
	if err != nil {
		return nil, 0, err
	}
	crowded, skipped, err := index.CrowdedIndexes(ctx, lance.Bucket, read, names, ic.RebuildSegmentsOver)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range skipped {
		notes = append(notes, fmt.Sprintf("rebuild %s: left to LanceDB: %s", s.Name, s.Reason))
	}
	for _, c := range crowded {
		rr, err := index.Rebuild(ctx, lance, c.Name, ic.RebuildOptions(clk))
		if errors.Is(err, index.ErrLeftToLanceDB) {
			// Text the tokenizer refuses: the same on every run, so a
			// note rather than a failure that would stop the job.
			notes = append(notes, fmt.Sprintf("rebuild %s: %v", c.Name, err))
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		version = rr.Version
		notes = append(notes, fmt.Sprintf("rebuilt %s: %d pieces over rebuild_segments_over %d into one (%d rows)", c.Name, c.Pieces, ic.RebuildSegmentsOver, rr.Rows))
	}
	return notes, version, nil
}

// trimJob runs Lance's trim with jobs.trim's reader_grace,
// keep_shard_manifests and concurrency (max_attempts has no meaning on
// Lance: trim never writes a shard manifest).
func trimJob(cfg func(table string) JobsConfig) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		res, err := trim.Run(ctx, t.Bucket, cfg(t.Name).Trim, t.Clock.Now())
		if res == nil {
			return scheduler.Outcome{}, err
		}
		out := scheduler.Outcome{
			Summary:     trimSummary(res),
			Stats:       scheduler.Stats{BytesTrimmed: uint64(max(res.BytesTrimmed, 0))},
			Waiting:     res.Plan.Retained[trim.ReasonPinnedVersion] > 0,
			NothingToDo: res.DeletedGenerations == 0 && res.DeletedWAL == 0 && res.DeletedManifests == 0 && res.DeletedObjects == 0,
		}
		return out, err
	}
}

// oldestKept is the oldest version a cleanup plan keeps (nil: none), the
// start of the table's version-retention debt.
func oldestKept(p cleanup.Plan) *scheduler.RetainedVersion {
	var out *scheduler.RetainedVersion
	for _, v := range p.Versions {
		if !v.Delete && (out == nil || v.Version < out.Version) {
			out = &scheduler.RetainedVersion{Version: v.Version, Timestamp: v.Timestamp}
		}
	}
	return out
}

// trimSummary says what a trim deleted, each count with its own bytes
// (one total after the generations read as theirs alone: "0 generations
// (29456 bytes)"), and what it kept.
func trimSummary(res *trim.Result) string {
	var genBytes int64
	if res.DeletedGenerations > 0 {
		for _, g := range res.Plan.Generations {
			if g.Delete {
				genBytes += g.Bytes
			}
		}
	}
	walBytes := max(res.BytesTrimmed-genBytes, 0)
	return fmt.Sprintf("deleted %s (%d bytes), %s (%d bytes) and %s; kept %d bytes of unmerged generations and %d bytes of generations an index has not caught up with",
		pluralOf(res.DeletedGenerations, "generation", "generations"), genBytes, pluralOf(res.DeletedWAL, "WAL entry", "WAL entries"), walBytes,
		pluralOf(res.DeletedManifests, "old shard manifest", "old shard manifests"),
		res.Plan.Retained[trim.ReasonNotMerged], res.Plan.Retained[trim.ReasonIndexLag])
}

// pluralOf is "1 thing" or "n things".
func pluralOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// cleanupJob runs Lance's cleanup with jobs.cleanup's policy
// (retain_versions, older_than, min_age) and concurrency.
func cleanupJob(cfg func(table string) JobsConfig) lanceJob {
	return func(ctx context.Context, t *scheduler.TableHandle, lance *table.Handle) (scheduler.Outcome, error) {
		res, err := cleanup.Run(ctx, t.Bucket, cfg(t.Name).Cleanup, t.Clock.Now())
		if err != nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{
			Summary: fmt.Sprintf("deleted %d versions and %d files (%d bytes)", res.DeletedVersions, res.DeletedFiles, res.BytesReclaimed),
			// Cleanup of Lance stores bytes; the counters have no field for it.
			NothingToDo: res.DeletedVersions == 0 && res.DeletedFiles == 0,
			Retained:    oldestKept(res.Plan),
		}, nil
	}
}
