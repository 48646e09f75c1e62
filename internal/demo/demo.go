// Package demo is the built-in demo workload of `make run`: it creates a
// table (if absent) with two indices and a MemWAL, then streams upserts and
// deletes through MemWAL writers and appends and deletes on the base table,
// so that a newcomer sees merges, compactions, catch-ups and trims within a
// minute. It never stops the daemon: every error is logged and the loop
// goes on.
package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// Schema of the demo table.
const (
	SchemaSpec = "id:int64,cat:string,val:float64"
	PrimaryKey = "id"
	// BaseKeyStart separates the keys appended to the base table from the
	// MemWAL's key space: an append must not repeat a live key.
	BaseKeyStart = 1_000_000
)

// Indices the demo creates and has the MemWAL maintain.
var Indices = []index.Spec{
	{Name: "id_idx", Column: "id", Type: index.TypeBTree},
	{Name: "cat_idx", Column: "cat", Type: index.TypeBitmap},
}

var categories = []string{"red", "green", "blue", "amber", "violet"}

// Config of the demo workload.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// URL of the demo table; a bare path is relative to the working
	// directory. The daemon watches it as a table too.
	URL    string   `yaml:"url"`
	Name   string   `yaml:"name"`
	Shards []string `yaml:"shards"`
	// KeySpace: MemWAL records use keys in [0, KeySpace), so upserts
	// replace earlier rows and deletes hit live keys.
	KeySpace int64 `yaml:"key_space"`
	// Every WriteInterval, BatchSize records go to the shards' WALs, a
	// DeleteFraction of them tombstones.
	WriteInterval  time.Duration `yaml:"write_interval"`
	BatchSize      int           `yaml:"batch_size"`
	DeleteFraction float64       `yaml:"delete_fraction"`
	// FlushInterval: each writer flushes its MemTable to an SSTable.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// Every BaseInterval, BaseRows rows are appended to the base table as
	// a new fragment and a share of an earlier append is deleted.
	BaseInterval time.Duration `yaml:"base_interval"`
	BaseRows     int           `yaml:"base_rows"`
	Seed         uint64        `yaml:"seed"`
}

// DefaultConfig: off; when on, a modest rate (100 records/s).
func DefaultConfig() Config {
	return Config{
		URL: "var/compactord-demo", Name: "demo", Shards: []string{"s0", "s1"}, KeySpace: 5000,
		WriteInterval: 200 * time.Millisecond, BatchSize: 20, DeleteFraction: 0.1,
		FlushInterval: 5 * time.Second, BaseInterval: 7 * time.Second, BaseRows: 200, Seed: 1,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.URL == "":
		return errors.New("demo.url: missing")
	case len(c.Shards) == 0:
		return errors.New("demo.shards: give at least one shard")
	case c.KeySpace < 1 || c.KeySpace >= BaseKeyStart:
		return fmt.Errorf("demo.key_space must be in [1, %d), got %d", BaseKeyStart, c.KeySpace)
	case c.WriteInterval <= 0 || c.FlushInterval <= 0 || c.BaseInterval <= 0:
		return errors.New("demo: write_interval, flush_interval and base_interval must be positive")
	case c.BatchSize < 1 || c.BaseRows < 1:
		return errors.New("demo: batch_size and base_rows must be at least 1")
	case c.DeleteFraction < 0 || c.DeleteFraction > 1:
		return fmt.Errorf("demo.delete_fraction must be in [0, 1], got %v", c.DeleteFraction)
	}
	for _, s := range c.Shards {
		if err := memwal.ValidateShardName(s); err != nil {
			return fmt.Errorf("demo.shards: %w", err)
		}
	}
	return nil
}

// Counters of what the workload did, for logs and tests.
type Counters struct {
	Upserts, Tombstones, Flushes, SSTables, BaseAppends, BaseDeletes, Errors atomic.Int64
}

// Workload is the demo writer.
type Workload struct {
	cfg    Config
	t      *ops.Table
	logger *zap.Logger
	// base has no component: the packages the demo calls add their own.
	base *zap.Logger
	rng  *rand.Rand
	// C counts what was done.
	C Counters

	schema  *pb.Schema
	writers map[string]*memwal.Writer
	// baseBatches holds the keys of earlier base appends not yet deleted.
	baseBatches [][]int64
	nextBase    int64
}

// New checks its arguments; it does no I/O. t is the demo table (its
// bucket may not hold a table yet).
func New(cfg Config, t *ops.Table, logger *zap.Logger) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New("demo: nil table")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Workload{cfg: cfg, t: t, logger: logger.With(zap.String("component", "demo")), base: logger,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), writers: map[string]*memwal.Writer{}}, nil
}

