// Package concurrency is the concurrency campaign: base-table writers
// (appends and deletes), MemWAL writers (upserts, tombstones, flushes,
// restarts and shard steals) and two daemon instances without leases
// (every job of both runs on the one table) work on one table for a
// bounded time. Afterwards every shard is flushed and merged, and the
// table must hold every acknowledged write (no lost write), none of the
// acknowledged deletes (no resurrected delete), indices must answer like
// the table, and verify must be clean.
//
// Writers own disjoint key ranges, so each can keep an exact model of its
// keys however the others interleave. Racers share on purpose what a
// check-then-commit precondition protects: two appenders of one key range,
// two creators of one index name, and a configure adding and dropping a
// shard while a writer writes to it. An operation whose outcome is
// ambiguous (commit.AmbiguousError, memwal.ErrUnknownOutcome, a fenced
// append that may have landed) makes its keys "either" until a later
// acknowledged operation settles them.
package concurrency

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/trim"
	"github.com/compactord/compactord/internal/verify"
)

// Config configures a campaign.
type Config struct {
	// URL is an empty table root.
	URL      string
	Seed     uint64
	Duration time.Duration
	// BaseWriters and Shards count the writers (defaults 2 and 2).
	BaseWriters, Shards int
	// Daemons is the number of in-process daemon instances, without
	// leases (default 1; negative: none). JobLoops is the number of
	// goroutines running every job in a loop beside them (default 1;
	// negative: none): the daemon runs merges first, so under constant
	// flushing they keep compaction, index and trim running.
	Daemons, JobLoops int
	Logger            *zap.Logger
}

// Stats is what a campaign did.
type Stats struct {
	Seed uint64 `json:"seed"`
	// Ops counts writer operations; Failed and Ambiguous those that
	// returned an error and those whose outcome was unknown.
	Ops, Failed, Ambiguous int
	// Jobs and JobFailures count the daemons' job attempts by kind.
	Jobs, JobFailures map[string]int
	// Errors samples writer and job errors (expected under contention,
	// reported for diagnosis).
	Errors     []string
	Violations []string
	// Phases times the run, the daemons' shutdown, the drain and the
	// final check.
	Phases map[string]time.Duration
	// Version, Fragments and Rows describe the table at the end.
	Version         uint64
	Fragments, Rows int
}

const (
	schemaSpec = "id:int64,cat:string,val:int64"
	walKeys    = 1000 // WAL keys are [0, walKeys), shard i owning k%n == i
	baseRange  = 1_000_000
)

// keyState is what a writer knows about one key: the rows it may hold at
// the end (nil = absent). One entry means the outcome is certain.
type keyState struct {
	possible []table.Row
}

func (k *keyState) set(r table.Row)   { k.possible = []table.Row{r} }
func (k *keyState) maybe(r table.Row) { k.possible = append(k.possible, r) }
func (k *keyState) certain() bool     { return len(k.possible) == 1 }
func (k *keyState) live() table.Row   { return k.possible[0] }
func (k *keyState) mayBeAbsent() bool {
	return slices.ContainsFunc(k.possible, func(r table.Row) bool { return r == nil })
}
func (k *keyState) mayBePresent() bool {
	return slices.ContainsFunc(k.possible, func(r table.Row) bool { return r != nil })
}

type campaign struct {
	cfg    Config
	raw    storage.Bucket
	schema *pb.Schema
	mu     sync.Mutex
	stats  *Stats
	// keys is every writer's model, merged at the end (ranges are
	// disjoint).
	keys map[int64]*keyState
}

