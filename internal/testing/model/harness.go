package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/verify"
)

// Config configures one run.
type Config struct {
	// Seed drives every choice of the harness (LanceDB's own choices, such
	// as object names, are its own).
	Seed uint64
	// Steps bounds the run; Duration, when set, too (whichever first).
	Steps    int
	Duration time.Duration
	// Dir is the LanceDB database directory; the table is Dir/t.lance.
	Dir string
	// Oracle runs LanceDB (lancedb.Require).
	Oracle lancedb.Install
	// Shards is the number of MemWAL buckets (default 2).
	Shards int
	// Maintained makes the LSM spec maintain id_idx, so trim waits for
	// its catch-up; otherwise the spec maintains no index.
	Maintained bool
	// FaultRate, OutageRate, CrashRate and RaceRate are the shares of
	// compactord steps run with an injected storage fault, with a lost
	// response followed by an outage (faults.OutageBucket), with a
	// simulated crash, and against a racing LanceDB commit. Negative turns
	// one off; 0 takes the default.
	FaultRate, OutageRate, CrashRate, RaceRate float64
	// Weights, when set, replaces the step kinds' weights (kinds it
	// leaves out do not run): lancedb, append, deleteFragment, merge,
	// catchup, trim, cleanup, compact, remap.
	Weights map[string]int
	// Checkpoints is how many copies of the table, taken between steps,
	// LanceDB reads back at the end (default 3).
	Checkpoints int
	// Logf, when set, gets one line per step.
	Logf func(format string, args ...any)
	// Sabotage, when set, runs after each step on the table directory,
	// before the check: tests use it to prove that the checks catch a
	// damaged table.
	Sabotage func(step int, tableDir string)
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
	def(&c.OutageRate, 0.06)
	def(&c.CrashRate, 0.08)
	def(&c.RaceRate, 0.10)
	if c.Shards == 0 {
		c.Shards = 2
	}
	if c.Checkpoints == 0 {
		c.Checkpoints = 3
	}
}

// Stats is what a run did.
type Stats struct {
	Seed  uint64
	Steps int
	// Ops counts steps by kind; LanceDB counts the LanceDB operations
	// acknowledged by kind.
	Ops, LanceDB map[string]int
	// Failed: compactord steps that returned an error (expected under
	// faults, crashes and races).
	Failed int
	// Faults: injected fault actions that fired; Crashes: simulated
	// crashes reached; Races: compactord commits that met a LanceDB commit
	// landing under them; Ambiguous: outcomes learnt by reading back
	// (an error after which the merge had committed).
	Faults, Crashes, Races, Ambiguous int
	// Refused: inline-remap compactions refused while the table had
	// fragment-reuse versions some index had not absorbed.
	Refused int
	// Outages: lost responses followed by outages that fired (their
	// failed calls are in Faults).
	Outages int
	// Checks: full checks of the table against the model; Versions:
	// time-travel reads compared; Checkpoints: copies LanceDB read back.
	Checks, Versions, Checkpoints int
	// FloorFell counts, by step kind, shards whose floor (min over the
	// pinned versions of min(merged, catch-up)) fell in a step: a commit
	// that dropped a catch-up record, or a tag on an older version.
	FloorFell map[string]int
	// Violations is empty unless something broke; the run stops at the
	// first.
	Violations []string
}

// Violation is a broken invariant.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return v.Msg }

func violationf(format string, args ...any) error {
	return &Violation{Msg: fmt.Sprintf(format, args...)}
}

const (
	// keySpace is where MemWAL and plain upserts and deletes draw keys;
	// appends use fresh keys from freshKeys up (an append never writes a
	// key twice, as LanceDB's append does not deduplicate).
	keySpace  = 120
	freshKeys = 1_000_000
	baseRows  = 40
	idxID     = "id_idx"
	idxCat    = "cat_idx"
)

type harness struct {
	cfg       Config
	ctx       context.Context
	rng       *rand.Rand
	dir       string // the table directory
	raw       storage.Bucket
	crash     *faults.CrashBucket
	outage    *faults.OutageBucket
	faulty    *faults.Faulty
	ref       *Ref
	stats     *Stats
	snap      *Snapshot // the last checked latest version
	step      int
	kind      string            // the step's kind
	lastFloor map[string]uint64 // the last check's pinned floor
	fresh     int64
	hist      []string
	cps       []checkpoint
}

type checkpoint struct {
	name      string
	lsm, base map[int64]string
}

