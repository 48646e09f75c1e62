// Package crash is the crash campaign: it runs the compactord binary's
// one-shot jobs (append, delete, wal write and flush, merge, compact,
// index, trim, cleanup) and the daemon as subprocesses against one table
// on file://, kills them with SIGKILL at random points (after a random
// delay, or at the Nth object the process creates or deletes, counted with
// inotify), and after every process checks the table against the
// reference model of internal/model and runs verify.
//
// A killed process's outcome is ambiguous by nature: the model is
// reconciled by reading the table back (an append either fully landed or
// not at all; a WAL write's entry is there or not; a merge moved
// compacted_sstables or not), and any state in between is a violation.
// A process that exits without being killed must have succeeded.
package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/verify"
)

// Config configures a campaign.
type Config struct {
	// Binary is the compactord executable.
	Binary string
	// Dir is an empty directory for the table; WorkDir holds input and
	// config files (both required).
	Dir, WorkDir string
	Seed         uint64
	// Steps bounds the processes run; Duration, when set, the time.
	Steps    int
	Duration time.Duration
	// KillRate is the share of processes killed (default 0.6).
	KillRate float64
	Logf     func(format string, args ...any)
}

// Stats is what a campaign did.
type Stats struct {
	Seed       uint64         `json:"seed"`
	Processes  int            `json:"processes"`
	Kills      int            `json:"kills"`
	Terms      int            `json:"graceful_stops"`
	ByKind     map[string]int `json:"by_kind"`
	Violations []string       `json:"violations"`
}

const (
	schemaSpec = "id:int64,cat:string,val:int64"
	keySpace   = 600
	freshKeys  = 1_000_000
	numCats    = 6
)

var shards = []string{"s0", "s1"}

type campaign struct {
	cfg     Config
	rng     *rand.Rand
	url     string
	raw     storage.Bucket
	schema  *pb.Schema
	ref     *model.Ref
	nextKey int64
	stats   *Stats
	history []string
	// calibration per job kind: a moving average of how long an unkilled
	// run took and how many events it made.
	avgDur    map[string]time.Duration
	avgEvents map[string]float64
	seq       int
}

// Run runs a campaign. Violations are in Stats; the error is for a
// failure to set up.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	if cfg.Binary == "" || cfg.Dir == "" || cfg.WorkDir == "" {
		return nil, errors.New("crash: Binary, Dir and WorkDir are required")
	}
	if cfg.KillRate == 0 {
		cfg.KillRate = 0.6
	}
	c := &campaign{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xc4a5)), url: "file://" + cfg.Dir,
		ref: model.NewRef(shards...), nextKey: freshKeys, avgDur: map[string]time.Duration{}, avgEvents: map[string]float64{},
		stats: &Stats{Seed: cfg.Seed, ByKind: map[string]int{}, Violations: []string{}}}
	var err error
	if c.schema, err = table.ParseSchema(schemaSpec, []string{"id"}); err != nil {
		return nil, err
	}
	if c.raw, err = storage.Open(ctx, c.url); err != nil {
		return nil, err
	}
	defer c.raw.Close()
	for _, args := range [][]string{
		{"table", "create", c.url, "--schema", schemaSpec, "--primary-key", "id"},
		{"wal", "configure", c.url, "--shards", strings.Join(shards, ",")},
	} {
		if r := runProc(ctx, cfg.Binary, cfg.Dir, args, killPlan{}); r.err != nil {
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(args[:2], " "), r.err, r.stderr)
		}
	}
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = time.Now().Add(cfg.Duration)
	}
	for ctx.Err() == nil {
		if cfg.Steps > 0 && c.seq >= cfg.Steps || !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		c.seq++
		if err := c.step(ctx); err != nil {
			tail := c.history
			if len(tail) > 15 {
				tail = tail[len(tail)-15:]
			}
			c.stats.Violations = append(c.stats.Violations, fmt.Sprintf("seed %d process %d: %v\nlast processes:\n  %s",
				cfg.Seed, c.seq, err, strings.Join(tail, "\n  ")))
			break
		}
	}
	return c.stats, nil
}

