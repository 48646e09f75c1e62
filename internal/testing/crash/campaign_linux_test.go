//go:build linux

package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/cli"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/stores"
	"github.com/compactord/compactord/internal/verify"
)

// The test binary doubles as the compactord binary (COMPACTORD_CLI_CHILD),
// unless COMPACTORD_BINARY names one (a soak pins the build it tests).
func TestMain(m *testing.M) {
	if os.Getenv("COMPACTORD_CLI_CHILD") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	stores.Main(m)
}

func compactord() (string, []string) {
	if p := os.Getenv("COMPACTORD_BINARY"); p != "" {
		return p, os.Environ()
	}
	return os.Args[0], append(os.Environ(), "COMPACTORD_CLI_CHILD=1")
}

const (
	shards      = 4
	generations = 4
	// batch is how many tables one LanceDB read-back program checks.
	batch = 25
)

// shareSoak is this campaign's share of COMPACTORD_SOAK (with the Lance
// model test's 50 % and the concurrency campaign's 40 %).
const shareSoak = 0.10

// history is every value each key ever had: the base rows and each
// generation's rows of lancedb.MemWALSteps, which the fixture wrote.
func history() map[int64]map[string]bool {
	h := map[int64]map[string]bool{}
	add := func(rows []lancedb.Row) {
		m, _ := lancedb.RowsByID(rows)
		for id, s := range m {
			if h[id] == nil {
				h[id] = map[string]bool{}
			}
			h[id][s] = true
		}
	}
	add(lancedb.BasicRows(0, 20))
	for g := 1; g <= generations; g++ {
		tag := fmt.Sprintf("g%d-", g)
		add(append(lancedb.TaggedRows(0, 5, tag), lancedb.TaggedRows(int64(100*g), int64(100*g+5), tag)...))
	}
	return h
}

// stage is one step of the maintenance pipeline a point runs.
type stage int

const (
	stMerge stage = iota
	stCatchup
	stTrim
	numStages
)

func (s stage) String() string { return [...]string{"merge", "catchup", "trim"}[s] }

// StageStats is what the points that killed one stage saw.
type StageStats struct {
	Points, Kills, Exits, Violations int
}

// Stats is what a campaign did.
type Stats struct {
	Points, Kills, Exits, Violations int
	ByStage                          [numStages]StageStats
	ByArgs                           map[string]int
	// FullyMerged: points whose re-run left every generation merged.
	FullyMerged int
}

func (s Stats) String() string {
	var b strings.Builder
	for st := range numStages {
		x := s.ByStage[st]
		fmt.Fprintf(&b, " %s: %d points, %d killed, %d finished before the kill, %d violations;", st, x.Points, x.Kills, x.Exits, x.Violations)
	}
	return fmt.Sprintf("%d points, %d killed, %d finished before the kill, %d violations;%s merge arguments %v, %d fully merged after the re-run",
		s.Points, s.Kills, s.Exits, s.Violations, b.String(), s.ByArgs, s.FullyMerged)
}

type campaign struct {
	t        *testing.T
	rng      *rand.Rand
	seed     uint64
	bin      string
	env      []string
	pristine string // the fixture's table
	shards   []shardInfo
	want     map[int64]string
	base     map[int64]string // the base view before
	hist     map[int64]map[string]bool
	db       string // the database directory holding the copies
	// calibration per merge arguments: each stage's events and duration
	// in a pipeline that was not killed.
	events map[string][numStages]int64
	dur    map[string][numStages]time.Duration
	off    int // the first point's stage
	stats  Stats
	n      int
}

func newCampaign(t *testing.T, seed uint64) *campaign {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", shards, generations)
	bin, env := compactord()
	c := &campaign{t: t, rng: rand.New(rand.NewPCG(seed, 0x1a2c)), seed: seed, bin: bin, env: env,
		pristine: f.Dir, want: f.Want, hist: history(), db: t.TempDir(),
		events: map[string][numStages]int64{}, dur: map[string][numStages]time.Duration{}, stats: Stats{ByArgs: map[string]int{}}}
	c.off = c.rng.IntN(int(numStages))
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
	lsm, base := c.rows(res, 0), c.rows(res, 1)
	if d := lancedb.DiffByID(lsm, c.want); d != "" {
		t.Fatalf("the fixture's LSM view is not the model: %s", d)
	}
	if len(base) != 20 {
		t.Fatalf("the fixture's base view has %d rows, want 20", len(base))
	}
	c.base = base
	var err error
	if c.shards, err = loadShards(c.pristine); err != nil {
		t.Fatalf("the fixture's MemWAL: %v", err)
	}
	for _, sh := range c.shards {
		if sh.top == 0 || len(sh.wal) == 0 {
			t.Fatalf("the fixture's shard %s has generations up to %d and %d WAL entries: nothing to merge or trim", sh.id, sh.top, len(sh.wal))
		}
	}
	return c
}