// Run runs a campaign. Violations are in Stats; the error is for a
// failure to set up.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	if cfg.BaseWriters == 0 {
		cfg.BaseWriters = 2
	}
	if cfg.Shards == 0 {
		cfg.Shards = 2
	}
	if cfg.Daemons == 0 {
		cfg.Daemons = 1
	}
	if cfg.JobLoops == 0 {
		cfg.JobLoops = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	raw, err := storage.Open(ctx, cfg.URL)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	c := &campaign{cfg: cfg, raw: raw, keys: map[int64]*keyState{},
		stats: &Stats{Seed: cfg.Seed, Jobs: map[string]int{}, JobFailures: map[string]int{}, Errors: []string{}, Violations: []string{},
			Phases: map[string]time.Duration{}}}
	if c.schema, err = table.ParseSchema(schemaSpec, []string{"id"}); err != nil {
		return nil, err
	}
	t, err := c.newTable(raw)
	if err != nil {
		return nil, err
	}
	if _, err := t.Create(ctx, c.schema); err != nil {
		return nil, err
	}
	for _, spec := range []index.Spec{{Name: model.IndexByID, Column: "id", Type: index.TypeBTree}, {Name: model.IndexByCat, Column: "cat", Type: index.TypeBitmap}} {
		if _, err := index.Create(ctx, t, spec, index.BuildConfig{}); err != nil {
			return nil, err
		}
	}
	var shards []string
	for i := 0; i < cfg.Shards; i++ {
		shards = append(shards, fmt.Sprintf("s%d", i))
	}
	if _, err := memwal.Configure(ctx, t, shards, []string{model.IndexByID, model.IndexByCat}); err != nil {
		return nil, err
	}

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	var daemons []*runningDaemon
	for i := 0; i < cfg.Daemons; i++ {
		d, err := c.startDaemon(runCtx, i)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
	}
	for i := 0; i < cfg.JobLoops; i++ {
		wg.Go(func() { c.jobsLoop(runCtx, i) })
	}
	for i := 0; i < cfg.BaseWriters; i++ {
		wg.Go(func() { c.baseWriter(runCtx, i) })
	}
	for i, s := range shards {
		wg.Go(func() { c.walWriter(runCtx, i, s, len(shards)) })
	}
	// Racers that share what the others keep apart: two appenders of one
	// key range, two creators of one index name on different columns, and
	// a configure that adds and drops a shard a writer writes to. Each
	// checks its precondition at its read version; the commit must too.
	for i := 0; i < 2; i++ {
		wg.Go(func() { c.keyRacer(runCtx, i) })
		wg.Go(func() { c.nameRacer(runCtx, i) })
	}
	wg.Go(func() { c.shardRacer(runCtx, shards) })
	phase := time.Now()
	lap := func(name string) {
		c.stats.Phases[name] = time.Since(phase).Round(time.Millisecond)
		phase = time.Now()
	}
	wg.Wait()
	lap("writers")
	for _, d := range daemons {
		if err := d.stop(); err != nil {
			c.violation("daemon %d stopped with an error: %v", d.id, err)
		}
		c.collectJobs(d)
	}
	lap("daemons_stop")
	if err := c.drain(ctx, append(slices.Clone(shards), racedShard)); err != nil {
		c.violation("%v", err)
	} else {
		lap("drain")
		if err := c.finalCheck(ctx); err != nil {
			c.violation("%v", err)
		}
		lap("check")
	}
	return c.stats, nil
}

func (c *campaign) newTable(b storage.Bucket) (*ops.Table, error) {
	cm, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	t := ops.NewTable(b, cm, nil, nil)
	t.MaxRowsPerFragment = 32
	return t, nil
}

func (c *campaign) violation(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Violations = append(c.stats.Violations, fmt.Sprintf("seed %d: ", c.cfg.Seed)+fmt.Sprintf(format, args...))
}

// note records an operation's outcome.
func (c *campaign) note(who string, err error, ambiguous bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Ops++
	if err == nil {
		return
	}
	c.stats.Failed++
	if ambiguous {
		c.stats.Ambiguous++
	}
	if len(c.stats.Errors) < 20 {
		c.stats.Errors = append(c.stats.Errors, who+": "+err.Error())
	}
}

func (c *campaign) state(k int64) *keyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.keys[k]
	if s == nil {
		s = &keyState{possible: []table.Row{nil}}
		c.keys[k] = s
	}
	return s
}

func isAmbiguous(err error) bool {
	var ae *commit.AmbiguousError
	var fe *memwal.FencedError
	return errors.As(err, &ae) || errors.Is(err, memwal.ErrUnknownOutcome) || errors.As(err, &fe) && fe.MaybeLanded
}

func randRow(rng *rand.Rand, k int64) table.Row {
	return table.Row{k, fmt.Sprintf("c%d", rng.IntN(6)), int64(rng.IntN(1_000_000))}
}