func (c *campaign) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.history = append(c.history, line)
	if len(c.history) > 100 {
		c.history = slices.Clone(c.history[50:])
	}
	if c.cfg.Logf != nil {
		c.cfg.Logf("%s", line)
	}
}

// job is one process to run and how to judge it.
type job struct {
	kind string
	args []string
	// apply is the model effect of a base-table job (nil: none).
	apply func(*model.Ref)
	// walShard and walRecs are set for a WAL write.
	walShard string
	walRecs  []memwal.Record
	// flushes: a successful exit leaves every record of walShard
	// flushed; mergesAll: a successful exit leaves nothing unmerged.
	flushes   bool
	mergesAll bool
	daemon    bool
}

type weighted struct {
	w    int
	make func(c *campaign) (*job, error)
}

func (c *campaign) kinds() []weighted {
	return []weighted{
		{10, (*campaign).jobAppend},
		{4, (*campaign).jobDeleteKeys},
		{2, (*campaign).jobDeleteWhere},
		{12, (*campaign).jobWALWrite},
		{4, (*campaign).jobWALFlush},
		{5, func(c *campaign) (*job, error) {
			return &job{kind: "merge", args: []string{"merge", c.url}, mergesAll: true}, nil
		}},
		{4, func(c *campaign) (*job, error) {
			def := "true"
			if c.rng.IntN(3) == 0 {
				def = "false"
			}
			return &job{kind: "compact", args: []string{"compact", c.url, "--target-rows", "48", "--deletion-threshold", "0.2", "--parallelism", "1", "--defer-remap=" + def}}, nil
		}},
		{4, (*campaign).jobIndex},
		{1, (*campaign).jobConfigure},
		{3, func(c *campaign) (*job, error) {
			return &job{kind: "trim", args: []string{"trim", c.url, "--keep-shard-manifests", "2", "--concurrency", "2"}}, nil
		}},
		{2, func(c *campaign) (*job, error) {
			return &job{kind: "cleanup", args: []string{"cleanup", c.url, "--retain-versions", strconv.Itoa(1 + c.rng.IntN(3)), "--older-than", "0s", "--min-age", "0s", "--concurrency", "2"}}, nil
		}},
		{4, (*campaign).jobDaemon},
	}
}

func (c *campaign) row(k int64) table.Row {
	return table.Row{k, fmt.Sprintf("c%d", c.rng.IntN(numCats)), int64(c.rng.IntN(1_000_000))}
}

func (c *campaign) writeInput(lines [][]byte) (string, error) {
	p := filepath.Join(c.cfg.WorkDir, fmt.Sprintf("input-%d.jsonl", c.seq))
	return p, os.WriteFile(p, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644)
}

func (c *campaign) jobAppend() (*job, error) {
	var rows []table.Row
	var lines [][]byte
	used := map[int64]bool{}
	for n := 1 + c.rng.IntN(40); n > 0; n-- {
		k := int64(-1)
		if c.rng.IntN(2) == 0 {
			if x := int64(c.rng.IntN(keySpace)); c.ref.Base[x] == nil && !used[x] {
				k = x
			}
		}
		if k < 0 {
			k = c.nextKey
			c.nextKey++
		}
		used[k] = true
		r := c.row(k)
		rows = append(rows, r)
		lines = append(lines, table.RowJSON(c.schema, r))
	}
	p, err := c.writeInput(lines)
	if err != nil {
		return nil, err
	}
	return &job{kind: "append", args: []string{"table", "append", c.url, "--jsonl", p}, apply: func(r *model.Ref) { r.Append(rows) }}, nil
}

// deleteRows is the effect of deleting exactly these rows (see the model
// package: a delete removes the rows live at its read version).
func deleteRows(rows map[int64]table.Row) func(*model.Ref) {
	return func(r *model.Ref) {
		for k := range rows {
			delete(r.Base, k)
		}
	}
}