// Run runs the campaign. Violations are in Stats; the error is for a
// failure to set the run up.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	cfg.defaults()
	h := &harness{cfg: cfg, ctx: ctx, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x1a9ce)), dir: filepath.Join(cfg.Dir, "t.lance"),
		fresh: freshKeys, stats: &Stats{Seed: cfg.Seed, Ops: map[string]int{}, LanceDB: map[string]int{}, FloorFell: map[string]int{}, Violations: []string{}}}
	if err := h.setup(); err != nil {
		return nil, err
	}
	defer h.raw.Close()
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = time.Now().Add(cfg.Duration)
	}
	// Checkpoints are spread over the run (by step when it is bounded
	// by steps).
	every := max(cfg.Steps/(cfg.Checkpoints+1), 1)
	for cfg.Steps == 0 || h.step < cfg.Steps {
		if !deadline.IsZero() && time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		h.step++
		err := h.runStep()
		if err == nil && h.cfg.Sabotage != nil {
			h.cfg.Sabotage(h.step, h.dir)
			err = h.check(false)
		}
		if err == nil && h.step%every == 0 && len(h.cps) < cfg.Checkpoints {
			err = h.checkpoint()
		}
		if err != nil {
			h.violation(err)
			break
		}
	}
	if len(h.stats.Violations) == 0 && ctx.Err() == nil {
		if err := h.drain(); err != nil {
			h.violation(err)
		}
	}
	h.stats.Steps = h.step
	return h.stats, nil
}

func (h *harness) logf(format string, args ...any) {
	line := fmt.Sprintf("step %d: ", h.step) + fmt.Sprintf(format, args...)
	h.hist = append(h.hist, line)
	if len(h.hist) > 12 {
		h.hist = h.hist[1:]
	}
	if h.cfg.Logf != nil {
		h.cfg.Logf("%s", line)
	}
}

func (h *harness) violation(err error) {
	var v *Violation
	msg := err.Error()
	if !errors.As(err, &v) {
		msg = "harness error: " + msg
	}
	h.stats.Violations = append(h.stats.Violations, fmt.Sprintf("seed %d step %d: %s\nlast steps:\n  %s", h.cfg.Seed, h.step, msg, strings.Join(h.hist, "\n  ")))
}

// lance runs a LanceDB program on the table.
func (h *harness) lance(steps ...lancedb.Step) (*lancedb.Results, error) {
	return h.cfg.Oracle.Run(h.ctx, lancedb.Program{URI: h.cfg.Dir, Table: "t", Steps: steps})
}

func (h *harness) setup() error {
	base := lancedb.BasicRows(0, baseRows)
	maintained := []string{}
	if h.cfg.Maintained {
		maintained = []string{idxID}
	}
	spec := lancedb.LsmWriteSpec{SpecType: "bucket", Column: "id", NumBuckets: h.cfg.Shards, MaintainedIndexes: maintained}
	if _, err := h.lance(lancedb.Create(lancedb.BasicSchema, base), lancedb.CreateIndex("id", "btree", idxID),
		lancedb.CreateIndex("cat", "bitmap", idxCat), lancedb.SetPrimaryKey("id"), lancedb.SetLsmWriteSpec(spec)); err != nil {
		return fmt.Errorf("LanceDB builds the table: %w", err)
	}
	var err error
	if h.raw, err = storage.Open(h.ctx, "file://"+h.dir); err != nil {
		return err
	}
	h.crash = faults.NewCrashBucket(h.raw)
	h.outage = faults.NewOutageBucket(h.crash)
	h.faulty = faults.NewFaulty(h.outage)
	want, _ := lancedb.RowsByID(base)
	h.ref = NewRef(want)
	if err := h.check(false); err != nil {
		return fmt.Errorf("the table LanceDB built: %w", err)
	}
	return nil
}

// handle opens the table for one compactord step, over the fault and
// crash wrappers: a new process's view.
func (h *harness) handle() (*table.Handle, error) {
	cfg := commit.DefaultConfig()
	c, err := commit.NewCommitter(cfg, h.faulty, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		return nil, err
	}
	return table.New(h.faulty, c)
}