func (c *campaign) rows(res *lancedb.Results, i int) map[int64]string {
	c.t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		c.violation("step %d: %v", i, err)
	}
	return m
}

func (c *campaign) violation(format string, args ...any) {
	c.t.Helper()
	c.stats.Violations++
	c.t.Errorf("seed %d: violation: %s", c.seed, fmt.Sprintf(format, args...))
}

// pviolation is a violation at point p, counted for its stage.
func (c *campaign) pviolation(p *point, format string, args ...any) {
	c.t.Helper()
	c.stats.ByStage[p.stage].Violations++
	c.violation("%s (%s): %s", p.name, p, fmt.Sprintf(format, args...))
}

// copyTable copies the pristine table to name.lance under the database.
func (c *campaign) copyTable(name string) string {
	dst := filepath.Join(c.db, name+".lance")
	if out, err := exec.Command("cp", "-a", c.pristine, dst).CombinedOutput(); err != nil {
		c.t.Fatalf("copy table: %v: %s", err, out)
	}
	return dst
}

// runStage runs one stage on the table at dir: merge with mergeArgs,
// index catch-up, or trim with no reader grace.
func (c *campaign) runStage(dir string, s stage, mergeArgs []string, plan killPlan) procResult {
	url := "file://" + dir
	var args []string
	switch s {
	case stMerge:
		args = append([]string{"merge", url}, mergeArgs...)
	case stCatchup:
		args = []string{"index", "catchup", url}
	default:
		args = []string{"trim", url, "--reader-grace", "0s"}
	}
	return runProc(c.bin, c.env, dir, args, plan)
}

// mergeArgs picks the merge's arguments: one generation per commit (many
// commits, many kill points, and catch-up and trim then see a partly
// merged table), two, or all.
func (c *campaign) mergeArgs() []string {
	switch c.rng.IntN(3) {
	case 0:
		return []string{"--max-generations", "1"}
	case 1:
		return []string{"--max-generations", "2"}
	}
	return nil
}

// calibrate runs one unkilled pipeline on a fresh copy, with mergeArgs
// for the merge. Catch-up and trim are calibrated once: every merge
// argument leaves them the same table.
func (c *campaign) calibrate(mergeArgs []string) {
	key := strings.Join(mergeArgs, " ")
	if _, ok := c.events[key]; ok {
		return
	}
	dir := c.copyTable(fmt.Sprintf("calibrate%d", len(c.events)))
	var ev [numStages]int64
	var du [numStages]time.Duration
	for k := range c.events {
		ev, du = c.events[k], c.dur[k]
		break
	}
	for s := range numStages {
		if s > stMerge && len(c.events) > 0 {
			break
		}
		r := c.runStage(dir, s, mergeArgs, killPlan{})
		if r.err != nil {
			c.t.Fatalf("calibration %s (merge %v): %v: %s", s, mergeArgs, r.err, r.stderr)
		}
		ev[s], du[s] = r.events, r.elapsed
		c.t.Logf("merge %v: %s unkilled: %d events, %s", mergeArgs, s, r.events, r.elapsed.Round(time.Millisecond))
	}
	c.events[key], c.dur[key] = ev, du
	os.RemoveAll(dir)
}

