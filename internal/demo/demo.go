// Package demo is the built-in demo workload of `make run`: it creates
// local Lance tables (if absent) as LanceDB would — a primary key, a btree
// index id_idx and a bitmap index cat_idx, and a MemWAL bucket-sharded on
// the key that maintains id_idx — then streams upserts and deletes through
// the public Go MemWAL writer (package lancewal) and appends and deletes
// fragments of the base table, so that a newcomer sees merges, index
// catch-ups, trims and compactions within a minute. It never stops the
// daemon: every error is logged and the loop goes on.
//
// The demo is a writer like any other: it opens its tables itself, as a
// service writing to them would, and shares nothing with the daemon.
package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/demo/democfg"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/lancewal"
)

// Columns of a demo table.
const (
	KeyColumn = "id"
	// BaseKeyStart separates the keys appended to the base table from the
	// MemWAL's key space: an append must not repeat a live key.
	BaseKeyStart = democfg.BaseKeyStart
)

// Indices every demo table gets; the MemWAL maintains the btree (LanceDB
// maintains btree indexes, not bitmap ones).
const (
	KeyIndex = "id_idx"
	CatIndex = "cat_idx"
)

var categories = []string{"red", "green", "blue", "amber", "violet"}

// Fields is a demo table's schema as LanceDB writes it: id int64 (not
// null, the primary key), cat utf8, val double.
func Fields() []*pb.Field {
	return []*pb.Field{
		{Name: KeyColumn, Id: 0, ParentId: -1, LogicalType: "int64", Encoding: pb.Encoding_PLAIN,
			Metadata: map[string][]byte{table.PrimaryKeyPositionKey: []byte("1")}, UnenforcedPrimaryKey: true, UnenforcedPrimaryKeyPosition: 1},
		{Name: "cat", Id: 1, ParentId: -1, LogicalType: "string", Nullable: true, Encoding: pb.Encoding_VAR_BINARY},
		{Name: "val", Id: 2, ParentId: -1, LogicalType: "double", Nullable: true, Encoding: pb.Encoding_PLAIN},
	}
}

// Config of the demo workload (democfg, which the daemon's configuration
// embeds without linking the workload).
type Config = democfg.Config

// DefaultConfig: off; when on, one table at a modest rate (100 records/s).
func DefaultConfig() Config { return democfg.DefaultConfig() }