func (c *campaign) jobDeleteKeys() (*job, error) {
	keys := c.ref.Keys()
	if len(keys) == 0 {
		return c.jobAppend()
	}
	rows := map[int64]table.Row{}
	var list []string
	for n := 1 + c.rng.IntN(8); n > 0; n-- {
		k := keys[c.rng.IntN(len(keys))]
		rows[k] = c.ref.Base[k]
		list = append(list, strconv.FormatInt(k, 10))
	}
	return &job{kind: "delete", args: []string{"table", "delete", c.url, "--keys", strings.Join(list, ",")}, apply: deleteRows(rows)}, nil
}

func (c *campaign) jobDeleteWhere() (*job, error) {
	a := int64(c.rng.IntN(keySpace))
	b := a + 1 + int64(c.rng.IntN(40))
	rows := map[int64]table.Row{}
	for k, r := range c.ref.Base {
		if k >= a && k < b {
			rows[k] = r
		}
	}
	if len(rows) == 0 {
		return c.jobDeleteKeys()
	}
	return &job{kind: "delete", args: []string{"table", "delete", c.url, "--where", fmt.Sprintf("id >= %d AND id < %d", a, b)}, apply: deleteRows(rows)}, nil
}

func (c *campaign) jobWALWrite() (*job, error) {
	i := c.rng.IntN(len(shards))
	shard := shards[i]
	var recs []memwal.Record
	var lines [][]byte
	for n := 1 + c.rng.IntN(10); n > 0; n-- {
		k := int64(i + len(shards)*c.rng.IntN(keySpace/len(shards)))
		if c.rng.IntN(4) == 0 {
			recs = append(recs, memwal.Record{Op: memwal.Delete, Row: table.Row{k, nil, nil}})
			lines = append(lines, []byte(fmt.Sprintf(`{"_op":"delete","id":%d}`, k)))
		} else {
			r := c.row(k)
			recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: r})
			lines = append(lines, table.RowJSON(c.schema, r))
		}
	}
	p, err := c.writeInput(lines)
	if err != nil {
		return nil, err
	}
	j := &job{kind: "wal_write", args: []string{"wal", "write", c.url, "--shard", shard, "--jsonl", p}, walShard: shard, walRecs: recs}
	if c.rng.IntN(2) == 0 {
		j.args = append(j.args, "--flush")
		j.flushes = true
	}
	return j, nil
}

func (c *campaign) jobWALFlush() (*job, error) {
	shard := shards[c.rng.IntN(len(shards))]
	return &job{kind: "wal_flush", args: []string{"wal", "flush", c.url, "--shard", shard}, walShard: shard, flushes: true}, nil
}

func (c *campaign) head(ctx context.Context) (*pb.Manifest, error) {
	return table.ReadLatest(ctx, c.raw)
}

func (c *campaign) jobIndex() (*job, error) {
	head, err := c.head(context.Background())
	if err != nil {
		return nil, err
	}
	switch {
	case table.FindIndex(head, model.IndexByID) == nil:
		return &job{kind: "index_create", args: []string{"index", "create", c.url, "--name", model.IndexByID, "--column", "id", "--type", "btree"}}, nil
	case table.FindIndex(head, model.IndexByCat) == nil && c.rng.IntN(2) == 0:
		return &job{kind: "index_create", args: []string{"index", "create", c.url, "--name", model.IndexByCat, "--column", "cat", "--type", "bitmap"}}, nil
	case c.rng.IntN(2) == 0:
		return &job{kind: "index_catchup", args: []string{"index", "catchup", c.url}}, nil
	}
	return &job{kind: "index_remap", args: []string{"index", "remap", c.url}}, nil
}

func (c *campaign) jobConfigure() (*job, error) {
	head, err := c.head(context.Background())
	if err != nil {
		return nil, err
	}
	args := []string{"wal", "configure", c.url, "--shards", strings.Join(shards, ",")}
	if names := index.Names(head); len(names) > 0 && c.rng.IntN(3) > 0 {
		args = append(args, "--maintain", strings.Join(names, ","))
	}
	return &job{kind: "wal_configure", args: args}, nil
}