// Setup creates what is missing: the table, its indices and its MemWAL
// configuration. It is idempotent.
func (w *Workload) Setup(ctx context.Context) error {
	head, err := table.ReadLatest(ctx, w.t.Bucket)
	if errors.Is(err, table.ErrNoTable) {
		schema, serr := table.ParseSchema(SchemaSpec, []string{PrimaryKey})
		if serr != nil {
			return serr
		}
		if _, cerr := w.t.Create(ctx, schema); cerr != nil {
			w.logger.Info("table create lost a race or failed; reading it back", zap.Error(cerr))
		} else {
			w.logger.Info("created the demo table", zap.String("schema", SchemaSpec))
		}
		head, err = table.ReadLatest(ctx, w.t.Bucket)
	}
	if err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	w.nextBase = max(w.nextBase, BaseKeyStart)
	if head.Version == 1 && len(head.Fragments) == 0 {
		// Indices are built over data: give them some.
		if err := w.appendBase(ctx); err != nil {
			return fmt.Errorf("demo setup: first append: %w", err)
		}
	}
	for _, spec := range Indices {
		head, err = table.ReadLatest(ctx, w.t.Bucket)
		if err != nil {
			return fmt.Errorf("demo setup: %w", err)
		}
		if table.FindIndex(head, spec.Name) != nil {
			continue
		}
		if _, err := index.Create(ctx, w.t, spec, index.BuildConfig{}); err != nil {
			return fmt.Errorf("demo setup: create index %s: %w", spec.Name, err)
		}
		w.logger.Info("created index", zap.String("index", spec.Name), zap.String("type", spec.Type))
	}
	head, err = table.ReadLatest(ctx, w.t.Bucket)
	if err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	if mw := table.MemWal(head); mw == nil || !sameSet(mw.Shards, w.cfg.Shards) {
		names := make([]string, len(Indices))
		for i, s := range Indices {
			names[i] = s.Name
		}
		if _, err := memwal.Configure(ctx, w.t, w.cfg.Shards, names); err != nil {
			return fmt.Errorf("demo setup: configure MemWAL: %w", err)
		}
		w.logger.Info("configured the MemWAL", zap.Strings("shards", w.cfg.Shards), zap.Strings("maintained", names))
		head, err = table.ReadLatest(ctx, w.t.Bucket)
		if err != nil {
			return fmt.Errorf("demo setup: %w", err)
		}
	}
	w.schema = head.Schema
	// Continue above the largest key appended before (a restart on an
	// existing table): an append must not repeat a live key.
	next := int64(BaseKeyStart)
	if _, err := w.t.Scan(ctx, head.Version, func(r table.Row) error {
		if id, ok := r[0].(int64); ok && id >= next {
			next = id + 1
		}
		return nil
	}, nil); err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	w.nextBase = max(w.nextBase, next)
	return nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Run sets the table up (retrying until it works) and streams writes until
// ctx is done. It returns nil on cancellation.
func (w *Workload) Run(ctx context.Context) error {
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
	w.logger.Info("demo workload running", zap.Float64("write_interval_seconds", w.cfg.WriteInterval.Seconds()),
		zap.Int("batch_size", w.cfg.BatchSize), zap.Float64("flush_interval_seconds", w.cfg.FlushInterval.Seconds()),
		zap.Float64("base_interval_seconds", w.cfg.BaseInterval.Seconds()))
	write := time.NewTicker(w.cfg.WriteInterval)
	flush := time.NewTicker(w.cfg.FlushInterval)
	base := time.NewTicker(w.cfg.BaseInterval)
	report := time.NewTicker(15 * time.Second)
	defer write.Stop()
	defer flush.Stop()
	defer base.Stop()
	defer report.Stop()
	defer w.flushAll(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-write.C:
			w.note(ctx, "write", w.writeBatch(ctx))
		case <-flush.C:
			w.flushAll(ctx)
		case <-base.C:
			w.note(ctx, "base append", w.appendBase(ctx))
			w.note(ctx, "base delete", w.deleteBase(ctx))
		case <-report.C:
			w.logger.Info("demo progress", zap.Int64("upserts", w.C.Upserts.Load()), zap.Int64("tombstones", w.C.Tombstones.Load()),
				zap.Int64("sstables", w.C.SSTables.Load()), zap.Int64("base_appends", w.C.BaseAppends.Load()),
				zap.Int64("base_deletes", w.C.BaseDeletes.Load()), zap.Int64("errors", w.C.Errors.Load()))
		}
	}
}

