//go:build linux

package lancecrash

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
	"github.com/compactord/compactord/internal/lance/verify"
	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil"
	"github.com/compactord/compactord/internal/testutil/lancedb"
)

// The test binary doubles as the compactord binary (COMPACTORD_CLI_CHILD),
// unless COMPACTORD_BINARY names one (a soak pins the build it tests).
func TestMain(m *testing.M) {
	if os.Getenv("COMPACTORD_CLI_CHILD") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	testutil.Main(m)
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

// shareSoak is this campaign's share of COMPACTORD_SOAK, on top of the
// three shares of internal/model (make soak runs it after them).
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

// Stats is what a campaign did.
type Stats struct {
	Points, Kills, Exits, Violations int
	ByArgs                           map[string]int
}

type campaign struct {
	t        *testing.T
	rng      *rand.Rand
	seed     uint64
	bin      string
	env      []string
	pristine string // the fixture's table
	want     map[int64]string
	base     map[int64]string // the base view before
	hist     map[int64]map[string]bool
	db       string // the database directory holding the copies
	// calibration per merge arguments: events and duration of a run
	// that was not killed.
	events map[string]int64
	dur    map[string]time.Duration
	stats  Stats
	n      int
}

func newCampaign(t *testing.T, seed uint64) *campaign {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", shards, generations)
	bin, env := compactord()
	c := &campaign{t: t, rng: rand.New(rand.NewPCG(seed, 0x1a2c)), seed: seed, bin: bin, env: env,
		pristine: f.Dir, want: f.Want, hist: history(), db: t.TempDir(),
		events: map[string]int64{}, dur: map[string]time.Duration{}, stats: Stats{ByArgs: map[string]int{}}}
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
	lsm, base := c.rows(res, 0), c.rows(res, 1)
	if d := lancedb.DiffByID(lsm, c.want); d != "" {
		t.Fatalf("the fixture's LSM view is not the model: %s", d)
	}
	if len(base) != 20 {
		t.Fatalf("the fixture's base view has %d rows, want 20", len(base))
	}
	c.base = base
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

// copyTable copies the pristine table to name.lance under the database.
func (c *campaign) copyTable(name string) string {
	dst := filepath.Join(c.db, name+".lance")
	if out, err := exec.Command("cp", "-a", c.pristine, dst).CombinedOutput(); err != nil {
		c.t.Fatalf("copy table: %v: %s", err, out)
	}
	return dst
}

func (c *campaign) merge(dir string, args []string, plan killPlan) procResult {
	return runProc(c.bin, c.env, dir, append([]string{"merge", "file://" + dir}, args...), plan)
}

// mergeArgs picks the merge's arguments: one generation per commit (many
// commits, many kill points), two, or all.
func (c *campaign) mergeArgs() []string {
	switch c.rng.IntN(3) {
	case 0:
		return []string{"--max-generations", "1"}
	case 1:
		return []string{"--max-generations", "2"}
	}
	return nil
}

// calibrate runs one unkilled merge with args on a fresh copy.
func (c *campaign) calibrate(args []string) {
	key := strings.Join(args, " ")
	if _, ok := c.events[key]; ok {
		return
	}
	dir := c.copyTable(fmt.Sprintf("calibrate%d", len(c.events)))
	r := c.merge(dir, args, killPlan{})
	if r.err != nil {
		c.t.Fatalf("calibration merge %v: %v: %s", args, r.err, r.stderr)
	}
	c.events[key], c.dur[key] = r.events, r.elapsed
	c.t.Logf("merge %v unkilled: %d events, %s", args, r.events, r.elapsed.Round(time.Millisecond))
}

func (c *campaign) verify(dir, when string) {
	c.t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		c.t.Fatal(err)
	}
	defer b.Close()
	rep, err := verify.Run(context.Background(), b, verify.Options{Deep: true})
	if err != nil {
		c.violation("%s: %s: verify: %v", dir, when, err)
		return
	}
	for _, v := range rep.Violations {
		c.violation("%s: %s: verify: %s", dir, when, v)
	}
}

type point struct {
	name, dir string
	args      []string
	plan      killPlan
	res       procResult
}

// round runs n kill points, each on its own copy of the table.
func (c *campaign) round(n int) {
	var pts []*point
	for range n {
		c.n++
		args := c.mergeArgs()
		c.calibrate(args)
		key := strings.Join(args, " ")
		p := &point{name: fmt.Sprintf("p%d", c.n), args: args}
		p.dir = c.copyTable(p.name)
		// Mostly at the Nth event (a point in the merge's own sequence of
		// object writes), sometimes after a delay (a point in its CPU
		// work, its startup included).
		if c.rng.IntN(4) > 0 {
			p.plan.afterEvents = 1 + c.rng.Int64N(c.events[key]+1)
		} else {
			p.plan.afterDelay = time.Duration(c.rng.Int64N(int64(c.dur[key]) + 1))
		}
		p.res = c.merge(p.dir, args, p.plan)
		c.stats.Points++
		c.stats.ByArgs[key]++
		switch {
		case p.res.killed:
			c.stats.Kills++
		case p.res.err != nil:
			c.violation("%s: merge %v (%v) failed unkilled: %v: %s", p.name, args, describe(p.plan), p.res.err, p.res.stderr)
			continue
		default:
			c.stats.Exits++
		}
		c.verify(p.dir, "after the kill")
		pts = append(pts, p)
	}
	// LanceDB after the kills: the LSM view is the model; the base view
	// holds each key once (RowsByID), every base key, and only values the
	// key had.
	var steps []lancedb.Step
	for _, p := range pts {
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(p.name), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(p.name))
	}
	res := lancedb.MustRun(c.t, lancedb.Program{URI: c.db, Steps: steps})
	for i, p := range pts {
		if d := lancedb.DiffByID(c.rows(res, 2*i), c.want); d != "" {
			c.violation("%s: after merge %v %s: LanceDB's LSM view: %s", p.name, p.args, describe(p.plan), d)
		}
		base := c.rows(res, 2*i+1)
		for id := range c.base {
			if _, ok := base[id]; !ok {
				c.violation("%s: after merge %v %s: base view lost id %d", p.name, p.args, describe(p.plan), id)
			}
		}
		for id, s := range base {
			if !c.hist[id][s] {
				c.violation("%s: after merge %v %s: base view has id %d = %q, a value it never had", p.name, p.args, describe(p.plan), id, s)
			}
		}
	}
	// A re-run finishes the merge.
	steps = steps[:0]
	for _, p := range pts {
		r := c.merge(p.dir, nil, killPlan{})
		if r.err != nil {
			c.violation("%s: the re-run after merge %v %s failed: %v: %s", p.name, p.args, describe(p.plan), r.err, r.stderr)
		}
		c.verify(p.dir, "after the re-run")
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(p.name), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(p.name))
	}
	res = lancedb.MustRun(c.t, lancedb.Program{URI: c.db, Steps: steps})
	for i, p := range pts {
		if d := lancedb.DiffByID(c.rows(res, 2*i), c.want); d != "" {
			c.violation("%s: after merge %v %s and a re-run: LanceDB's base view: %s", p.name, p.args, describe(p.plan), d)
		}
		if d := lancedb.DiffByID(c.rows(res, 2*i+1), c.want); d != "" {
			c.violation("%s: after merge %v %s and a re-run: LanceDB's LSM view: %s", p.name, p.args, describe(p.plan), d)
		}
		r := c.merge(p.dir, []string{"--dry-run"}, killPlan{})
		if r.err != nil || strings.TrimSpace(r.stdout) != "" {
			c.violation("%s: after the re-run a dry run plans %q (%v)", p.name, r.stdout, r.err)
		}
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
	c.t.Logf("seed %d: %d points, %d killed, %d finished before the kill, by arguments %v, %d violations",
		c.seed, c.stats.Points, c.stats.Kills, c.stats.Exits, c.stats.ByArgs, c.stats.Violations)
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

// TestLanceMergeCrash kills `compactord merge` at random points of a
// merge of 4 shards × 4 generations (COMPACTORD_LANCE_CRASH_POINTS, default 8;
// COMPACTORD_CRASH_SEED replays a seed's choices).
func TestLanceMergeCrash(t *testing.T) {
	points := 8
	if v, err := strconv.Atoi(os.Getenv("COMPACTORD_LANCE_CRASH_POINTS")); err == nil && v > 0 {
		points = v
	}
	s := seed(t)
	t.Logf("seed %d (replay: COMPACTORD_CRASH_SEED=%d COMPACTORD_LANCE_CRASH_POINTS=%d go test ./internal/lancecrash -run TestLanceMergeCrash -v)", s, s, points)
	c := newCampaign(t, s)
	c.run(points, time.Time{})
	if c.stats.Kills == 0 {
		t.Errorf("no merge was killed in %d points: the campaign is not exercising crashes", c.stats.Points)
	}
}

// TestSoakLanceMergeCrash runs campaigns back to back for its share of
// COMPACTORD_SOAK (make soak DURATION=30m).
func TestSoakLanceMergeCrash(t *testing.T) {
	budget, ok, err := model.SoakBudget(shareSoak)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := model.SoakReport{Campaign: "lance-merge-crash"}
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