func (c *campaign) jobDaemon() (*job, error) {
	cfg := fmt.Sprintf(`log: {level: warn, format: json}
http: {listen: "127.0.0.1:0"}
workers: 2
schedule: {merge: "@every 1s", compact: "@every 1s", index: "@every 1s", trim: "@every 1s", cleanup: "@every 1s"}
poll_interval: 100ms
sync_interval: 200ms
shutdown_grace: 20s
retry: {base_backoff: 100ms, max_backoff: 1s, quarantine_after: 1000}
lease: {enabled: false}
tables: [{url: %q, name: crash}]
jobs:
  compact: {target_rows_per_fragment: 48, deletion_threshold: 0.2, parallelism: 1}
  cleanup: {retain_versions: 3, older_than: 0s, min_age: 0s, concurrency: 2}
  trim: {keep_shard_manifests: 2, concurrency: 2, max_attempts: 3}
`, c.url)
	p := filepath.Join(c.cfg.WorkDir, fmt.Sprintf("daemon-%d.yaml", c.seq))
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return &job{kind: "daemon", args: []string{"run", "--config", p}, daemon: true}, nil
}

func (c *campaign) pick() (*job, error) {
	ks := c.kinds()
	total := 0
	for _, k := range ks {
		total += k.w
	}
	n := c.rng.IntN(total)
	for _, k := range ks {
		if n < k.w {
			return k.make(c)
		}
		n -= k.w
	}
	return ks[0].make(c)
}

// plan chooses how the process dies. The daemon never exits on its own:
// it is always stopped, by SIGKILL or (a quarter of the time) SIGTERM.
func (c *campaign) plan(j *job) killPlan {
	if j.daemon {
		p := killPlan{afterDelay: time.Duration(200+c.rng.IntN(2500)) * time.Millisecond}
		switch {
		case c.rng.IntN(4) == 0:
			p.term = true
		case watchSupported && c.rng.IntN(2) == 0:
			p.afterEvents = 1 + int64(c.rng.IntN(300))
		}
		return p
	}
	if c.rng.Float64() >= c.cfg.KillRate {
		return killPlan{}
	}
	if ev := c.avgEvents[j.kind]; watchSupported && ev >= 1 && c.rng.IntN(3) > 0 {
		return killPlan{afterEvents: 1 + int64(c.rng.Float64()*ev)}
	}
	d := c.avgDur[j.kind]
	if d == 0 {
		d = 300 * time.Millisecond
	}
	return killPlan{afterDelay: time.Duration(c.rng.Float64() * 1.2 * float64(d))}
}

func (c *campaign) step(ctx context.Context) error {
	j, err := c.pick()
	if err != nil {
		return err
	}
	plan := c.plan(j)
	before := c.ref
	var walBase uint64
	if j.walShard != "" {
		walBase = c.ref.Shards[j.walShard].Seen
	}
	r := runProc(ctx, c.cfg.Binary, c.cfg.Dir, j.args, plan)
	c.stats.Processes++
	c.stats.ByKind[j.kind]++
	outcome := "exit 0"
	switch {
	case r.killed && plan.term:
		outcome = "stopped by SIGTERM"
	case r.killed:
		outcome = "killed"
		c.stats.Kills++
	case r.err != nil:
		outcome = fmt.Sprintf("failed (%v): %s", r.err, strings.TrimSpace(r.stderr))
	}
	c.logf("%d %s [%s] %s after %s, %d events", c.seq, strings.Join(j.args, " "), plan, outcome, r.elapsed.Round(time.Millisecond), r.events)
	if !r.killed && r.err == nil && !j.daemon {
		c.calibrate(j.kind, r)
	}
	if plan.term {
		c.stats.Terms++
		if r.err != nil {
			return fmt.Errorf("the daemon did not stop cleanly on SIGTERM: %v: %s", r.err, r.stderr)
		}
	}
	if r.err != nil && !r.killed {
		return fmt.Errorf("%s exited without being killed: %v: %s", j.kind, r.err, r.stderr)
	}
	return c.settle(ctx, j, r, before, walBase)
}