// Start builds the workload for the daemon (daemon.Deps.Demo): the CLI's
// run command wires it in, so that the daemon package does not link the
// demo writer.
func Start(cfg Config, logger *zap.Logger) (democfg.Workload, error) {
	w, err := New(cfg, logger)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Counters of what the workload did, for logs and tests.
type Counters struct {
	Upserts, Deletes, Generations, BaseAppends, BaseDeletes, Errors atomic.Int64
}

// Workload is the demo writer.
type Workload struct {
	cfg    Config
	logger *zap.Logger
	rng    *rand.Rand
	tables []*demoTable
	// C counts what was done.
	C Counters
}

// demoTable is one table's handles and the model of what it holds.
type demoTable struct {
	name, url string
	b         storage.Bucket
	h         *table.Handle
	wal       *lancewal.Table
	cfg       *lancewal.Config
	writers   map[string]*lancewal.Writer
	// baseFrags are the fragments the demo appended and has not deleted,
	// with their keys, oldest first.
	baseFrags []baseFrag
	nextBase  int64
	// model is key → "cat/val" of every row the table should read as
	// (through LanceDB's LSM view once every writer flushed).
	model map[int64]string
	// dirty are shards whose writer was dropped with rows only in the WAL.
	dirty map[string]bool
}

type baseFrag struct {
	id   uint64
	keys []int64
}

// New checks its arguments; it does no I/O.
func New(cfg Config, logger *zap.Logger) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	w := &Workload{cfg: cfg, logger: logger.With(zap.String("component", "demo")),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	for i, n := range cfg.Tables {
		w.tables = append(w.tables, &demoTable{name: n, url: cfg.TableURL(n), writers: map[string]*lancewal.Writer{}, dirty: map[string]bool{},
			nextBase: BaseKeyStart + int64(i)*BaseKeyStart, model: map[int64]string{}})
	}
	return w, nil
}

func value(cat string, val float64) string { return fmt.Sprintf("%s/%g", cat, val) }

// Setup creates what is missing: each table, its first rows, its indices
// and its MemWAL configuration. It is idempotent.
func (w *Workload) Setup(ctx context.Context) error {
	for _, t := range w.tables {
		if err := w.setup(ctx, t); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	return nil
}

func (w *Workload) setup(ctx context.Context, t *demoTable) error {
	if t.b == nil {
		b, err := storage.Open(ctx, t.url)
		if err != nil {
			return err
		}
		c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), w.logger.With(zap.String("table", t.name)))
		if err != nil {
			_ = b.Close()
			return err
		}
		t.b = b
		t.h, _ = table.New(b, c)
	}
	switch _, _, err := meta.Latest(ctx, t.b); {
	case errors.Is(err, meta.ErrNoTable):
		if _, err := table.Create(ctx, t.b, Fields(), "", time.Now()); err != nil && !errors.Is(err, table.ErrExists) {
			return err
		}
		// The first rows: the keys the MemWAL will update, so that merges
		// supersede base rows.
		rows := make([]string, 0, w.cfg.KeySpace)
		for k := int64(0); k < w.cfg.KeySpace; k++ {
			cat, val := categories[k%int64(len(categories))], float64(k)
			rows = append(rows, fmt.Sprintf(`{"id":%d,"cat":%q,"val":%g}`, k, cat, val))
			t.model[k] = value(cat, val)
		}
		if _, _, err := t.h.AppendJSON(ctx, strings.NewReader(strings.Join(rows, "\n"))); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if t.wal == nil {
		wt, err := lancewal.OpenTable(ctx, t.url)
		if err != nil {
			return err
		}
		t.wal = wt
	}
	if err := t.wal.CreateIndex(ctx, KeyIndex, KeyColumn, lancewal.BTree); err != nil {
		return err
	}
	if err := t.wal.CreateIndex(ctx, CatIndex, "cat", lancewal.Bitmap); err != nil {
		return err
	}
	spec := lancewal.Config{Sharding: lancewal.Bucket, Column: KeyColumn, NumBuckets: w.cfg.Shards, MaintainedIndexes: []string{KeyIndex}}
	if w.cfg.Shards == 1 {
		spec = lancewal.Config{Sharding: lancewal.Unsharded, MaintainedIndexes: []string{KeyIndex}}
	}
	if _, err := t.wal.EnableMemWAL(ctx, spec); err != nil {
		return err
	}
	cfg, err := t.wal.Config(ctx)
	if err != nil {
		return err
	}
	t.cfg = cfg
	return nil
}

// Run sets up the tables (retrying until it succeeds), then writes until
// ctx is done; on the way out it flushes every writer and closes the
// tables.
func (w *Workload) Run(ctx context.Context) error {
	defer w.close()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-retry.C:
		}
		err := w.Setup(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		w.logger.Warn("demo setup failed; retrying", zap.Error(err))
		retry.Reset(2 * time.Second)
	}
	w.logger.Info("demo workload running", zap.Strings("tables", w.cfg.Tables), zap.Int("shards", w.cfg.Shards),
		zap.Float64("write_interval_seconds", w.cfg.WriteInterval.Seconds()), zap.Int("batch_size", w.cfg.BatchSize),
		zap.Float64("flush_interval_seconds", w.cfg.FlushInterval.Seconds()), zap.Float64("base_interval_seconds", w.cfg.BaseInterval.Seconds()))
	write := time.NewTicker(w.cfg.WriteInterval)
	flush := time.NewTicker(w.cfg.FlushInterval)
	base := time.NewTicker(w.cfg.BaseInterval)
	report := time.NewTicker(15 * time.Second)
	defer write.Stop()
	defer flush.Stop()
	defer base.Stop()
	defer report.Stop()
	defer w.flushAll(context.WithoutCancel(ctx), true)
	// An operation, once started, runs to its end: a write canceled
	// half-way would leave its outcome unknown (in the WAL or not), and the
	// model exact only while outcomes are known. Stopping waits for one.
	op := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-write.C:
			for _, t := range w.tables {
				w.note(op, t, "write", w.writeBatch(op, t))
			}
		case <-flush.C:
			w.flushAll(op, false)
		case <-base.C:
			for _, t := range w.tables {
				w.note(op, t, "base append", w.appendBase(op, t))
				w.note(op, t, "base delete", w.deleteBase(op, t))
			}
		case <-report.C:
			w.logger.Info("demo progress", zap.Int64("upserts", w.C.Upserts.Load()), zap.Int64("deletes", w.C.Deletes.Load()),
				zap.Int64("generations", w.C.Generations.Load()), zap.Int64("base_appends", w.C.BaseAppends.Load()),
				zap.Int64("base_deletes", w.C.BaseDeletes.Load()), zap.Int64("errors", w.C.Errors.Load()))
		}
	}
}

func (w *Workload) close() {
	for _, t := range w.tables {
		if t.wal != nil {
			_ = t.wal.Close()
		}
		if t.b != nil {
			_ = t.b.Close()
		}
	}
}

func (w *Workload) note(ctx context.Context, t *demoTable, what string, err error) {
	if err == nil || ctx.Err() != nil {
		return // stopping: an interrupted write is not a failure
	}
	w.C.Errors.Add(1)
	w.logger.Warn("demo "+what+" failed; carrying on", zap.String("table", t.name), zap.Error(err))
}

// writer returns the shard's writer, claiming the shard on first use and
// again after a failure (a fenced or failed writer is dropped: its WAL
// entries are replayed by the next claim).
func (w *Workload) writer(ctx context.Context, t *demoTable, shard string) (*lancewal.Writer, error) {
	if wr := t.writers[shard]; wr != nil {
		return wr, nil
	}
	wr, err := t.wal.OpenWriter(ctx, shard, lancewal.WriterOptions{})
	if err != nil {
		return nil, err
	}
	t.writers[shard] = wr
	delete(t.dirty, shard)
	return wr, nil
}

