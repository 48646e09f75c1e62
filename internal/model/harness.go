package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/verify"
)

// Config configures one model run.
type Config struct {
	// Seed drives every random choice: the same seed replays the same
	// operations, faults, crash points and races.
	Seed uint64
	// Steps bounds the run; Duration, when set, also bounds it (whichever
	// comes first; 0 Steps means only Duration).
	Steps    int
	Duration time.Duration
	// URL is the table root; empty means a private in-memory bucket.
	URL string
	// FaultRate, CrashRate and RaceRate are the shares of steps that run
	// with an injected storage fault, with a simulated crash, and against
	// a racing commit. Negative turns a kind off; 0 takes the default.
	FaultRate, CrashRate, RaceRate float64
	// Shards is the number of MemWAL shards (default 2).
	Shards int
	// Logf, when set, receives one line per step.
	Logf func(format string, args ...any)
	// DeepCheck runs with verify at every check; nil means
	// index.DeepCheck (every index entry resolves to a row with its key).
	DeepCheck func(ctx context.Context, b storage.Bucket, m *pb.Manifest) ([]verify.Violation, error)
}

func (c *Config) defaults() {
	def := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&c.FaultRate, 0.25)
	def(&c.CrashRate, 0.06)
	def(&c.RaceRate, 0.08)
	if c.Shards == 0 {
		c.Shards = 2
	}
	if c.DeepCheck == nil {
		c.DeepCheck = index.DeepCheck
	}
}

// Stats is what a run did.
type Stats struct {
	Seed  uint64 `json:"seed"`
	Steps int    `json:"steps"`
	// Ops counts steps by operation.
	Ops map[string]int `json:"ops"`
	// Failed counts operations that returned an error (expected under
	// faults, crashes and races).
	Failed int `json:"failed"`
	// Faults counts injected fault actions that fired.
	Faults int `json:"faults_injected"`
	// Crashes counts simulated crashes the table recovered from.
	Crashes int `json:"crashes_survived"`
	// Races counts operations that lost a race against another commit.
	Races int `json:"races"`
	// Ambiguous counts operations whose outcome had to be reconciled by
	// reading the table back.
	Ambiguous int `json:"ambiguous"`
	// Violations is empty unless the table diverged from the model or an
	// invariant broke; the run stops at the first.
	Violations []string `json:"violations"`
}

// Violation is a broken expectation; the run stops at the first.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return v.Msg }

func violationf(format string, args ...any) error {
	return &Violation{Msg: fmt.Sprintf(format, args...)}
}

const (
	schemaSpec = "id:int64,cat:string,val:int64"
	// keySpace is where appends reuse keys and WAL records write; fresh
	// append keys start at freshKeys and are never written through a
	// shard (merge REQUIRES that a key is written through one path).
	keySpace  = 600
	freshKeys = 1_000_000
	numCats   = 6
	idxByID   = "by_id"
	idxByCat  = "by_cat"
)

// harness is one run's state.
type harness struct {
	cfg    Config
	rng    *rand.Rand
	raw    storage.Bucket // checks read here, without faults
	crash  *CrashBucket
	outage *OutageBucket
	faulty *storage.Faulty
	t      *ops.Table // the system under test, over faulty and crash
	rawT   *ops.Table // racing commits, over raw
	schema *pb.Schema
	ref    *Ref
	shards []string
	// writers holds the claimed MemWAL writer of each shard, if any.
	writers map[string]*writerState
	nextKey int64
	// scanned is the latest scan of this step (settle's), reused by check.
	scanned *scan
	stats   *Stats
	history []string
	step    int
}

type scan struct {
	head *pb.Manifest
	rows map[int64]table.Row
}

type writerState struct {
	w *memwal.Writer
	// suspect is set after a failed operation that left the writer in
	// use: a later failure without a fault is then expected.
	suspect bool
}