func (w *Workload) note(ctx context.Context, what string, err error) {
	if err == nil || ctx.Err() != nil {
		return // stopping: an interrupted write is not a failure
	}
	w.C.Errors.Add(1)
	w.logger.Warn("demo "+what+" failed; carrying on", zap.Error(err))
}

// writer returns the shard's writer, claiming the shard on first use and
// again after the writer was fenced or lost track of an outcome.
func (w *Workload) writer(ctx context.Context, shard string) (*memwal.Writer, error) {
	if wr := w.writers[shard]; wr != nil {
		return wr, nil
	}
	wr, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: w.schema, Logger: w.base}, w.t.Bucket)
	if err != nil {
		return nil, err
	}
	if _, err := wr.Claim(ctx); err != nil {
		return nil, fmt.Errorf("claim shard %s: %w", shard, err)
	}
	w.writers[shard] = wr
	return wr, nil
}

func (w *Workload) dropWriterOn(shard string, err error) {
	if errors.Is(err, memwal.ErrFenced) || errors.Is(err, memwal.ErrUnknownOutcome) {
		delete(w.writers, shard)
	}
}

// writeBatch sends one batch of upserts and tombstones, each key to the
// shard its value picks, so a key's records stay ordered in one WAL.
func (w *Workload) writeBatch(ctx context.Context) error {
	byShard := map[string][]memwal.Record{}
	for range w.cfg.BatchSize {
		id := w.rng.Int64N(w.cfg.KeySpace)
		shard := w.cfg.Shards[id%int64(len(w.cfg.Shards))]
		if w.rng.Float64() < w.cfg.DeleteFraction {
			byShard[shard] = append(byShard[shard], memwal.Record{Op: memwal.Delete, Row: table.Row{id, nil, nil}})
			continue
		}
		row := table.Row{id, categories[w.rng.IntN(len(categories))], float64(w.rng.IntN(10000)) / 100}
		byShard[shard] = append(byShard[shard], memwal.Record{Op: memwal.Upsert, Row: row})
	}
	var errs []error
	for _, shard := range w.cfg.Shards {
		recs := byShard[shard]
		if len(recs) == 0 {
			continue
		}
		wr, err := w.writer(ctx, shard)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := wr.Append(ctx, recs); err != nil {
			w.dropWriterOn(shard, err)
			errs = append(errs, err)
			continue
		}
		for _, r := range recs {
			if r.Op == memwal.Delete {
				w.C.Tombstones.Add(1)
			} else {
				w.C.Upserts.Add(1)
			}
		}
	}
	return errors.Join(errs...)
}

func (w *Workload) flushAll(ctx context.Context) {
	for _, shard := range w.cfg.Shards {
		wr := w.writers[shard]
		if wr == nil {
			continue
		}
		if rows, _ := wr.Pending(); rows == 0 {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := wr.Flush(fctx)
		cancel()
		if res != nil {
			w.C.SSTables.Add(int64(len(res.SSTables)))
		}
		if err != nil {
			w.dropWriterOn(shard, err)
			w.note(ctx, "flush", err)
			continue
		}
		w.C.Flushes.Add(1)
	}
}

// appendBase appends BaseRows new rows as one fragment.
func (w *Workload) appendBase(ctx context.Context) error {
	rows := make([]table.Row, w.cfg.BaseRows)
	keys := make([]int64, w.cfg.BaseRows)
	for i := range rows {
		id := w.nextBase + int64(i)
		keys[i] = id
		rows[i] = table.Row{id, categories[w.rng.IntN(len(categories))], float64(w.rng.IntN(10000)) / 100}
	}
	if _, err := w.t.Append(ctx, rows); err != nil {
		return err
	}
	w.nextBase += int64(w.cfg.BaseRows)
	w.baseBatches = append(w.baseBatches, keys)
	w.C.BaseAppends.Add(1)
	return nil
}

// deleteBase deletes a third of the oldest remaining base batch, making
// its fragment deletion-heavy (compaction's other trigger).
func (w *Workload) deleteBase(ctx context.Context) error {
	if len(w.baseBatches) < 2 {
		return nil // leave the newest batch alone
	}
	batch := w.baseBatches[0]
	n := max(1, len(batch)/3)
	var keys []table.Row
	for _, id := range batch[:n] {
		keys = append(keys, table.Row{id, nil, nil})
	}
	w.baseBatches[0] = batch[n:]
	if len(w.baseBatches[0]) < w.cfg.BaseRows/3 {
		w.baseBatches = w.baseBatches[1:]
	}
	res, _, err := w.t.Delete(ctx, nil, ops.DeleteSpec{Keys: keys})
	if err != nil {
		return err
	}
	if res != nil {
		w.C.BaseDeletes.Add(1)
	}
	return nil
}