func (w *Workload) drop(t *demoTable, shard string) {
	if wr := t.writers[shard]; wr != nil {
		wr.Abandon()
		delete(t.writers, shard)
	}
	// Its acknowledged rows are in the WAL only: the next claim replays
	// them, and the last flush makes sure there is one.
	t.dirty[shard] = true
}

// writeBatch writes BatchSize records, grouped into one upsert and one
// delete per shard.
func (w *Workload) writeBatch(ctx context.Context, t *demoTable) error {
	type group struct {
		rows []lancewal.Row
		dels []any
	}
	groups := map[string]*group{}
	var order []string
	for i := 0; i < w.cfg.BatchSize; i++ {
		k := w.rng.Int64N(w.cfg.KeySpace)
		s, err := t.cfg.ShardFor(k)
		if err != nil {
			return err
		}
		g := groups[s]
		if g == nil {
			g = &group{}
			groups[s] = g
			order = append(order, s)
		}
		if w.rng.Float64() < w.cfg.DeleteFraction {
			g.dels = append(g.dels, k)
		} else {
			g.rows = append(g.rows, lancewal.Row{KeyColumn: k, "cat": categories[w.rng.IntN(len(categories))], "val": w.rng.Float64() * 1000})
		}
	}
	var errs []error
	for _, s := range order {
		g := groups[s]
		wr, err := w.writer(ctx, t, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Within a batch a key's last record wins: apply upserts first,
		// then deletes, in both the writer and the model.
		if len(g.rows) > 0 {
			if err := wr.Upsert(ctx, g.rows); err != nil {
				w.drop(t, s)
				errs = append(errs, err)
				continue
			}
			for _, r := range g.rows {
				t.model[r[KeyColumn].(int64)] = value(r["cat"].(string), r["val"].(float64))
			}
			w.C.Upserts.Add(int64(len(g.rows)))
		}
		if len(g.dels) > 0 {
			if err := wr.Delete(ctx, g.dels); err != nil {
				w.drop(t, s)
				errs = append(errs, err)
				continue
			}
			for _, k := range g.dels {
				delete(t.model, k.(int64))
			}
			w.C.Deletes.Add(int64(len(g.dels)))
		}
	}
	return errors.Join(errs...)
}

// flushAll flushes every writer; closing also releases them.
func (w *Workload) flushAll(ctx context.Context, closing bool) {
	for _, t := range w.tables {
		if closing {
			for s := range t.dirty {
				if _, err := w.writer(ctx, t, s); err != nil {
					w.note(ctx, t, "claim to flush", err)
				}
			}
		}
		for _, s := range slices.Sorted(maps.Keys(t.writers)) {
			wr := t.writers[s]
			g, err := wr.Flush(ctx)
			if err != nil {
				w.drop(t, s)
				w.note(ctx, t, "flush", err)
				continue
			}
			if g != nil {
				w.C.Generations.Add(1)
			}
			if closing {
				_ = wr.Close(ctx)
				delete(t.writers, s)
			}
		}
	}
}

// appendBase appends BaseRows new keys to the base table as one fragment.
func (w *Workload) appendBase(ctx context.Context, t *demoTable) error {
	var lines []string
	keys := make([]int64, 0, w.cfg.BaseRows)
	vals := make([]string, 0, w.cfg.BaseRows)
	for i := 0; i < w.cfg.BaseRows; i++ {
		k := t.nextBase
		t.nextBase++
		cat, val := categories[w.rng.IntN(len(categories))], float64(w.rng.IntN(1000))
		lines = append(lines, fmt.Sprintf(`{"id":%d,"cat":%q,"val":%g}`, k, cat, val))
		keys = append(keys, k)
		vals = append(vals, value(cat, val))
	}
	res, _, err := t.h.AppendJSON(ctx, strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		return err
	}
	var id uint64
	for _, f := range res.Manifest.Manifest.GetFragments() {
		id = max(id, f.GetId())
	}
	t.baseFrags = append(t.baseFrags, baseFrag{id: id, keys: keys})
	for i, k := range keys {
		t.model[k] = vals[i]
	}
	w.C.BaseAppends.Add(1)
	return nil
}

// deleteBase deletes the oldest demo-appended fragment once more than two
// are live. A fragment a compaction rewrote is no longer deletable as a
// whole and is forgotten (its rows stay, in the model too).
func (w *Workload) deleteBase(ctx context.Context, t *demoTable) error {
	if len(t.baseFrags) <= 2 {
		return nil
	}
	read, _, err := t.h.ReadForWrite(ctx)
	if err != nil {
		return err
	}
	live := map[uint64]bool{}
	for _, f := range read.Manifest.GetFragments() {
		live[f.GetId()] = true
	}
	old := t.baseFrags[0]
	t.baseFrags = t.baseFrags[1:]
	if !live[old.id] {
		return nil
	}
	if _, err := t.h.DeleteFragments(ctx, []uint64{old.id}); err != nil {
		return err
	}
	for _, k := range old.keys {
		delete(t.model, k)
	}
	w.C.BaseDeletes.Add(1)
	return nil
}