// Run runs the model test. Violations are in Stats; the error is for a
// failure to set the run up.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	cfg.defaults()
	url := cfg.URL
	if url == "" {
		url = "mem://"
	}
	raw, err := storage.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	schema, err := table.ParseSchema(schemaSpec, []string{"id"})
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), raw: raw, schema: schema,
		writers: map[string]*writerState{}, nextKey: freshKeys, stats: &Stats{Seed: cfg.Seed, Ops: map[string]int{}, Violations: []string{}}}
	for i := 0; i < cfg.Shards; i++ {
		h.shards = append(h.shards, fmt.Sprintf("s%d", i))
	}
	h.ref = NewRef(h.shards...)
	h.crash = NewCrashBucket(raw)
	h.outage = NewOutageBucket(h.crash)
	h.faulty = storage.NewFaulty(h.outage)
	if err := h.newProcess(); err != nil {
		return nil, err
	}
	if h.rawT, err = newTable(raw); err != nil {
		return nil, err
	}
	if _, err := h.rawT.Create(ctx, schema); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	if _, err := memwal.Configure(ctx, h.rawT, h.shards, nil); err != nil {
		return nil, fmt.Errorf("configure MemWAL: %w", err)
	}
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = time.Now().Add(cfg.Duration)
	}
	for {
		if cfg.Steps > 0 && h.step >= cfg.Steps || !deadline.IsZero() && time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		h.step++
		if err := h.runStep(ctx); err != nil {
			h.violation(err)
			break
		}
	}
	if len(h.stats.Violations) == 0 && ctx.Err() == nil {
		if err := h.drain(ctx); err != nil {
			h.violation(err)
		}
	}
	h.dropWriters()
	h.stats.Steps = h.step
	return h.stats, nil
}

func (h *harness) violation(err error) {
	var v *Violation
	msg := err.Error()
	if !errors.As(err, &v) {
		msg = "check failed: " + msg
	}
	tail := h.history
	if len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	h.stats.Violations = append(h.stats.Violations, fmt.Sprintf("seed %d step %d: %s\nlast steps:\n  %s", h.cfg.Seed, h.step, msg, strings.Join(tail, "\n  ")))
}

func newTable(b storage.Bucket) (*ops.Table, error) {
	c, err := commit.NewCommitter(commit.Config{BaseBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Deadline: time.Minute, ReadBackTimeout: 10 * time.Second}, b, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	t := ops.NewTable(b, c, nil, nil)
	// Small fragments, so that appends make several and compaction has
	// work.
	t.MaxRowsPerFragment = 24
	return t, nil
}

// newProcess starts a fresh "process": a new committer (no cached head)
// over the faulty bucket, and no writers.
func (h *harness) newProcess() error {
	t, err := newTable(h.faulty)
	if err != nil {
		return err
	}
	h.t = t
	h.writers = map[string]*writerState{}
	return nil
}

func (h *harness) dropWriters() { h.writers = map[string]*writerState{} }

func (h *harness) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	h.history = append(h.history, line)
	if len(h.history) > 200 {
		h.history = slices.Clone(h.history[100:])
	}
	if h.cfg.Logf != nil {
		h.cfg.Logf("%s", line)
	}
}

// mode is how a step is decorated.
type mode int

const (
	modeClean mode = iota
	modeFault
	modeCrash
	modeRace
)

func (m mode) String() string {
	return [...]string{"clean", "fault", "crash", "race"}[m]
}

// stepCtx is one step's decoration and outcome.
type stepCtx struct {
	name  string
	mode  mode
	rules []*storage.FaultRule
	// fired is set after the operation: a fault action was taken.
	fired   int
	crashed bool
	// race is the racing commit, run while the operation is parked at its
	// manifest put; raced is set when it ran.
	race  *raceOp
	raced bool
	desc  string
	// shard is preset when the decoration depends on it.
	shard string
	// outage is set when the OutageBucket is armed for the step.
	outage bool
}

// stepKind is one kind of operation.
type stepKind struct {
	name   string
	weight int
	// raceable operations commit through the commit loop and can be
	// parked at their manifest put.
	raceable bool
	// cleanOnly operations check exact error behaviour and run without
	// faults.
	cleanOnly bool
	run       func(h *harness, ctx context.Context, st *stepCtx) error
}