func (c *campaign) calibrate(kind string, r procResult) {
	if d := c.avgDur[kind]; d == 0 {
		c.avgDur[kind] = r.elapsed
	} else {
		c.avgDur[kind] = (3*d + r.elapsed) / 4
	}
	if e := c.avgEvents[kind]; e == 0 {
		c.avgEvents[kind] = float64(r.events)
	} else {
		c.avgEvents[kind] = (3*e + float64(r.events)) / 4
	}
}

// settle reconciles the model with what the process left and checks the
// table.
func (c *campaign) settle(ctx context.Context, j *job, r procResult, before *model.Ref, walBase uint64) error {
	head, rows, err := model.ScanLatest(ctx, c.raw)
	if err != nil {
		return err
	}
	if j.walShard != "" && j.walRecs != nil {
		ref := before.Clone()
		landed, err := model.SyncWAL(ctx, c.raw, ref, j.walShard, 0, j.walRecs)
		if err != nil {
			return err
		}
		if landed == 0 && !r.killed {
			return fmt.Errorf("wal write on shard %s exited 0 but no entry above position %d holds its records", j.walShard, walBase)
		}
		before = ref
	}
	cands := []*model.Ref{before}
	if j.apply != nil {
		after := before.Clone()
		j.apply(after)
		cands = []*model.Ref{after}
		if r.killed {
			cands = append(cands, before)
		}
	}
	var first string
	chosen := (*model.Ref)(nil)
	for _, cand := range cands {
		cand = cand.Clone()
		if err := model.SyncShards(ctx, c.raw, cand, head); err != nil {
			if first == "" {
				first = err.Error()
			}
			continue
		}
		// A WAL-only job also refreshes Seen (claim markers).
		if j.walShard != "" && j.walRecs == nil {
			if _, err := model.SyncWAL(ctx, c.raw, cand, j.walShard, 0, nil); err != nil {
				return err
			}
		}
		if d := model.Diff(c.schema, cand.Base, rows, 8); len(d) > 0 {
			if first == "" {
				first = strings.Join(d, "\n    ")
			}
			continue
		}
		chosen = cand
		break
	}
	if chosen == nil {
		return fmt.Errorf("after %s (%s), the table at version %d differs from the model:\n    %s", j.kind, map[bool]string{true: "killed", false: "exit 0"}[r.killed], head.Version, first)
	}
	c.ref = chosen
	// Markers of claims by other jobs (a killed wal flush) are examined
	// by the next WAL job; no entry with records may have appeared.
	for _, s := range shards {
		if s == j.walShard {
			continue
		}
		if _, err := model.SyncWAL(ctx, c.raw, c.ref, s, 0, nil); err != nil {
			return err
		}
	}
	if !r.killed {
		if j.flushes {
			s := c.ref.Shards[j.walShard]
			sm, err := memwal.ReadShardManifest(ctx, c.raw, j.walShard)
			if err != nil {
				return err
			}
			if last := s.LastEntry(); last > s.MergedPos && (sm == nil || sm.ReplayAfterWalPosition < last) {
				return fmt.Errorf("a flush of shard %s exited 0 but WAL entry %d is not flushed", j.walShard, last)
			}
		}
		if j.mergesAll {
			for _, name := range shards {
				s := c.ref.Shards[name]
				for g := range s.Gens {
					if g > s.MergedGen {
						return fmt.Errorf("merge exited 0 but generation %d of shard %s is unmerged (merged through %d)", g, name, s.MergedGen)
					}
				}
			}
		}
	}
	return c.check(ctx, head)
}

// check runs the invariants that do not depend on the last job.
func (c *campaign) check(ctx context.Context, head *pb.Manifest) error {
	for _, s := range shards {
		if err := model.CheckShardDurable(ctx, c.raw, c.ref, s); err != nil {
			return err
		}
	}
	keys := c.ref.Keys()
	var ids []int64
	for i := 0; i < 6 && len(keys) > 0; i++ {
		ids = append(ids, keys[c.rng.IntN(len(keys))])
	}
	ids = append(ids, int64(c.rng.IntN(keySpace)))
	if err := model.CheckIndices(ctx, c.raw, head, c.ref.Base, ids, []string{fmt.Sprintf("c%d", c.rng.IntN(numCats))}); err != nil {
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