// check compares the table with the model and checks the invariants:
//   - the merged positions never go back, and move only in a merge step
//     (the model then applies the generations the table says merged:
//     an ambiguous merge outcome is learnt here, and the base scan then
//     proves the rows agree);
//   - the base scan of the latest version is the model's base (no lost,
//     no resurrected, no duplicated key); compactord's LSM view (the base
//     plus the unmerged generations it reads from storage) is the model's;
//   - every index agrees with the scan, catch-up never passes the merged
//     position;
//   - every generation a pinned version (the latest, the tagged ones)
//     still reads, or a maintained index still lacks, has all its files
//     (unless an earlier state allowed trim to delete it);
//     the WAL entries above the replay cursor and the newest covered one
//     are still there;
//   - the tagged versions and a sample of the other retained versions
//     the model saw read back as they were;
//   - verify (deep) finds nothing.
func (h *harness) check(mergeStep bool) error {
	ctx := h.ctx
	h.stats.Checks++
	f, _, err := meta.ReadLatest(ctx, h.raw)
	if err != nil {
		return violationf("read the latest version: %v", err)
	}
	mw, err := MemWALOf(f)
	if err != nil {
		return violationf("the MemWAL index: %v", err)
	}
	for _, shard := range slices.Sorted(maps.Keys(mw.Compacted)) {
		c := mw.Compacted[shard]
		switch was := h.ref.Compacted[shard]; {
		case c < was:
			return violationf("shard %s: merged position went back from %d to %d", shard, was, c)
		case c > was && !mergeStep:
			return violationf("shard %s: merged position moved from %d to %d without a merge", shard, was, c)
		case c > was:
			if err := h.ref.Merge(shard, c); err != nil {
				return violationf("%v", err)
			}
		}
	}
	for shard, c := range h.ref.Compacted {
		if c > 0 && mw.Compacted[shard] == 0 {
			return violationf("shard %s: merged position %d vanished from the MemWAL index", shard, c)
		}
	}
	for name, per := range mw.Catchup {
		for shard, g := range per {
			if g > mw.Compacted[shard] {
				return violationf("index %s caught up to generation %d of shard %s, above its merged position %d", name, g, shard, mw.Compacted[shard])
			}
		}
	}
	snap, err := ReadSnapshot(ctx, h.raw, 0)
	if err != nil {
		return violationf("%v", err)
	}
	if d := Diff(snap.Rows, h.ref.Base); d != "" {
		return violationf("version %d: the base scan differs from the model: %s", snap.Version, d)
	}
	lsm, err := h.lsmView(snap, mw)
	if err != nil {
		return violationf("%v", err)
	}
	if d := Diff(lsm, h.ref.LSM()); d != "" {
		return violationf("version %d: the LSM view differs from the model: %s", snap.Version, d)
	}
	bad, err := CheckIndices(ctx, h.raw, snap)
	if err != nil {
		return violationf("version %d: read the indexes: %v", snap.Version, err)
	}
	if len(bad) > 0 {
		return violationf("version %d: %s", snap.Version, strings.Join(bad, "; "))
	}
	if err := h.checkRetained(f, mw); err != nil {
		return err
	}
	if err := h.checkVersions(snap); err != nil {
		return err
	}
	rep, err := verify.Run(ctx, h.raw, verify.Options{Deep: true, IndexContent: index.ContentChecker})
	if err != nil {
		return violationf("verify: %v", err)
	}
	if !rep.OK() {
		return violationf("verify: %v", rep.Violations)
	}
	h.snap = snap
	return nil
}

// lsmView reads the LSM view as a reader of this version would: the base
// scan, then every generation above the version's merged position,
// ascending per shard.
func (h *harness) lsmView(snap *Snapshot, mw MemWAL) (map[int64]string, error) {
	v := maps.Clone(snap.Rows)
	ids, err := memwal.ListShards(h.ctx, h.raw)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		ss, err := memwal.ReadShard(h.ctx, h.raw, id)
		if err != nil {
			return nil, err
		}
		if ss.Manifest == nil {
			continue
		}
		ts := slices.Clone(ss.Manifest.GetSstables())
		slices.SortFunc(ts, func(a, b *pbSsTable) int { return cmpU(a.GetGeneration(), b.GetGeneration()) })
		for _, t := range ts {
			if t.GetGeneration() <= mw.Compacted[id] {
				continue
			}
			rows, tombs, err := ReadGeneration(h.ctx, h.raw, id, t)
			if err != nil {
				return nil, fmt.Errorf("an unmerged generation is unreadable: %w", err)
			}
			maps.Copy(v, rows)
			for k := range tombs {
				delete(v, k)
			}
		}
	}
	return v, nil
}

// pinnedFloor is, per shard, the lowest floor over the versions trim must
// honour with no reader grace: the latest and every tagged one.
func (h *harness) pinnedFloor(latest *meta.ManifestFile, mw MemWAL) (map[string]uint64, error) {
	floor := map[string]uint64{}
	for shard := range h.ref.Gens {
		floor[shard] = mw.Floor(shard)
	}
	tags, err := meta.LoadTags(h.ctx, h.raw)
	if err != nil {
		return nil, err
	}
	_, n, err := meta.Latest(h.ctx, h.raw)
	if err != nil {
		return nil, err
	}
	for _, tg := range tags {
		f, err := meta.ReadVersion(h.ctx, h.raw, n, tg.Version)
		if err != nil {
			return nil, violationf("tag %s names version %d, which is gone: %v", tg.Name, tg.Version, err)
		}
		m, err := MemWALOf(f)
		if err != nil {
			return nil, err
		}
		for shard := range floor {
			floor[shard] = min(floor[shard], m.Floor(shard))
		}
	}
	return floor, nil
}