func (h *harness) kinds() []stepKind {
	return []stepKind{
		{name: "append", weight: 12, raceable: true, run: (*harness).stepAppend},
		{name: "delete_keys", weight: 6, raceable: true, run: (*harness).stepDeleteKeys},
		{name: "delete_predicate", weight: 3, raceable: true, run: (*harness).stepDeletePredicate},
		{name: "delete_fragment", weight: 2, raceable: true, run: (*harness).stepDeleteFragment},
		{name: "wal_write", weight: 16, run: (*harness).stepWALWrite},
		{name: "wal_flush", weight: 7, run: (*harness).stepWALFlush},
		{name: "wal_restart", weight: 2, run: (*harness).stepWALRestart},
		{name: "wal_steal", weight: 1, cleanOnly: true, run: (*harness).stepWALSteal},
		{name: "merge", weight: 7, raceable: true, run: (*harness).stepMerge},
		{name: "compact", weight: 4, raceable: true, run: h.stepCompact(false)},
		{name: "compact_inline", weight: 2, raceable: true, run: h.stepCompact(true)},
		{name: "index_create", weight: 2, raceable: true, run: (*harness).stepIndexCreate},
		{name: "index_catchup", weight: 3, raceable: true, run: h.stepIndexJob("catchup")},
		{name: "index_remap", weight: 3, raceable: true, run: h.stepIndexJob("remap")},
		{name: "index_fri_trim", weight: 1, raceable: true, run: h.stepIndexJob("trim")},
		{name: "index_job", weight: 2, run: h.stepIndexJob("run")},
		{name: "index_optimize", weight: 1, raceable: true, run: (*harness).stepIndexOptimize},
		{name: "wal_configure", weight: 1, raceable: true, run: (*harness).stepConfigure},
		{name: "trim", weight: 3, run: (*harness).stepTrim},
		{name: "cleanup", weight: 2, run: (*harness).stepCleanup},
	}
}

func (h *harness) pickKind() stepKind {
	ks := h.kinds()
	total := 0
	for _, k := range ks {
		total += k.weight
	}
	n := h.rng.IntN(total)
	for _, k := range ks {
		if n < k.weight {
			return k
		}
		n -= k.weight
	}
	return ks[0]
}

var faultPrefixes = []string{"", table.VersionsDir, table.TransactionsDir, table.DataDir, table.DeletionsDir, table.IndicesDir, table.MemWalDir}

// randomFault returns a fault rule: one operation kind, a key prefix, the
// Nth matching call, and either a plain failure or a write that lands and
// then reports failure.
func (h *harness) randomFault() storage.Fault {
	// Writes and listings weigh more: they are where outcomes become
	// ambiguous. Half the rules match any key.
	weighted := []storage.Op{storage.OpPutIfAbsent, storage.OpPutIfAbsent, storage.OpPutIfAbsent, storage.OpUpload, storage.OpUpload,
		storage.OpPut, storage.OpPut, storage.OpGet, storage.OpGet, storage.OpGetRange, storage.OpList, storage.OpList,
		storage.OpDelete, storage.OpAttributes}
	f := storage.Fault{Ops: []storage.Op{weighted[h.rng.IntN(len(weighted))]}, Nth: 1 + h.rng.IntN(3)}
	if h.rng.IntN(10) == 0 {
		f.Nth = 0 // an outage: every matching call fails for the whole step
	}
	if h.rng.IntN(2) == 0 {
		f.KeyPrefix = faultPrefixes[h.rng.IntN(len(faultPrefixes))]
	}
	if h.rng.IntN(2) == 0 {
		f.Action = storage.Fail(nil)
	} else {
		f.Action = storage.LandThenFail(nil)
	}
	return f
}