func (c *campaign) verify(p *point, when string) {
	c.t.Helper()
	b, err := openBucket(p.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	defer b.Close()
	rep, err := verify.Run(context.Background(), b, verify.Options{Deep: true, IndexContent: index.ContentChecker})
	if err != nil {
		c.pviolation(p, "%s: verify: %v", when, err)
		return
	}
	for _, v := range rep.Violations {
		c.pviolation(p, "%s: verify: %s", when, v)
	}
}

type point struct {
	name, dir string
	mergeArgs []string
	stage     stage // the stage killed
	plan      killPlan
	res       procResult
}

func (p *point) String() string {
	return fmt.Sprintf("merge %v, %s %s", p.mergeArgs, p.stage, describe(p.plan))
}

// pipeline runs merge, catch-up and trim on p's table, the killed stage
// with p's plan, the others to completion. A stage that fails unkilled is
// a violation (false).
func (c *campaign) pipeline(p *point) bool {
	for s := range numStages {
		var plan killPlan
		if s == p.stage {
			plan = p.plan
		}
		r := c.runStage(p.dir, s, p.mergeArgs, plan)
		if s == p.stage {
			p.res = r
			if r.killed {
				c.stats.Kills++
				c.stats.ByStage[s].Kills++
				continue
			}
			c.stats.Exits++
			c.stats.ByStage[s].Exits++
		}
		if r.err != nil {
			c.pviolation(p, "%s failed unkilled: %v: %s", s, r.err, r.stderr)
			return false
		}
	}
	return true
}

// rerun runs the killed stage and the ones after it to completion; a
// merge re-run merges every generation.
func (c *campaign) rerun(p *point) bool {
	for s := p.stage; s < numStages; s++ {
		r := c.runStage(p.dir, s, nil, killPlan{})
		if r.err != nil {
			c.pviolation(p, "the re-run's %s failed: %v: %s", s, r.err, r.stderr)
			return false
		}
	}
	return true
}

// checkBase checks a LanceDB base view: each key once (RowsByID), every
// base key, and only values the key had.
func (c *campaign) checkBase(p *point, when string, base map[int64]string) {
	c.t.Helper()
	for id := range c.base {
		if _, ok := base[id]; !ok {
			c.pviolation(p, "%s: base view lost id %d", when, id)
		}
	}
	for id, s := range base {
		if !c.hist[id][s] {
			c.pviolation(p, "%s: base view has id %d = %q, a value it never had", when, id, s)
		}
	}
}

// round runs n kill points, each on its own copy of the table.
func (c *campaign) round(n int) {
	var pts []*point
	for range n {
		c.n++
		p := &point{name: fmt.Sprintf("p%d", c.n), mergeArgs: c.mergeArgs(), stage: stage((c.n + c.off) % int(numStages))}
		c.calibrate(p.mergeArgs)
		key := strings.Join(p.mergeArgs, " ")
		p.dir = c.copyTable(p.name)
		// Mostly at the Nth event (a point in the stage's own sequence of
		// object writes and deletes), sometimes after a delay (a point in
		// its CPU work, its startup included).
		if c.rng.IntN(4) > 0 {
			p.plan.afterEvents = 1 + c.rng.Int64N(c.events[key][p.stage]+1)
		} else {
			p.plan.afterDelay = time.Duration(c.rng.Int64N(int64(c.dur[key][p.stage]) + 1))
		}
		c.stats.Points++
		c.stats.ByStage[p.stage].Points++
		c.stats.ByArgs[key]++
		if !c.pipeline(p) {
			continue
		}
		c.verify(p, "after the kill")
		c.checkRetained(p, "after the kill")
		pts = append(pts, p)
	}
	// LanceDB after the kills: the LSM view is the model, the base view
	// is consistent.
	var steps []lancedb.Step
	for _, p := range pts {
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(p.name), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(p.name))
	}
	res := lancedb.MustRun(c.t, lancedb.Program{URI: c.db, Steps: steps})
	for i, p := range pts {
		if d := lancedb.DiffByID(c.rows(res, 2*i), c.want); d != "" {
			c.pviolation(p, "after the kill: LanceDB's LSM view: %s", d)
		}
		c.checkBase(p, "after the kill", c.rows(res, 2*i+1))
	}
	// Re-running the remaining stages finishes the pipeline.
	steps = steps[:0]
	var done []*point
	var states []memwalState
	for _, p := range pts {
		if !c.rerun(p) {
			continue
		}
		c.verify(p, "after the re-run")
		st, ok := c.checkRetained(p, "after the re-run")
		if !ok {
			continue
		}
		done, states = append(done, p), append(states, st)
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(p.name), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(p.name),
			lancedb.IndexStats("id_idx").On(p.name))
	}
	res = lancedb.MustRun(c.t, lancedb.Program{URI: c.db, Steps: steps})
	for i, p := range done {
		base := c.rows(res, 3*i)
		if d := lancedb.DiffByID(c.rows(res, 3*i+1), c.want); d != "" {
			c.pviolation(p, "after the re-run: LanceDB's LSM view: %s", d)
		}
		c.checkBase(p, "after the re-run", base)
		if is, err := res.IndexStats(3*i + 2); err != nil || is == nil {
			c.pviolation(p, "after the re-run: LanceDB's indexStats of id_idx: %v, %v", is, err)
		} else if is.NumUnindexedRows != 0 {
			c.pviolation(p, "after the re-run: LanceDB's indexStats of id_idx: %d unindexed rows (%d indexed)", is.NumUnindexedRows, is.NumIndexedRows)
		}
		if c.checkTrimmed(p, states[i]) {
			c.stats.FullyMerged++
			if d := lancedb.DiffByID(base, c.want); d != "" {
				c.pviolation(p, "after the re-run, every generation merged: LanceDB's base view: %s", d)
			}
			// The dry run says in one line that there is nothing to
			// merge; a planned job would be a generation left behind.
			r := c.runStage(p.dir, stMerge, []string{"--dry-run"}, killPlan{})
			if out := strings.TrimSpace(r.stdout); r.err != nil || strings.Count(out, "\n") != 0 || !strings.Contains(out, `"jobs":0`) {
				c.pviolation(p, "after the re-run a merge dry run plans %q (%v)", r.stdout, r.err)
			}
		}
	}
	for _, p := range pts {
		os.RemoveAll(p.dir)
	}
}