// baseWriter appends fresh keys of its range and deletes its own keys,
// by key and by predicate, until ctx ends.
func (c *campaign) baseWriter(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, uint64(w)+100))
	t, err := c.newTable(c.raw)
	if err != nil {
		c.violation("writer %d: %v", w, err)
		return
	}
	lo := int64(w+1) * baseRange
	next := lo
	var live []int64 // keys this writer believes may be live
	who := fmt.Sprintf("base writer %d", w)
	for ctx.Err() == nil {
		switch r := rng.IntN(100); {
		case r < 60 || len(live) == 0:
			var rows []table.Row
			for n := 1 + rng.IntN(20); n > 0; n-- {
				rows = append(rows, randRow(rng, next))
				next++
			}
			_, err := t.Append(ctx, rows)
			if ctx.Err() != nil && err != nil {
				// Canceled by the end of the run: the outcome is unknown.
				err = &commit.AmbiguousError{Err: err}
			}
			amb := isAmbiguous(err)
			c.note(who, err, amb)
			for _, row := range rows {
				s := c.state(Key(row))
				switch {
				case err == nil:
					s.set(row)
				case amb:
					s.maybe(row)
				}
				if err == nil || amb {
					live = append(live, Key(row))
				}
			}
		case r < 85:
			var spec []table.Row
			var ks []int64
			for n := 1 + rng.IntN(5); n > 0; n-- {
				k := live[rng.IntN(len(live))]
				ks = append(ks, k)
				spec = append(spec, table.Row{k, nil, nil})
			}
			_, _, err := t.Delete(ctx, nil, ops.DeleteSpec{Keys: spec})
			c.settleDelete(ctx, who, ks, err)
			live = slices.DeleteFunc(live, func(k int64) bool { return err == nil && slices.Contains(ks, k) })
		default:
			a := lo + int64(rng.IntN(int(next-lo)+1))
			b := a + 1 + int64(rng.IntN(30))
			p, perr := ops.ParsePredicate(c.schema, fmt.Sprintf("id >= %d AND id < %d", a, b))
			if perr != nil {
				c.violation("%s: %v", who, perr)
				return
			}
			_, _, err := t.Delete(ctx, nil, ops.DeleteSpec{Predicate: p})
			var ks []int64
			for _, k := range live {
				if k >= a && k < b {
					ks = append(ks, k)
				}
			}
			c.settleDelete(ctx, who, ks, err)
			live = slices.DeleteFunc(live, func(k int64) bool { return err == nil && k >= a && k < b })
		}
	}
}

// Key is a row's primary key.
func Key(r table.Row) int64 { return r[0].(int64) }

func (c *campaign) settleDelete(ctx context.Context, who string, ks []int64, err error) {
	if ctx.Err() != nil && err != nil {
		err = &commit.AmbiguousError{Err: err}
	}
	amb := isAmbiguous(err)
	c.note(who, err, amb)
	for _, k := range ks {
		s := c.state(k)
		switch {
		case err == nil:
			s.set(nil)
		case amb:
			s.maybe(nil)
		}
	}
}