func (h *harness) checkRetained(latest *meta.ManifestFile, mw MemWAL) error {
	floor, err := h.pinnedFloor(latest, mw)
	if err != nil {
		return err
	}
	// The floor is not monotone: LanceDB 0.39's delete commit drops the
	// MemWAL index's catch-up records, so a generation trim deleted
	// legitimately may lie above a later floor. What trim may have deleted
	// is up to the highest floor seen (the model sees every state trim
	// runs in).
	for shard, f := range floor {
		if f < h.lastFloor[shard] {
			h.stats.FloorFell[h.kind]++
		}
		h.ref.Trimmable[shard] = max(h.ref.Trimmable[shard], f)
	}
	h.lastFloor = floor
	for shard, gs := range h.ref.Gens {
		for _, g := range gs {
			if g.n <= h.ref.Trimmable[shard] {
				continue
			}
			for _, f := range g.files {
				if _, err := h.raw.Attributes(h.ctx, f); err != nil {
					return violationf("shard %s generation %d is still needed (pinned floor %d, highest seen %d, merged %d) but %s is gone: %v", shard, g.n, floor[shard], h.ref.Trimmable[shard], mw.Compacted[shard], f, err)
				}
			}
		}
		ss, err := memwal.ReadShard(h.ctx, h.raw, shard)
		if err != nil || ss.Manifest == nil {
			return violationf("shard %s: the shard manifest: %v", shard, err)
		}
		cursor := ss.Manifest.GetReplayAfterWalEntryPosition()
		var newestCovered uint64
		for p := range h.ref.WAL[shard] {
			if p <= cursor {
				newestCovered = max(newestCovered, p)
			}
		}
		for p := range h.ref.WAL[shard] {
			if p <= cursor && p != newestCovered {
				continue
			}
			if _, err := h.raw.Attributes(h.ctx, memwal.WALKey(shard, p)); err != nil {
				return violationf("shard %s: WAL entry %d (replay cursor %d, newest covered %d) is gone: %v", shard, p, cursor, newestCovered, err)
			}
		}
	}
	return nil
}

// checkVersions records the latest version's rows and reads back the
// tagged versions and up to two other retained versions the model saw.
func (h *harness) checkVersions(snap *Snapshot) error {
	if prev, ok := h.ref.Versions[snap.Version]; ok {
		if d := Diff(snap.Rows, prev); d != "" {
			return violationf("version %d changed since it was the latest: %s", snap.Version, d)
		}
	} else {
		h.ref.Versions[snap.Version] = maps.Clone(snap.Rows)
	}
	vs, _, err := meta.ListVersions(h.ctx, h.raw)
	if err != nil {
		return violationf("list versions: %v", err)
	}
	onDisk := map[uint64]bool{}
	for _, v := range vs {
		onDisk[v] = true
	}
	var sample []uint64
	for name, v := range h.ref.Tags {
		if !onDisk[v] {
			return violationf("tag %s names version %d, which is no longer on disk", name, v)
		}
		sample = append(sample, v)
	}
	var known []uint64
	for v := range h.ref.Versions {
		if onDisk[v] && v != snap.Version {
			known = append(known, v)
		}
	}
	slices.Sort(known)
	for range min(2, len(known)) {
		sample = append(sample, known[h.rng.IntN(len(known))])
	}
	for _, v := range sample {
		s, err := ReadSnapshot(h.ctx, h.raw, v)
		if err != nil {
			return violationf("retained version %d: %v", v, err)
		}
		if d := Diff(s.Rows, h.ref.Versions[v]); d != "" {
			return violationf("retained version %d reads differently than when it was the latest: %s", v, d)
		}
		h.stats.Versions++
	}
	return nil
}

// checkpoint copies the table for LanceDB to read back at the end.
func (h *harness) checkpoint() error {
	name := fmt.Sprintf("c%d", len(h.cps)+1)
	if out, err := exec.Command("cp", "-a", h.dir, filepath.Join(h.cfg.Dir, name+".lance")).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the table: %v: %s", err, out)
	}
	h.cps = append(h.cps, checkpoint{name: name, lsm: h.ref.LSM(), base: maps.Clone(h.ref.Base)})
	h.logf("checkpoint %s", name)
	return nil
}