func describe(k killPlan) string {
	switch {
	case k.afterEvents > 0:
		return fmt.Sprintf("killed at event %d", k.afterEvents)
	case k.afterDelay > 0:
		return fmt.Sprintf("killed after %s", k.afterDelay.Round(time.Microsecond))
	}
	return "not killed"
}

// run runs points kill points, or until deadline.
func (c *campaign) run(points int, deadline time.Time) {
	for c.stats.Points < points && (deadline.IsZero() || time.Now().Before(deadline)) && c.stats.Violations == 0 {
		c.round(min(batch, points-c.stats.Points))
	}
	c.t.Logf("seed %d: %s", c.seed, c.stats)
}

func seed(t *testing.T) uint64 {
	if s := os.Getenv("COMPACTORD_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COMPACTORD_CRASH_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano()) % 1_000_000_000
}

// TestLanceCrash kills `compactord merge`, `index catchup` or `trim` at
// random points of the pipeline on a table of 4 shards × 4 generations
// (COMPACTORD_LANCE_CRASH_POINTS, default 9: 3 per stage;
// COMPACTORD_CRASH_SEED replays a seed's choices).
func TestLanceCrash(t *testing.T) {
	points := 3 * int(numStages)
	if v, err := strconv.Atoi(os.Getenv("COMPACTORD_LANCE_CRASH_POINTS")); err == nil && v > 0 {
		points = v
	}
	s := seed(t)
	t.Logf("seed %d (replay: COMPACTORD_CRASH_SEED=%d COMPACTORD_LANCE_CRASH_POINTS=%d go test ./internal/testing/crash -run TestLanceCrash -v)", s, s, points)
	c := newCampaign(t, s)
	c.run(points, time.Time{})
	if c.stats.Kills == 0 {
		t.Errorf("nothing was killed in %d points: the campaign is not exercising crashes", c.stats.Points)
	}
	for st := range numStages {
		// With a handful of points a stage may finish before each of
		// them; with many it must not.
		if x := c.stats.ByStage[st]; x.Points >= 10 && x.Kills == 0 {
			t.Errorf("%s was never killed in %d points", st, x.Points)
		}
	}
}

// TestSoakLanceCrash runs campaigns back to back for its share of
// COMPACTORD_SOAK (make soak DURATION=30m).
func TestSoakLanceCrash(t *testing.T) {
	budget, ok, err := faults.SoakBudget(shareSoak)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := faults.SoakReport{Campaign: "crash"}
	for i := seed(t); time.Now().Before(deadline); i++ {
		c := newCampaign(t, i)
		c.run(1<<30, deadline)
		sum.Runs++
		sum.Ops += c.stats.Points
		sum.Crashes += c.stats.Kills
		sum.Violations += c.stats.Violations
		if c.stats.Violations > 0 {
			break
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Print(os.Stdout)
}