// walWriter writes upserts and tombstones of its shard's keys, flushes
// now and then, restarts (drops its MemTable and claims again, replaying
// the WAL) and sometimes is superseded by a second writer mid-run.
func (c *campaign) walWriter(ctx context.Context, i int, shard string, n int) {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, uint64(i)+200))
	who := "wal writer " + shard
	var w *memwal.Writer
	claim := func() bool {
		nw, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: c.schema}, c.raw)
		if err == nil {
			_, err = nw.Claim(ctx)
		}
		if err != nil {
			c.note(who+" claim", err, false)
			return false
		}
		w = nw
		return true
	}
	for ctx.Err() == nil {
		if w == nil && !claim() {
			continue
		}
		switch r := rng.IntN(100); {
		case r < 75:
			var recs []memwal.Record
			for m := 1 + rng.IntN(8); m > 0; m-- {
				k := int64(i + n*rng.IntN(walKeys/n))
				if rng.IntN(4) == 0 {
					recs = append(recs, memwal.Record{Op: memwal.Delete, Row: table.Row{k, nil, nil}})
				} else {
					recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: randRow(rng, k)})
				}
			}
			_, err := w.Append(ctx, recs)
			if ctx.Err() != nil && err != nil {
				err = fmt.Errorf("%w: canceled at the end of the run: %v", memwal.ErrUnknownOutcome, err)
			}
			amb := isAmbiguous(err)
			c.note(who, err, amb)
			// Within one entry a later record for a key wins, as in the
			// MemTable.
			final := map[int64]table.Row{}
			var order []int64
			for _, rec := range recs {
				k := Key(rec.Row)
				if _, seen := final[k]; !seen {
					order = append(order, k)
				}
				if rec.Op == memwal.Delete {
					final[k] = nil
				} else {
					final[k] = rec.Row
				}
			}
			for _, k := range order {
				s := c.state(k)
				switch {
				case err == nil:
					s.set(final[k])
				case amb:
					s.maybe(final[k])
				}
			}
			if err != nil {
				w = nil // a failed writer is replaced; the new one replays
			}
		case r < 90:
			if _, err := w.Flush(ctx); err != nil {
				c.note(who+" flush", err, false)
				w = nil
			} else {
				c.note(who+" flush", nil, false)
			}
		case r < 97:
			w = nil // restart: the next operation claims and replays
		default:
			// A second writer takes the shard while this one lives; the
			// old one must be fenced (its next write fails), and the new
			// one continues.
			old := w
			if !claim() {
				continue
			}
			rec := memwal.Record{Op: memwal.Upsert, Row: randRow(rng, int64(i))}
			_, err := old.Append(ctx, []memwal.Record{rec})
			var fe *memwal.FencedError
			switch {
			case errors.As(err, &fe) && fe.MaybeLanded:
				c.state(int64(i)).maybe(rec.Row)
			case errors.Is(err, memwal.ErrFenced):
			case err == nil:
				c.violation("%s: a superseded writer's append succeeded", who)
			default:
				if ctx.Err() != nil {
					c.state(int64(i)).maybe(rec.Row)
				}
			}
		}
	}
}

const (
	racedKeys  = 500_000 // keys [racedKeys, racedKeys+racedSpan) are appended by both key racers
	racedSpan  = 2_000
	racedShard = "x"     // added and dropped by the shard racer while written to
	shardKeys  = 600_000 // keys the writer of racedShard writes, each once
)

// keyRacer appends keys of a range the other key racer appends too, in
// the same order: at most one append of each key may succeed, and the
// final check and verify see any key live twice.
func (c *campaign) keyRacer(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, uint64(id)+300))
	t, err := c.newTable(c.raw)
	if err != nil {
		c.violation("key racer %d: %v", id, err)
		return
	}
	who := fmt.Sprintf("key racer %d", id)
	for k := int64(racedKeys); k < racedKeys+racedSpan && ctx.Err() == nil; {
		n := int64(1 + rng.IntN(3))
		var rows []table.Row
		for j := int64(0); j < n && k+j < racedKeys+racedSpan; j++ {
			rows = append(rows, table.Row{k + j, fmt.Sprintf("c%d", id), int64(id)})
		}
		k += n
		_, err := t.Append(ctx, rows)
		if ctx.Err() != nil && err != nil {
			err = &commit.AmbiguousError{Err: err}
		}
		amb := isAmbiguous(err)
		c.note(who, err, amb)
		for _, r := range rows {
			s := c.state(Key(r))
			c.mu.Lock()
			switch {
			case err == nil && s.certain() && s.live() != nil:
				c.stats.Violations = append(c.stats.Violations, fmt.Sprintf("seed %d: key %d appended twice, both acknowledged", c.cfg.Seed, Key(r)))
			case err == nil && s.mayBePresent():
				s.possible = slices.DeleteFunc(s.possible, func(x table.Row) bool { return x == nil })
				s.maybe(r)
			case err == nil:
				s.set(r)
			case amb:
				s.maybe(r)
			}
			c.mu.Unlock()
		}
	}
}