func (h *harness) runStep(ctx context.Context) error {
	k := h.pickKind()
	st := &stepCtx{name: k.name}
	r := h.rng.Float64()
	switch {
	case k.cleanOnly:
	case k.raceable && r < h.cfg.RaceRate:
		st.mode = modeRace
		st.race = h.pickRace()
	case k.name == "wal_flush" && r < h.cfg.RaceRate:
		st.mode = modeRace
		st.shard = h.pickShard()
		st.race = h.pickFlushRace(st.shard)
	case r < h.cfg.RaceRate+h.cfg.CrashRate:
		st.mode = modeCrash
	case r < h.cfg.RaceRate+h.cfg.CrashRate+h.cfg.FaultRate:
		st.mode = modeFault
	}
	h.stats.Ops[k.name]++
	h.scanned = nil
	switch {
	case st.mode == modeFault && h.rng.IntN(4) == 0:
		// A write whose response is lost, then an outage of k calls: the
		// read-back and the retries after it fail too.
		ops := []storage.Op{storage.OpPutIfAbsent, storage.OpPutIfAbsent, storage.OpPut, storage.OpUpload, storage.OpDelete}
		op := ops[h.rng.IntN(len(ops))]
		prefix := faultPrefixes[h.rng.IntN(len(faultPrefixes))]
		nth, k := 1+h.rng.IntN(3), 1+h.rng.IntN(12)
		st.desc = fmt.Sprintf("lost response of %s %q #%d, then %d failed calls", op, prefix, nth, k)
		h.outage.Arm(op, prefix, nth, k)
		st.outage = true
	case st.mode == modeFault:
		// Usually one fault; sometimes two or three, so that a recovery
		// path (a read-back, a retry) itself fails.
		n := 1
		if h.rng.IntN(4) == 0 {
			n += 1 + h.rng.IntN(2)
		}
		var descs []string
		for i := 0; i < n; i++ {
			f := h.randomFault()
			// An outage window: calls Nth..Nth+w-1 all fail, so that a
			// retry or read-back inside the window fails too.
			w := 1
			if f.Nth > 0 && h.rng.IntN(6) == 0 {
				w = 2 + h.rng.IntN(5)
			}
			descs = append(descs, fmt.Sprintf("%v %q #%d×%d", f.Ops, f.KeyPrefix, f.Nth, w))
			for j := 0; j < w; j++ {
				g := f
				g.Nth = f.Nth + j
				st.rules = append(st.rules, h.faulty.Add(g))
			}
		}
		st.desc = "fault " + strings.Join(descs, ", ")
	case st.mode == modeCrash:
		n := h.rng.IntN(80)
		st.desc = fmt.Sprintf("crash after %d ops", n)
		h.crash.Arm(n)
	case st.mode == modeRace:
		st.desc = "race with " + st.race.name
	}
	err := k.run(h, ctx, st)
	for _, r := range st.rules {
		h.faulty.Remove(r)
	}
	if st.outage {
		h.outage.Disarm()
	}
	h.stats.Faults += st.fired
	if st.mode == modeCrash {
		if h.crash.Disarm() {
			st.crashed = true
		}
	}
	if st.crashed {
		h.stats.Crashes++
		if perr := h.newProcess(); perr != nil {
			return perr
		}
	}
	if st.raced {
		h.stats.Races++
	}
	if err != nil {
		return err
	}
	return h.check(ctx)
}

// fired records the step's fault count; call right after the operation.
func (st *stepCtx) done(h *harness) {
	st.fired = 0
	for _, r := range st.rules {
		st.fired += r.Fired()
	}
	if st.outage {
		st.fired += h.outage.Fired()
	}
	if st.mode == modeCrash && h.crash.Crashed() {
		st.crashed = true
	}
}

// disturbed reports whether the step had something that may make an
// operation fail: a fault that fired, a crash, or a race.
func (st *stepCtx) disturbed() bool { return st.fired > 0 || st.crashed || st.raced }

// isAmbiguous reports whether err leaves the operation's outcome unknown.
func isAmbiguous(err error) bool {
	var ae *commit.AmbiguousError
	return errors.As(err, &ae) || errors.Is(err, memwal.ErrUnknownOutcome) || errors.Is(err, ErrCrashed)
}