// nameRacer creates an index of a name the other name racer creates at the
// same time over another column: at most one may commit, and verify
// reports a logical index whose segments disagree.
func (c *campaign) nameRacer(ctx context.Context, id int) {
	t, err := c.newTable(c.raw)
	if err != nil {
		c.violation("name racer %d: %v", id, err)
		return
	}
	spec := index.Spec{Column: "val", Type: index.TypeBTree}
	if id == 1 {
		spec = index.Spec{Column: "cat", Type: index.TypeBitmap}
	}
	for n := 0; ctx.Err() == nil && n < 50; n++ {
		spec.Name = fmt.Sprintf("race%d", n)
		_, err := index.Create(ctx, t, spec, index.BuildConfig{})
		c.note(fmt.Sprintf("name racer %d", id), err, false)
	}
}

// shardRacer adds racedShard to the MemWAL and drops it again while a
// writer writes fresh keys to it: a drop must never commit over an
// acknowledged write the base table lacks (it is refused, or fences the
// write). The writer flushes; the jobs merge.
func (c *campaign) shardRacer(ctx context.Context, shards []string) {
	t, err := c.newTable(c.raw)
	if err != nil {
		c.violation("shard racer: %v", err)
		return
	}
	maintain := []string{model.IndexByID, model.IndexByCat}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			_, err := memwal.Configure(ctx, t, append(slices.Clone(shards), racedShard), maintain)
			c.note("shard racer add", err, false)
			_, err = memwal.Configure(ctx, t, shards, maintain)
			c.note("shard racer drop", err, false)
		}
	})
	next := int64(shardKeys)
	var w *memwal.Writer
	for ctx.Err() == nil {
		if w == nil {
			head, err := table.ReadLatest(ctx, c.raw)
			if err != nil || !slices.Contains(table.MemWal(head).GetShards(), racedShard) {
				continue
			}
			nw, err := memwal.NewWriter(memwal.Config{Shard: racedShard, Schema: c.schema}, c.raw)
			if err == nil {
				_, err = nw.Claim(ctx)
			}
			if err != nil {
				c.note("shard racer claim", err, false)
				continue
			}
			w = nw
		}
		row := table.Row{next, "x", int64(0)}
		next++
		_, err := w.Append(ctx, []memwal.Record{{Op: memwal.Upsert, Row: row}})
		if ctx.Err() != nil && err != nil {
			err = fmt.Errorf("%w: canceled at the end of the run: %v", memwal.ErrUnknownOutcome, err)
		}
		amb := isAmbiguous(err)
		c.note("shard racer write", err, amb)
		switch s := c.state(Key(row)); {
		case err == nil:
			s.set(row)
		case amb:
			s.maybe(row)
		}
		if err != nil {
			w = nil
			continue
		}
		if next%3 == 0 {
			if _, err := w.Flush(ctx); err != nil {
				c.note("shard racer flush", err, false)
				w = nil
			}
		}
	}
	wg.Wait()
}

// jobsLoop runs every job in-process in a loop, compaction twice (one
// deferred, one with inline remap).
func (c *campaign) jobsLoop(ctx context.Context, id int) {
	t, err := c.newTable(c.raw)
	if err != nil {
		c.violation("jobs: %v", err)
		return
	}
	for ctx.Err() == nil {
		mg, _ := merge.New(merge.Config{MaxGenerations: 4}, t)
		_, err := mg.Run(ctx, "")
		c.noteJob("merge", err)
		for _, inline := range []bool{false, true} {
			cp, _ := compact.New(compact.Config{TargetRowsPerFragment: 64, Parallelism: 1, InlineRemap: inline}, t, nil, nil)
			_, err = cp.Run(ctx, nil)
			c.noteJob("compact", err)
		}
		j, _ := indexjob.New(indexjob.Config{}, t, nil)
		_, err = j.Run(ctx)
		c.noteJob("index", err)
		_, err = trim.Run(ctx, c.raw, trim.Config{Concurrency: 2, KeepShardManifests: 3, MaxAttempts: 3})
		c.noteJob("trim", err)
		_, err = cleanup.Run(ctx, c.raw, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 20, MinAge: 30 * time.Second}, Concurrency: 2}, time.Now())
		c.noteJob("cleanup", err)
	}
}

func (c *campaign) noteJob(kind string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Jobs[kind]++
	if err != nil {
		c.stats.JobFailures[kind]++
		if len(c.stats.Errors) < 20 {
			c.stats.Errors = append(c.stats.Errors, kind+": "+err.Error())
		}
	}
}

type runningDaemon struct {
	id   int
	d    *daemon.Daemon
	reg  *prometheus.Registry
	done chan error
}

func (r *runningDaemon) stop() error { return <-r.done }

// startDaemon starts an in-process daemon on the table with short
// schedules and no leases: two instances then run every job on the same
// table at once, and only the commit loop keeps them apart.
func (c *campaign) startDaemon(ctx context.Context, id int) (*runningDaemon, error) {
	cfg := daemon.DefaultConfig()
	cfg.Log.Level = "error"
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Scheduler.Workers = 2
	cfg.Scheduler.Schedule.Merge = "@every 1s"
	cfg.Scheduler.Schedule.Compact = "@every 1s"
	cfg.Scheduler.Schedule.Index = "@every 1s"
	cfg.Scheduler.Schedule.Trim = "@every 1s"
	cfg.Scheduler.Schedule.Cleanup = "@every 2s"
	cfg.Scheduler.PollInterval = 100 * time.Millisecond
	cfg.Scheduler.SyncInterval = 500 * time.Millisecond
	cfg.Scheduler.Retry.BaseBackoff = 100 * time.Millisecond
	cfg.Scheduler.Retry.MaxBackoff = time.Second
	cfg.Scheduler.Retry.QuarantineAfter = 1000
	// A short grace: jobs still running at the end are canceled mid-way,
	// which the final check then covers too.
	cfg.Scheduler.ShutdownGrace = 3 * time.Second
	cfg.Scheduler.Lease.Enabled = false
	cfg.Tables = []daemon.TableConfig{{URL: c.cfg.URL, Name: "campaign"}}
	cfg.Jobs.Compact.TargetRowsPerFragment = 64
	cfg.Jobs.Compact.Parallelism = 1
	// Writers register no in-flight markers: min_age is what keeps their
	// uncommitted files (Lance #3718).
	cfg.Jobs.Cleanup.Policy = cleanup.Policy{RetainVersions: 20, MinAge: 30 * time.Second}
	cfg.Jobs.Trim.KeepShardManifests = 3
	reg := prometheus.NewRegistry()
	d, err := daemon.New(cfg, daemon.Deps{Logger: c.cfg.Logger.With(zap.Int("daemon", id)), Registry: reg})
	if err != nil {
		return nil, err
	}
	r := &runningDaemon{id: id, d: d, reg: reg, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	return r, nil
}

// collectJobs adds a stopped daemon's job counters to the stats and
// reports a halted table.
func (c *campaign) collectJobs(r *runningDaemon) {
	mfs, err := r.reg.Gather()
	if err != nil {
		c.violation("gather daemon %d metrics: %v", r.id, err)
		return
	}
	sum := func(mf *dto.MetricFamily, into map[string]int) {
		for _, m := range mf.Metric {
			kind := ""
			for _, l := range m.Label {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			into[kind] += int(m.GetCounter().GetValue())
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "compactord_job_runs_total":
			sum(mf, c.stats.Jobs)
		case "compactord_job_failures_total":
			sum(mf, c.stats.JobFailures)
		}
	}
	for _, ts := range r.d.Scheduler().Tables() {
		if ts.Halted != nil {
			c.stats.Violations = append(c.stats.Violations, fmt.Sprintf("seed %d: daemon %d halted table %s: %+v", c.cfg.Seed, r.id, ts.Name, *ts.Halted))
		}
		for _, j := range ts.Recent {
			if j.Error != "" && len(c.stats.Errors) < 20 {
				c.stats.Errors = append(c.stats.Errors, fmt.Sprintf("daemon %d %s: %s", r.id, j.Kind, j.Error))
			}
		}
	}
}

// drain flushes every shard with a fresh writer and merges everything.
func (c *campaign) drain(ctx context.Context, shards []string) error {
	t, err := c.newTable(c.raw)
	if err != nil {
		return err
	}
	head, err := table.ReadLatest(ctx, c.raw)
	if err != nil {
		return err
	}
	// Only the shards configured now: the shard racer may have dropped
	// racedShard (once drained) or left it configured.
	shards = slices.DeleteFunc(shards, func(s string) bool { return !slices.Contains(table.MemWal(head).GetShards(), s) })
	for _, s := range shards {
		w, err := memwal.NewWriter(memwal.Config{Shard: s, Schema: c.schema}, c.raw)
		if err != nil {
			return err
		}
		if _, err := w.Claim(ctx); err != nil {
			return fmt.Errorf("drain: claim %s: %w", s, err)
		}
		if _, err := w.Flush(ctx); err != nil {
			return fmt.Errorf("drain: flush %s: %w", s, err)
		}
	}
	mg, err := merge.New(merge.Config{}, t)
	if err != nil {
		return err
	}
	if _, err := mg.Run(ctx, ""); err != nil {
		return fmt.Errorf("drain: merge: %w", err)
	}
	j, err := indexjob.New(indexjob.Config{}, t, nil)
	if err != nil {
		return err
	}
	if _, err := j.Run(ctx); err != nil {
		return fmt.Errorf("drain: index job: %w", err)
	}
	head, err = table.ReadLatest(ctx, c.raw)
	if err != nil {
		return err
	}
	d := table.MemWal(head)
	for _, s := range shards {
		sm, err := memwal.ReadShardManifest(ctx, c.raw, s)
		if err != nil {
			return err
		}
		if sm != nil && sm.CurrentGeneration > 0 && d.CompactedSstables[s] != sm.CurrentGeneration-1 {
			return fmt.Errorf("drain: shard %s merged through %d of %d flushed generations", s, d.CompactedSstables[s], sm.CurrentGeneration-1)
		}
	}
	return nil
}

// finalCheck compares the table with every writer's model.
func (c *campaign) finalCheck(ctx context.Context) error {
	head, rows, err := model.ScanLatest(ctx, c.raw)
	if err != nil {
		return err
	}
	c.stats.Version, c.stats.Fragments, c.stats.Rows = head.Version, len(head.Fragments), len(rows)
	var problems []string
	keys := make([]int64, 0, len(c.keys))
	for k := range c.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		s := c.keys[k]
		got, present := rows[k]
		switch {
		case present && !s.mayBePresent():
			problems = append(problems, fmt.Sprintf("key %d resurrected: deleted (acknowledged) but live as %s", k, table.RowJSON(c.schema, got)))
		case !present && !s.mayBeAbsent():
			problems = append(problems, fmt.Sprintf("key %d lost: acknowledged as %s", k, table.RowJSON(c.schema, s.live())))
		case present && !slices.ContainsFunc(s.possible, func(r table.Row) bool {
			return r != nil && string(table.RowJSON(c.schema, r)) == string(table.RowJSON(c.schema, got))
		}):
			problems = append(problems, fmt.Sprintf("key %d holds %s, which no acknowledged or pending write wrote", k, table.RowJSON(c.schema, got)))
		}
		if len(problems) >= 10 {
			break
		}
	}
	for k, r := range rows {
		if _, ok := c.keys[k]; !ok {
			problems = append(problems, fmt.Sprintf("key %d was never written but is live as %s", k, table.RowJSON(c.schema, r)))
			break
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("after the run, at version %d:\n    %s", head.Version, strings.Join(problems, "\n    "))
	}
	// Indices must answer like the table.
	var ids []int64
	for i, k := range keys {
		if i%max(1, len(keys)/40) == 0 {
			ids = append(ids, k)
		}
	}
	var cats []string
	for i := 0; i < 6; i++ {
		cats = append(cats, fmt.Sprintf("c%d", i))
	}
	if err := model.CheckIndices(ctx, c.raw, head, rows, ids, cats); err != nil {
		return err
	}
	rep, err := verify.Run(ctx, c.raw, verify.Options{Deep: true, DeepCheck: index.DeepCheck})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !rep.OK() {
		var vs []string
		for _, v := range rep.Violations {
			vs = append(vs, v.Object+": "+v.Reason)
		}
		return fmt.Errorf("verify found %d violations:\n    %s", len(vs), strings.Join(vs, "\n    "))
	}
	return nil
}