// settle decides the model after an operation on the base table. apply
// is the operation's effect (nil: none); before is the model before it
// (with a racing commit's effect already applied). A success must show
// the effect, a definite failure must not, an ambiguous one either.
func (h *harness) settle(ctx context.Context, st *stepCtx, before *Ref, apply func(*Ref), opErr error) error {
	var cands []*Ref
	if st.race != nil && st.race.apply != nil {
		before = before.Clone()
		st.race.apply(before)
	}
	after := before
	if apply != nil {
		after = before.Clone()
		apply(after)
	}
	switch {
	case opErr == nil:
		cands = []*Ref{after}
	case isAmbiguous(opErr) || st.crashed:
		h.stats.Ambiguous++
		cands = []*Ref{after, before}
	default:
		cands = []*Ref{before}
	}
	if opErr != nil {
		h.logf("  -> %s failed: %v", st.name, opErr)
		h.stats.Failed++
		lostRace := st.raced && (errors.Is(opErr, commit.ErrRetryable) || errors.Is(opErr, commit.ErrIncompatible))
		if st.fired == 0 && !st.crashed && !lostRace {
			return violationf("%s failed without an injected fault or crash: %v", st.name, opErr)
		}
	}
	head, rows, err := ScanLatest(ctx, h.raw)
	if err != nil {
		return violationf("after %s: %v", st.name, err)
	}
	h.scanned = &scan{head: head, rows: rows}
	var first []string
	for _, c := range cands {
		c = c.Clone()
		if err := SyncShards(ctx, h.raw, c, head); err != nil {
			if first == nil {
				first = []string{err.Error()}
			}
			continue
		}
		d := Diff(h.schema, c.Base, rows, 8)
		if len(d) == 0 {
			h.ref = c
			return nil
		}
		if first == nil {
			first = d
		}
	}
	return violationf("after %s (err=%v): the table at version %d differs from the model:\n    %s", st.name, opErr, head.Version, strings.Join(first, "\n    "))
}

// check runs after every step: shard durability, index answers and
// verify.
func (h *harness) check(ctx context.Context) error {
	sc := h.scanned
	h.scanned = nil
	if sc == nil {
		head, rows, err := ScanLatest(ctx, h.raw)
		if err != nil {
			return violationf("check: %v", err)
		}
		sc = &scan{head: head, rows: rows}
	}
	head, rows := sc.head, sc.rows
	if err := SyncShards(ctx, h.raw, h.ref, head); err != nil {
		return violationf("check: %v", err)
	}
	if d := Diff(h.schema, h.ref.Base, rows, 8); len(d) > 0 {
		return violationf("check: the table at version %d differs from the model:\n    %s", head.Version, strings.Join(d, "\n    "))
	}
	for _, s := range h.shards {
		if err := CheckShardDurable(ctx, h.raw, h.ref, s); err != nil {
			return violationf("check: %v", err)
		}
	}
	if err := h.checkIndices(ctx, head, false); err != nil {
		return err
	}
	rep, err := verify.Run(ctx, h.raw, verify.Options{Deep: h.cfg.DeepCheck != nil, DeepCheck: h.cfg.DeepCheck})
	if err != nil {
		return violationf("verify: %v", err)
	}
	if !rep.OK() {
		var vs []string
		for _, v := range rep.Violations {
			vs = append(vs, v.Object+": "+v.Reason)
		}
		return violationf("verify found %d violations at version %d:\n    %s", len(vs), head.Version, strings.Join(vs, "\n    "))
	}
	return nil
}

// checkIndices checks index answers for a sample of keys and one
// category, or for every key and category.
func (h *harness) checkIndices(ctx context.Context, head *pb.Manifest, every bool) error {
	cats := []string{fmt.Sprintf("c%d", h.rng.IntN(numCats))}
	if every {
		cats = cats[:0]
		for i := 0; i < numCats; i++ {
			cats = append(cats, fmt.Sprintf("c%d", i))
		}
	}
	return CheckIndices(ctx, h.raw, head, h.ref.Base, h.sampleKeys(8, every), cats)
}

// sampleKeys returns n keys of the model and a few that are absent.
func (h *harness) sampleKeys(n int, every bool) []int64 {
	keys := h.ref.Keys()
	if every {
		return append(keys, -1, keySpace+1, h.nextKey)
	}
	var out []int64
	for i := 0; i < n && len(keys) > 0; i++ {
		out = append(out, keys[h.rng.IntN(len(keys))])
	}
	return append(out, int64(h.rng.IntN(keySpace)), h.nextKey+1)
}
