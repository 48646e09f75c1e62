package concurrency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/cli"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/model"
	"github.com/compactord/compactord/internal/testing/s3server"
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

// tableSpec is one table of the campaign's database.
type tableSpec struct {
	name   string
	shards int
	// maintained: the LSM spec maintains id_idx, so trim must wait for
	// its catch-up before deleting a merged generation.
	maintained bool
}

var tableSpecs = []tableSpec{{"a", 2, true}, {"b", 3, false}}

// lanceIndexes are what LanceDB's createIndex builds in the campaign:
// the fixture's two indexes again (id_idx is the one the LSM spec
// maintains) and two new names. They are on id and cat, the columns the
// index checks resolve (model.CheckIndices).
var lanceIndexes = []lancedb.IndexChoice{
	{Column: "id", Type: "btree", Name: "id_idx"},
	{Column: "cat", Type: "bitmap", Name: "cat_idx"},
	{Column: "cat", Type: "btree", Name: "cat_btree"},
	{Column: "id", Type: "bitmap", Name: "id_bitmap"},
}

// mode is how a campaign runs.
type mode struct {
	store string // file or s3 (versitygw)
	// deferRemap: every compactord compaction defers its index remap to
	// the fragment-reuse index (the daemons' jobs.compact.inline_remap
	// off, the CLI's --defer-remap=true); otherwise every one remaps
	// inline. LanceDB's optimize remaps the btree through its own row map
	// only, so a deferred remap followed by optimize corrupts the table:
	// this mode exists to show that the campaign notices.
	deferRemap bool
	// lanceMaint weighs LanceDB's optimize and createIndex among each
	// table's plain writer's operations (append 3, delete 2, merge 1).
	lanceMaint map[string]int
}

func (m mode) String() string {
	remap := "inline remap"
	if m.deferRemap {
		remap = "deferred remap"
	}
	return fmt.Sprintf("%s, %s, LanceDB maintenance %v", m.store, remap, m.lanceMaint)
}

// defaultMode is the mode of $COMPACTORD_LANCE_CONCURRENCY_REMAP (inline,
// the default, or deferred) and $COMPACTORD_LANCE_CONCURRENCY_LANCE_MAINT
// (weights as "optimize=1,createIndex=1", the default, or "off") on
// store.
func defaultMode(t testing.TB, store string) mode {
	m := mode{store: store, lanceMaint: map[string]int{"optimize": 1, "createIndex": 1}}
	switch r := os.Getenv("COMPACTORD_LANCE_CONCURRENCY_REMAP"); r {
	case "", "inline":
	case "deferred":
		m.deferRemap = true
	default:
		t.Fatalf("COMPACTORD_LANCE_CONCURRENCY_REMAP=%q: want inline or deferred", r)
	}
	w, err := parseWeights(os.Getenv("COMPACTORD_LANCE_CONCURRENCY_LANCE_MAINT"))
	if err != nil {
		t.Fatalf("COMPACTORD_LANCE_CONCURRENCY_LANCE_MAINT: %v", err)
	}
	if w != nil {
		m.lanceMaint = w
	}
	return m
}

// parseWeights reads "optimize=1,createIndex=2" ("off": none; "": nil).
func parseWeights(s string) (map[string]int, error) {
	switch s {
	case "":
		return nil, nil
	case "off", "0":
		return map[string]int{}, nil
	}
	out := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); !ok || err != nil || n < 0 || (k != "optimize" && k != "createIndex") {
			return nil, fmt.Errorf("%q: want optimize=N,createIndex=N or off", s)
		}
		out[k] = n
	}
	return out, nil
}

// campaignStores are the stores of $COMPACTORD_LANCE_CONCURRENCY_STORES
// (comma-separated; default file,s3).
func campaignStores(t testing.TB) []string {
	s := os.Getenv("COMPACTORD_LANCE_CONCURRENCY_STORES")
	if s == "" {
		return []string{"file", "s3"}
	}
	out := strings.Split(s, ",")
	for _, st := range out {
		if st != "file" && st != "s3" {
			t.Fatalf("COMPACTORD_LANCE_CONCURRENCY_STORES=%q: want file and/or s3", s)
		}
	}
	return out
}

// Key ranges: each writer owns its range, so what it was told is exactly
// what its keys must read as.
const (
	lsmKeyMin, lsmKeyMax     = 100, 199   // LanceDB through the MemWAL
	plainKeyMin, plainKeyMax = 1000, 1099 // LanceDB appends, deletes, plain merge-inserts
	appendKeys               = 5000       // compactord `table append`, per worker above
	cliWorkers               = 2
	daemons                  = 2
	procTimeout              = 2 * time.Minute
	// versionWindow is the campaign's cleanup older_than, for the daemons
	// and the CLI alike. A LanceDB writer checks its commit for conflicts
	// only against the versions still listed when it commits, so a cleanup
	// that removes versions younger than one of its transactions hides
	// their deletes from it (LanceDB's optimize() then brought a deleted
	// row back). Production's floor is an hour; the campaign keeps the
	// window short so cleanup still races everything, and checks that no
	// LanceDB transaction lasted as long (see lanceSpans).
	versionWindow = 20 * time.Second
)

// Stats is what a round did.
type Stats struct {
	// Jobs counts CLI jobs by kind and outcome (ok, failed); Daemon the
	// daemons' job runs by kind/result.
	Jobs, Daemon map[string]int
	// Writes counts the LanceDB writers' acknowledged operations by kind;
	// LanceMaint their acknowledged optimize and createIndex calls;
	// WriterFailed those LanceDB refused or gave up on.
	Writes, LanceMaint map[string]int
	WriterFailed       int
	// Observations: checks of one table while everything ran.
	Observations int
	// CatchupWithdrawn: readings where a shard's floor fell (a LanceDB
	// delete dropped the MemWAL index's catch-up record).
	CatchupWithdrawn int
	// LostGenerations: generations the observer found deleted while still
	// needed (each is also a violation).
	LostGenerations int
	// Merged: generations merged over all tables (their final merged
	// positions minus the fixture's).
	Merged     uint64
	Violations int
	// LongestLanceTxn: the longest a LanceDB write was in flight (from the
	// writer's previous acknowledgement to its own), which must stay below
	// versionWindow.
	LongestLanceTxn time.Duration
}

func (s Stats) ops() int {
	n := s.Observations
	for _, v := range s.Jobs {
		n += v
	}
	for _, v := range s.Writes {
		n += v
	}
	for _, v := range s.LanceMaint {
		n += v
	}
	for _, v := range s.Daemon {
		n += v
	}
	return n
}

// races: commits that lost to another writer and were retried or given
// up on.
func (s Stats) races() int {
	n := 0
	for k, v := range s.Jobs {
		if strings.HasSuffix(k, "/failed") {
			n += v
		}
	}
	for k, v := range s.Daemon {
		if strings.HasSuffix(k, "/retry") {
			n += v
		}
	}
	return n
}

func (s Stats) String() string {
	return fmt.Sprintf("%d operations, %d races; LanceDB wrote %v, maintained %v (%d refused; longest in flight %v), CLI jobs %v, daemon jobs %v, %d observations (%d saw a catch-up record withdrawn), %d generations merged, %d violations",
		s.ops(), s.races(), s.Writes, s.LanceMaint, s.WriterFailed, s.LongestLanceTxn, s.Jobs, s.Daemon, s.Observations, s.CatchupWithdrawn, s.Merged, s.Violations)
}

type tab struct {
	spec  tableSpec
	dir   string
	url   string
	b     storage.Bucket
	prior map[int64]string
	// fixtureCompacted is zero: the fixture merges nothing.
	mu sync.Mutex
	// What compactord's `table append` wrote: acknowledged, or failed
	// (which may or may not have landed).
	appended, maybe map[int64]string
	// The observer's last reading.
	lastVersion   uint64
	lastCompacted map[string]uint64
	lastWAL       map[string][]uint64
	lastFloor     map[string]uint64
	// maxFloor: shard → the highest floor of any version read: trim may
	// have deleted the generations up to it.
	maxFloor map[string]uint64
	// cleanVersion: the last version the observer scanned without a key
	// twice; dupSeen: a duplicate was reported.
	cleanVersion uint64
	dupSeen      bool
	// indexClean: the last version whose indexes agreed with its scan;
	// indexBad: a disagreement was reported (once, with its diagnosis).
	indexClean uint64
	indexBad   bool
}

func (tb *tab) raiseFloor(m model.MemWAL) {
	for shard := range m.Compacted {
		tb.maxFloor[shard] = max(tb.maxFloor[shard], m.Floor(shard))
	}
}

// raiseFloorFromHistory raises the floors seen by every version still on
// disk. A version removed by a cleanup meanwhile is skipped.
func (tb *tab) raiseFloorFromHistory(ctx context.Context) error {
	vs, naming, err := meta.ListVersions(ctx, tb.b)
	if err != nil {
		return err
	}
	for _, v := range vs {
		f, err := meta.ReadVersion(ctx, tb.b, naming, v)
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		m, err := model.MemWALOf(f)
		if err != nil {
			return err
		}
		tb.raiseFloor(m)
	}
	return nil
}

type campaign struct {
	t    *testing.T
	seed uint64
	mode mode
	dir  string // file: the database directory
	// uri and opts are LanceDB's database URI and storage options;
	// discover the daemons' discover.url.
	uri      string
	opts     map[string]string
	discover string
	bin      string
	env      []string
	tabs     []*tab

	mu    sync.Mutex
	rng   *rand.Rand
	stats Stats
	fails []string // the first failed CLI jobs' messages
	// lanceFails: the first LanceDB operations refused, by op and error.
	lanceFails []string
	// damage, when set, is done to the first table by the first worker,
	// behind compactord's back, until it reports true: the tests proving
	// the checks fire set it, and violations are then logged, not
	// failures.
	damage  func(tb *tab) bool
	damaged bool
}

func newCampaign(t *testing.T, seed uint64, m mode) *campaign {
	lancedb.Require(t)
	c := &campaign{t: t, seed: seed, mode: m, rng: rand.New(rand.NewPCG(seed, 0xc0c0)),
		stats: Stats{Jobs: map[string]int{}, Daemon: map[string]int{}, Writes: map[string]int{}, LanceMaint: map[string]int{}}}
	var srv *s3server.Server
	var prefix string
	switch m.store {
	case "file":
		c.dir = t.TempDir()
		c.uri, c.discover = c.dir, "file://"+c.dir
	case "s3":
		// SharedS3 sets the AWS variables the CLI workers inherit: before
		// compactord() takes the environment.
		srv, prefix = stores.SharedS3(t), stores.UniqueName(t)
		c.uri, c.opts = lancedb.S3(srv, prefix)
		c.discover = srv.URL(prefix)
	default:
		t.Fatalf("unknown store %q", m.store)
	}
	c.bin, c.env = compactord()
	var steps []lancedb.Step
	for _, sp := range tableSpecs {
		maintained := []string{}
		if sp.maintained {
			maintained = []string{"id_idx"}
		}
		base := lancedb.BasicRows(0, 20)
		first := lancedb.TaggedRows(lsmKeyMin, lsmKeyMin+10, "g1-")
		steps = append(steps, lancedb.Create(lancedb.BasicSchema, base).On(sp.name), lancedb.CreateIndex("id", "btree", "id_idx").On(sp.name),
			lancedb.CreateIndex("cat", "bitmap", "cat_idx").On(sp.name), lancedb.SetPrimaryKey("id").On(sp.name),
			lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "bucket", Column: "id", NumBuckets: sp.shards, MaintainedIndexes: maintained}).On(sp.name),
			lancedb.MergeInsert("id", first).On(sp.name), lancedb.CloseLsmWriters().On(sp.name))
		prior, _ := lancedb.RowsByID(base)
		p2, _ := lancedb.RowsByID(first)
		maps.Copy(prior, p2)
		var dir, url string
		if m.store == "file" {
			dir = filepath.Join(c.dir, sp.name+".lance")
			url = "file://" + dir
		} else {
			url = srv.URL(prefix + "/" + sp.name + ".lance")
		}
		c.tabs = append(c.tabs, &tab{spec: sp, dir: dir, url: url, prior: prior, appended: map[int64]string{}, maybe: map[int64]string{},
			lastCompacted: map[string]uint64{}, lastWAL: map[string][]uint64{}, lastFloor: map[string]uint64{}, maxFloor: map[string]uint64{}})
	}
	lancedb.MustRun(t, lancedb.Program{URI: c.uri, StorageOptions: c.opts, Steps: steps})
	for _, tb := range c.tabs {
		b, err := storage.Open(context.Background(), tb.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		tb.b = b
	}
	return c
}

func (c *campaign) violation(format string, args ...any) {
	c.t.Helper()
	c.mu.Lock()
	c.stats.Violations++
	c.mu.Unlock()
	if c.damage != nil {
		c.t.Logf("seed %d: violation (expected: this test damages the table or provokes the race): %s", c.seed, fmt.Sprintf(format, args...))
		return
	}
	c.t.Errorf("seed %d: violation: %s", c.seed, fmt.Sprintf(format, args...))
}

func (c *campaign) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// run runs compactord with args; the error carries its stderr.
func (c *campaign) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("compactord %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// worker runs random CLI jobs on random tables until ctx ends.
func (c *campaign) worker(ctx context.Context, w int) {
	seq := 0
	for ctx.Err() == nil {
		if w == 0 && c.damage != nil && !c.damaged {
			c.damaged = c.damage(c.tabs[0])
		}
		tb := c.tabs[c.intn(len(c.tabs))]
		var args []string
		kinds := []string{"merge", "merge", "catchup", "trim", "cleanup", "append", "compact", "remap", "delete"}
		kind := kinds[c.intn(len(kinds))]
		var rows map[int64]string
		var deleting []int64
		if kind == "delete" {
			// A range of this worker's own appended keys (no other writer
			// writes them), so whether each must be live afterwards is
			// known.
			lo := int64(appendKeys + w*1_000_000 + 1 + c.intn(max(seq, 1)))
			hi := lo + int64(c.intn(4))
			tb.mu.Lock()
			for k := range tb.appended {
				if k >= lo && k <= hi {
					deleting = append(deleting, k)
				}
			}
			for k := range tb.maybe {
				if k >= lo && k <= hi {
					deleting = append(deleting, k)
				}
			}
			tb.mu.Unlock()
			if len(deleting) == 0 {
				kind = "append"
			} else {
				args = []string{"table", "delete", tb.url, "--where", fmt.Sprintf("id >= %d AND id <= %d", lo, hi)}
			}
		}
		switch kind {
		case "merge":
			args = []string{"merge", tb.url}
			if n := c.intn(3); n > 0 {
				args = append(args, "--max-generations", fmt.Sprint(n))
			}
		case "catchup":
			args = []string{"index", "catchup", tb.url}
		case "compact":
			args = []string{"compact", tb.url, fmt.Sprintf("--defer-remap=%v", c.mode.deferRemap)}
		case "remap":
			args = []string{"index", "remap", tb.url}
		case "trim":
			args = []string{"trim", tb.url, "--reader-grace", "0s", "--keep-shard-manifests", "2"}
		case "cleanup":
			// Young unreferenced files are a writer's commit in flight:
			// --min-age keeps them.
			args = []string{"cleanup", tb.url, "--retain-versions", fmt.Sprint(1 + c.intn(3)), "--older-than", versionWindow.String(), "--min-age", "30s"}
		case "append":
			rows = map[int64]string{}
			var buf bytes.Buffer
			for range 1 + c.intn(3) {
				seq++
				k := int64(appendKeys + w*1_000_000 + seq)
				rows[k] = fmt.Sprintf("cli%d-%d", w, seq)
				fmt.Fprintf(&buf, `{"id":%d,"s":%q,"cat":%d,"f":%v}`+"\n", k, rows[k], k%4, float64(k)/2)
			}
			f := filepath.Join(c.t.TempDir(), "rows.jsonl")
			if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
				c.t.Error(err)
				return
			}
			args = []string{"table", "append", tb.url, "--jsonl", f}
		}
		_, err := c.run(context.Background(), args...)
		if err != nil && !retryable(err) {
			c.violation("a CLI job failed for another reason than a lost race: %v", err)
		}
		c.mu.Lock()
		if err != nil {
			c.stats.Jobs[kind+"/failed"]++
			if len(c.fails) < 5 {
				c.fails = append(c.fails, err.Error())
			}
		} else {
			c.stats.Jobs[kind+"/ok"]++
		}
		c.mu.Unlock()
		if kind == "delete" {
			tb.mu.Lock()
			for _, k := range deleting {
				if err != nil {
					// A failed delete may still have committed.
					if v, ok := tb.appended[k]; ok {
						tb.maybe[k] = v
					}
				} else {
					delete(tb.maybe, k)
				}
				delete(tb.appended, k)
			}
			tb.mu.Unlock()
		}
		if rows != nil {
			tb.mu.Lock()
			if err == nil {
				maps.Copy(tb.appended, rows)
			} else {
				// A failed append may still have committed.
				maps.Copy(tb.maybe, rows)
			}
			tb.mu.Unlock()
		}
	}
}

// startDaemon runs a daemon over the database directory until ctx ends.
func (c *campaign) startDaemon(ctx context.Context, i int) (*daemon.Daemon, <-chan error) {
	cfg := daemon.DefaultConfig()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Scheduler.Lease.Enabled = false // both daemons run every job: they race
	cfg.Scheduler.ShutdownGrace = 10 * time.Second
	cfg.Discover.URL = c.discover
	cfg.Discover.Interval = time.Second
	if c.mode.store == "s3" {
		// A discovery lists every key under the prefix; versitygw walks
		// its directories to answer, and two daemons doing so every
		// second starve everything else. The tables exist before the
		// daemons start, and the first discovery runs at once.
		cfg.Discover.Interval = time.Minute
	}
	cfg.Scheduler.PollInterval = 200 * time.Millisecond
	cfg.Scheduler.SyncInterval = time.Second
	cfg.Scheduler.Schedule = scheduler.Schedules{Merge: "@every 3s", Compact: "@every 2s", Index: "@every 2s", Trim: "@every 1s", Cleanup: "@every 2s"}
	cfg.Jobs.Merge.MaxGenerations = 1 + i
	cfg.Jobs.Compact.InlineRemap = !c.mode.deferRemap
	cfg.Scheduler.Retry.BaseBackoff = 50 * time.Millisecond
	cfg.Scheduler.Retry.MaxBackoff = 500 * time.Millisecond
	cfg.Jobs.Trim.ReaderGrace = time.Duration(i) * time.Second
	cfg.Jobs.Cleanup.RetainVersions = 2
	cfg.Jobs.Cleanup.OlderThan = versionWindow
	cfg.Jobs.Cleanup.MinAge = 30 * time.Second
	// Below the floor on purpose: the campaign races cleanup against
	// LanceDB's writers, whose transactions it knows to be short (see
	// versionWindow), and a deleted file of theirs is a violation.
	cfg.Jobs.Cleanup.AllowDeletingInFlightWrites = true
	d, err := daemon.New(cfg, daemon.Deps{Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return d, done
}

func (c *campaign) daemonRuns(d *daemon.Daemon) {
	mfs, err := d.Registry().Gather()
	if err != nil {
		c.t.Error(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, mf := range mfs {
		if mf.GetName() != "compactord_job_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if n := int(m.GetCounter().GetValue()); n > 0 {
				c.stats.Daemon[l["kind"]+"/"+l["result"]] += n
			}
		}
	}
}

// round writes for dur while the daemons and CLI workers maintain the
// tables and the observer checks them, then drains and checks the end
// state.
func (c *campaign) round(dur time.Duration) {
	t := c.t
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var ds []*daemon.Daemon
	var dones []<-chan error
	for i := range daemons {
		d, done := c.startDaemon(ctx, i)
		ds, dones = append(ds, d), append(dones, done)
	}
	var lsmW, plainW []*lancedb.Writer
	for i, tb := range c.tabs {
		lsmW = append(lsmW, lancedb.StartWriter(t, lancedb.WriterOpts{URI: c.uri, StorageOptions: c.opts, Table: tb.spec.name, Duration: dur, KeyMin: lsmKeyMin, KeyMax: lsmKeyMax,
			ID: "lsm" + tb.spec.name, Seed: uint32(c.seed) + uint32(2*i), Weights: map[string]int{"lsmMerge": 1}, CloseEvery: 2}))
		weights := map[string]int{"append": 3, "delete": 2, "merge": 1}
		maps.Copy(weights, c.mode.lanceMaint)
		plainW = append(plainW, lancedb.StartWriter(t, lancedb.WriterOpts{URI: c.uri, StorageOptions: c.opts, Table: tb.spec.name, Duration: dur, KeyMin: plainKeyMin, KeyMax: plainKeyMax,
			ID: "plain" + tb.spec.name, Seed: uint32(c.seed) + uint32(2*i+1), Weights: weights, Indexes: lanceIndexes}))
	}
	wctx, wstop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range cliWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); c.worker(wctx, w) }()
	}
	// One observer per table: on S3 a reading takes seconds.
	for _, tb := range c.tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				c.observe(tb)
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	var lsmOps, plainOps [][]lancedb.WriterOp
	for i := range c.tabs {
		<-lsmW[i].Done()
		<-plainW[i].Done()
		lo, err := lsmW[i].Stop()
		if err != nil {
			c.violation("table %s: LanceDB's MemWAL writer: %v", c.tabs[i].spec.name, err)
		}
		po, err := plainW[i].Stop()
		if err != nil {
			c.violation("table %s: LanceDB's plain writer: %v", c.tabs[i].spec.name, err)
		}
		lsmOps, plainOps = append(lsmOps, lo), append(plainOps, po)
	}
	wstop()
	wg.Wait()
	stop()
	for i, d := range ds {
		if err := <-dones[i]; err != nil && !errors.Is(err, context.Canceled) {
			c.violation("daemon %d: %v", i, err)
		}
		c.daemonRuns(d)
		for _, tb := range c.tabs {
			ts, _ := d.Scheduler().Table(tb.spec.name)
			for _, rec := range ts.Recent {
				if rec.Result == "error" {
					c.violation("daemon %d: table %s: %s attempt %d failed for another reason than a lost race: %s", i, tb.spec.name, rec.Kind, rec.ID, rec.Error)
				}
			}
			if ts.Halted != nil {
				c.violation("daemon %d quarantined table %s: %+v", i, tb.spec.name, ts.Halted)
			}
		}
		d.Close()
	}
	for i := range c.tabs {
		for _, ops := range [][]lancedb.WriterOp{lsmOps[i], plainOps[i]} {
			// A second of slack: the version a writer read was committed
			// a little before the acknowledgement the span starts from.
			if op, span := longestInFlight(ops); span+time.Second >= versionWindow {
				c.violation("table %s: LanceDB's %s (acknowledged at version %d) was in flight for %v, longer than the campaign's cleanup window of %v: a cleanup may have removed a version its conflict check needed, so the campaign proves nothing about it; raise versionWindow",
					c.tabs[i].spec.name, op.Op, op.Version, span, versionWindow)
			} else {
				c.stats.LongestLanceTxn = max(c.stats.LongestLanceTxn, span)
			}
		}
		for _, op := range append(lancedb.Acknowledged(lsmOps[i]), lancedb.Acknowledged(plainOps[i])...) {
			c.stats.Writes[op.Op]++
		}
		c.stats.WriterFailed += len(lancedb.Failed(lsmOps[i])) + len(lancedb.Failed(plainOps[i]))
		for _, op := range append(lancedb.Failed(lsmOps[i]), lancedb.Failed(plainOps[i])...) {
			if len(c.lanceFails) < 5 {
				c.lanceFails = append(c.lanceFails, fmt.Sprintf("%s on %s: %s", op.Op, c.tabs[i].spec.name, op.Error))
			}
		}
		for _, op := range lancedb.Maintenance(plainOps[i]) {
			c.stats.LanceMaint[op.Op]++
			// The harness relies on optimize's prune deleting nothing that
			// compactord or the other writers may still read.
			if op.PrunedVersions != 0 || op.PrunedBytes != 0 {
				c.violation("table %s: LanceDB's optimize pruned %d versions (%d bytes) at version %d", c.tabs[i].spec.name, op.PrunedVersions, op.PrunedBytes, op.Version)
			}
		}
	}
	drained := time.Now()
	c.drainAndCheck(lsmOps, plainOps)
	t.Logf("the drain and the end-state checks took %v", time.Since(drained).Round(time.Millisecond))
}

// longestInFlight is the acknowledged LanceDB operation of one writer that
// was in flight longest, and for how long. A writer's table handle reads
// the version its previous operation left (or a newer one), so an
// operation's transaction is in flight at most from the previous line of
// the writer's log to its own. A refused operation committed nothing, so
// no version it missed matters.
func longestInFlight(ops []lancedb.WriterOp) (lancedb.WriterOp, time.Duration) {
	var op lancedb.WriterOp
	var span time.Duration
	for i := 1; i < len(ops); i++ {
		if ops[i].Failed {
			continue
		}
		if d := time.Duration(ops[i].TS-ops[i-1].TS) * time.Millisecond; d > span {
			op, span = ops[i], d
		}
	}
	return op, span
}

// drainAndCheck runs every job to completion on each table, then checks
// the end state against the writers' acknowledged operations.
func (c *campaign) drainAndCheck(lsmOps, plainOps [][]lancedb.WriterOp) {
	t := c.t
	t.Helper()
	ctx := context.Background()
	for _, tb := range c.tabs {
		for _, args := range [][]string{{"merge", tb.url}, {"compact", tb.url, fmt.Sprintf("--defer-remap=%v", c.mode.deferRemap)}, {"index", "remap", tb.url}, {"index", "catchup", tb.url}, {"trim", tb.url, "--reader-grace", "0s", "--keep-shard-manifests", "2"},
			{"cleanup", tb.url, "--retain-versions", "1", "--older-than", "0s", "--min-age", "0s"}} {
			if _, err := c.run(ctx, args...); err != nil {
				c.violation("table %s: the drain: %v", tb.spec.name, err)
			}
		}
	}
	// compactord's scan first: the indexes it finds (LanceDB's createIndex
	// adds some) are those LanceDB is asked about.
	snaps := make([]*model.Snapshot, len(c.tabs))
	names := make([][]string, len(c.tabs))
	for i, tb := range c.tabs {
		snap, err := model.ReadSnapshot(ctx, tb.b, 0)
		if err != nil {
			c.violation("table %s: compactord's scan after the drain: %v", tb.spec.name, err)
			continue
		}
		snaps[i], names[i] = snap, scalarIndexNames(snap.File)
	}
	var steps []lancedb.Step
	type at struct{ rows, stats, counts int }
	pos := make([]at, len(c.tabs))
	for i, tb := range c.tabs {
		n := tb.spec.name
		pos[i].rows = len(steps)
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(n), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(n))
		pos[i].stats = len(steps)
		for _, name := range names[i] {
			steps = append(steps, lancedb.IndexStats(name).On(n))
		}
		pos[i].counts = len(steps)
		for _, p := range indexPredicates {
			steps = append(steps, lancedb.CountRows(p.where).On(n))
		}
	}
	res, err := lancedb.Run(t, lancedb.Program{URI: c.uri, StorageOptions: c.opts, Steps: steps})
	if err != nil {
		c.violation("LanceDB reads the tables after the drain: %v", err)
		return
	}
	for i, tb := range c.tabs {
		n := tb.spec.name
		want := lancedb.Expected(tb.prior, lsmOps[i])
		maps.Copy(want, lancedb.Expected(nil, plainOps[i]))
		maps.Copy(want, tb.appended)
		var base []lancedb.Row
		for j, view := range []string{"LSM view", "base view"} {
			rows, err := res.Rows(pos[i].rows + j)
			if err != nil {
				c.violation("table %s: LanceDB's %s: %v", n, view, err)
				continue
			}
			if j == 1 {
				base = rows
			}
			got, err := lancedb.RowsByID(rows)
			if err != nil {
				c.violation("table %s: LanceDB's %s: %v", n, view, err) // a key twice
				continue
			}
			if d := c.diff(tb, got, want); d != "" {
				c.violation("table %s: LanceDB's %s vs the acknowledged writes:\n%s", n, view, d)
			}
		}
		for j, name := range names[i] {
			if st, err := res.IndexStats(pos[i].stats + j); err != nil || st == nil || st.NumUnindexedRows != 0 {
				c.violation("table %s: LanceDB's indexStats(%s) after the drain: %+v, %v", n, name, st, err)
			}
		}
		// Every row is indexed now, so LanceDB answers these filters
		// through the btree and bitmap indexes; its full scan must agree.
		if base != nil {
			for j, p := range indexPredicates {
				got, err := res.Count(pos[i].counts + j)
				if scan := p.count(base); err != nil || got != scan {
					c.violation("table %s: LanceDB counts %d rows where %s, its scan %d (%v)", n, got, p.where, scan, err)
				}
			}
		}
		snap := snaps[i]
		if snap == nil {
			continue
		}
		if d := c.diff(tb, snap.Rows, want); d != "" {
			c.violation("table %s: compactord's scan vs the acknowledged writes:\n%s", n, d)
		}
		if bad, err := model.CheckIndices(ctx, tb.b, snap); err != nil || len(bad) > 0 {
			c.violation("table %s: indexes after the drain: %v %v", n, err, bad)
		}
		for _, name := range names[i] {
			if u, err := model.Unindexed(ctx, tb.b, snap, name); err != nil || u > 0 {
				c.violation("table %s: %d rows outside %s after the drain (%v)", n, u, name, err)
			}
		}
		if !slices.Contains(names[i], "id_idx") || !slices.Contains(names[i], "cat_idx") {
			c.violation("table %s: the fixture's indexes are gone after the drain: %v", n, names[i])
		}
		if rep, err := verify.Run(ctx, tb.b, verify.Options{Deep: true, IndexContent: index.ContentChecker}); err != nil || !rep.OK() {
			c.violation("table %s: verify after the drain: %v %+v", n, err, rep)
		}
		c.checkDrained(tb, snap)
	}
}

// scalarIndexNames: the btree and bitmap indexes of a version, by name.
func scalarIndexNames(f *meta.ManifestFile) []string {
	var out []string
	for _, ix := range f.Indices {
		if k := meta.IndexKind(ix); meta.IsSystemIndex(ix) || (k != index.KindBTree && k != index.KindBitmap) || slices.Contains(out, ix.GetName()) {
			continue
		}
		out = append(out, ix.GetName())
	}
	slices.Sort(out)
	return out
}

// indexPredicate is a filter LanceDB answers through the campaign's
// indexes (on id and cat), and the same filter on a row it read.
type indexPredicate struct {
	where string
	match func(id, cat int64) bool
}

func (p indexPredicate) count(rows []lancedb.Row) int64 {
	var n int64
	for _, r := range rows {
		id, _ := r.Int("id")
		cat, _ := r.Int("cat")
		if p.match(id, cat) {
			n++
		}
	}
	return n
}

// indexPredicates cover each writer's keys: the fixture's (cat = id % 4),
// LanceDB's writers' (cat = id) and compactord's appends (cat = id % 4).
var indexPredicates = []indexPredicate{
	{"cat = 0", func(_, c int64) bool { return c == 0 }},
	{"cat = 3", func(_, c int64) bool { return c == 3 }},
	{"cat < 4", func(_, c int64) bool { return c < 4 }},
	{"cat = 150", func(_, c int64) bool { return c == 150 }},
	{"cat >= 1000 AND cat < 1050", func(_, c int64) bool { return c >= 1000 && c < 1050 }},
	{"id >= 100 AND id <= 150", func(id, _ int64) bool { return id >= 100 && id <= 150 }},
	{"id IN (3, 105, 160, 1010, 1099)", func(id, _ int64) bool { return slices.Contains([]int64{3, 105, 160, 1010, 1099}, id) }},
	{"id > 1050", func(id, _ int64) bool { return id > 1050 }},
}

// diff is lancedb.DiffByID, where a key of a failed compactord append may
// be present (with its value) or absent.
func (c *campaign) diff(tb *tab, got, want map[int64]string) string {
	got = maps.Clone(got)
	for k, v := range tb.maybe {
		if got[k] == v {
			delete(got, k)
		}
	}
	return lancedb.DiffByID(got, want)
}

// checkDrained: every flushed generation merged, every maintained index
// caught up to it, and the merged, caught-up generations deleted.
func (c *campaign) checkDrained(tb *tab, snap *model.Snapshot) {
	ctx := context.Background()
	mw, err := model.MemWALOf(snap.File)
	if err != nil {
		c.violation("table %s: %v", tb.spec.name, err)
		return
	}
	ids, err := memwal.ListShards(ctx, tb.b)
	if err != nil {
		c.violation("table %s: %v", tb.spec.name, err)
		return
	}
	for _, id := range ids {
		ss, err := memwal.ReadShard(ctx, tb.b, id)
		if err != nil || ss.Manifest == nil {
			c.violation("table %s shard %s: %v", tb.spec.name, id, err)
			continue
		}
		top := ss.Manifest.GetCurrentGeneration() - 1
		if mw.Compacted[id] != top || mw.Floor(id) != top {
			c.violation("table %s shard %s: flushed up to %d, merged %d, caught up (maintained %v) %d after the drain", tb.spec.name, id, top, mw.Compacted[id], mw.Maintained, mw.Floor(id))
		}
		c.stats.Merged += mw.Compacted[id]
		err = tb.b.List(ctx, memwal.ShardDir(id), func(a storage.Attrs) error {
			rest := strings.TrimPrefix(a.Key, memwal.ShardDir(id))
			dir, _, _ := strings.Cut(rest, "/")
			if g, ok := memwal.ParseGenerationDir(dir); ok && g <= mw.Floor(id) {
				return fmt.Errorf("generation %d is merged and caught up but %s is still there", g, a.Key)
			}
			return nil
		})
		if err != nil {
			c.violation("table %s shard %s after the drain: %v", tb.spec.name, id, err)
		}
	}
}

// retryable: a job that lost a commit race to another writer (LanceDB,
// the daemons, the other CLI workers) and gave up after its attempts; it
// changed nothing and a later run does the work.
//
// A compaction with inline remap also refuses, changing nothing, while a
// deferred compaction's fragment-reuse versions are not absorbed into
// every index (lance/compact): the remap jobs absorb them.
func retryable(err error) bool {
	m := err.Error()
	return strings.Contains(m, "retryable") || strings.Contains(m, "lost to another") ||
		strings.Contains(m, "fragment-reuse versions it has not absorbed")
}

// stillThere reports whether version v is still on disk.
func stillThere(ctx context.Context, b storage.Bucket, v uint64) bool {
	vs, _, err := meta.ListVersions(ctx, b)
	return err != nil || slices.Contains(vs, v)
}

// observe checks what must hold at every instant (see the package doc).
func (c *campaign) observe(tb *tab) {
	ctx := context.Background()
	n := tb.spec.name
	c.mu.Lock()
	c.stats.Observations++
	c.mu.Unlock()
	f1, _, err := meta.ReadLatest(ctx, tb.b)
	if err != nil {
		c.violation("table %s: read the latest version: %v", n, err)
		return
	}
	v := f1.Manifest.GetVersion()
	mw1, err := model.MemWALOf(f1)
	if err != nil {
		c.violation("table %s version %d: the MemWAL index: %v", n, v, err)
		return
	}
	if v < tb.lastVersion {
		c.violation("table %s: the latest version went back from %d to %d", n, tb.lastVersion, v)
	}
	for shard, was := range tb.lastCompacted {
		if mw1.Compacted[shard] < was {
			c.violation("table %s shard %s: merged position went back from %d to %d (version %d)", n, shard, was, mw1.Compacted[shard], v)
		}
	}
	for name, per := range mw1.Catchup {
		for shard, g := range per {
			if g > mw1.Compacted[shard] {
				c.violation("table %s version %d: %s caught up to generation %d of shard %s, above its merged position %d", n, v, name, g, shard, mw1.Compacted[shard])
			}
		}
	}
	// The floor (min(merged, catch-up of the maintained indexes)) is not
	// monotone: LanceDB 0.39's delete commit drops the MemWAL index's
	// catch-up records. Trim may have deleted up to the highest floor of
	// any version since the last reading: read those still on disk.
	vs, naming, err := meta.ListVersions(ctx, tb.b)
	if err != nil {
		c.violation("table %s: list versions: %v", n, err)
		return
	}
	for _, pv := range vs {
		if pv <= tb.lastVersion || pv >= v {
			continue
		}
		if f, err := meta.ReadVersion(ctx, tb.b, naming, pv); err == nil {
			if m, err := model.MemWALOf(f); err == nil {
				tb.raiseFloor(m)
			}
		}
	}
	for shard := range mw1.Compacted {
		if mw1.Floor(shard) < tb.maxFloor[shard] && tb.lastFloor[shard] > mw1.Floor(shard) {
			c.mu.Lock()
			c.stats.CatchupWithdrawn++
			c.mu.Unlock()
		}
		tb.lastFloor[shard] = mw1.Floor(shard)
	}
	tb.raiseFloor(mw1)
	tb.lastVersion, tb.lastCompacted = v, maps.Clone(mw1.Compacted)

	// Generations and WAL entries: a file found gone is a violation only
	// if it is still needed after a second reading (a trim that ran in
	// between may have deleted it legitimately).
	ids, err := memwal.ListShards(ctx, tb.b)
	if err != nil {
		c.violation("table %s: list shards: %v", n, err)
		return
	}
	type gone struct {
		shard string
		gen   uint64
	}
	var lost []gone
	wal := map[string]map[uint64]bool{}
	for _, id := range ids {
		ss, err := memwal.ReadShard(ctx, tb.b, id)
		if err != nil || ss.Manifest == nil {
			c.violation("table %s shard %s: %v", n, id, err)
			continue
		}
		for _, st := range ss.Manifest.GetSstables() {
			if st.GetGeneration() <= mw1.Floor(id) {
				continue
			}
			found := false
			err := tb.b.List(ctx, memwal.GenerationDir(id, st.GetPath())+meta.VersionsDir, func(storage.Attrs) error { found = true; return nil })
			if err != nil || !found {
				lost = append(lost, gone{id, st.GetGeneration()})
			}
		}
		ps, err := memwal.ListWAL(ctx, tb.b, id)
		if err != nil {
			c.violation("table %s shard %s: list the WAL: %v", n, id, err)
			continue
		}
		wal[id] = map[uint64]bool{}
		for _, p := range ps {
			wal[id][p] = true
		}
	}
	if len(lost) > 0 {
		f2, _, err := meta.ReadLatest(ctx, tb.b)
		var mw2 model.MemWAL
		if err == nil {
			mw2, err = model.MemWALOf(f2)
		}
		if err != nil {
			c.violation("table %s: read the latest version again: %v", n, err)
			return
		}
		tb.raiseFloor(mw2)
		// The observer samples versions: a floor raised and withdrawn
		// again between two readings (a LanceDB createIndex replacing a
		// maintained index withdraws its position until a commit proves
		// it again) is seen only in the versions still on disk.
		if err := tb.raiseFloorFromHistory(ctx); err != nil {
			c.violation("table %s: read the versions on disk: %v", n, err)
			return
		}
		for _, g := range lost {
			if g.gen > mw2.Compacted[g.shard] || g.gen > tb.maxFloor[g.shard] {
				c.mu.Lock()
				c.stats.LostGenerations++
				c.mu.Unlock()
			}
			switch {
			case g.gen > mw2.Compacted[g.shard]:
				c.violation("table %s shard %s: generation %d lost its manifest while the LSM view still reads it (merged %d at version %d)",
					n, g.shard, g.gen, mw2.Compacted[g.shard], f2.Manifest.GetVersion())
			case g.gen > tb.maxFloor[g.shard]:
				c.violation("table %s shard %s: generation %d lost its manifest before every maintained index caught up to it (highest floor seen %d, merged %d at version %d)",
					n, g.shard, g.gen, tb.maxFloor[g.shard], mw2.Compacted[g.shard], f2.Manifest.GetVersion())
			}
		}
	}
	for id, prev := range tb.lastWAL {
		var missing []uint64
		for _, p := range prev {
			if !wal[id][p] {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			continue
		}
		ss, err := memwal.ReadShard(ctx, tb.b, id)
		if err != nil || ss.Manifest == nil {
			continue
		}
		cursor := ss.Manifest.GetReplayAfterWalEntryPosition()
		for _, p := range missing {
			if p > cursor {
				c.violation("table %s shard %s: WAL entry %d deleted above the replay cursor %d", n, id, p, cursor)
			}
		}
	}
	tb.lastWAL = map[string][]uint64{}
	for id, ps := range wal {
		tb.lastWAL[id] = slices.Sorted(maps.Keys(ps))
	}

	// The base of version v: no key twice, indexes agree with it, verify
	// clean, unless a cleanup removed the version meanwhile.
	snap, err := model.ReadSnapshot(ctx, tb.b, v)
	if err != nil {
		var dup int64
		if _, perr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "key ")+4:], "%d is live twice", &dup); perr == nil && strings.Contains(err.Error(), "live twice") {
			if tb.dupSeen {
				return // reported once, with its diagnosis
			}
			tb.dupSeen = true
			c.violation("table %s: scan version %d: %v; %s", n, v, err, diagnoseDup(ctx, tb.b, tb.cleanVersion, v, dup))
			return
		}
		if stillThere(ctx, tb.b, v) {
			c.violation("table %s: scan version %d: %v", n, v, err)
		}
		return
	}
	tb.cleanVersion = v
	for k := range snap.Rows {
		if !(k < 20 || k >= lsmKeyMin && k <= lsmKeyMax || k >= plainKeyMin && k <= plainKeyMax || k >= appendKeys) {
			c.violation("table %s version %d: key %d was never written", n, v, k)
		}
	}
	bad, err := model.CheckIndices(ctx, tb.b, snap)
	if (err != nil || len(bad) > 0) && stillThere(ctx, tb.b, v) {
		if !tb.indexBad {
			tb.indexBad = true
			c.violation("table %s version %d: indexes: %v %v; %s", n, v, err, bad, diagnoseIndex(ctx, tb.b, tb.indexClean, v))
		}
	} else if err == nil {
		tb.indexClean = v
	}
	// verify reads a shard manifest and then lists the WAL; a trim between
	// the two (of entries a newer cursor covers) looks like a gap. A
	// violation counts when a second run finds it too (the WAL rule itself
	// is checked race-free above).
	rep, err := verify.Run(ctx, tb.b, verify.Options{Version: v})
	if (err != nil || !rep.OK()) && stillThere(ctx, tb.b, v) {
		rep2, err2 := verify.Run(ctx, tb.b, verify.Options{Version: v})
		if (err2 != nil || !rep2.OK()) && stillThere(ctx, tb.b, v) {
			c.violation("table %s version %d: verify (twice): %v %+v; %v %+v", n, v, err, rep, err2, rep2)
		}
	}
}

// seed is $COMPACTORD_CAMPAIGN_SEED, to replay the choices of a logged
// round (the interleaving still depends on timing), else one from the
// clock.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("COMPACTORD_CAMPAIGN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COMPACTORD_CAMPAIGN_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano()) % 1_000_000_000
}

// writeDuration is how long LanceDB writes on store in
// TestLanceConcurrency: $COMPACTORD_LANCE_CONCURRENCY_DURATION, else 10 s
// on file:// and 7 s on S3, whose round spends longer setting up and
// draining (the two run in parallel; the S3 round sets the test's length).
func writeDuration(t *testing.T, store string) time.Duration {
	if s := os.Getenv("COMPACTORD_LANCE_CONCURRENCY_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("COMPACTORD_LANCE_CONCURRENCY_DURATION: %v", err)
		}
		return d
	}
	if store == "s3" {
		return 7 * time.Second
	}
	return 10 * time.Second
}

// TestLanceConcurrency runs one round on each store (file://, and S3
// through versitygw): LanceDB writers on two tables (2 and 3 shards,
// id_idx maintained on the first), calling LanceDB's optimize and
// createIndex among their writes, against two daemons and two CLI
// workers, the observer checking throughout, then the drain and the
// end-state checks.
func TestLanceConcurrency(t *testing.T) {
	for _, store := range campaignStores(t) {
		t.Run(store, func(t *testing.T) {
			// In parallel: an S3 round spends most of its time waiting on
			// the gateway, and the two together stay within make test's
			// budget.
			t.Parallel()
			s := seed(t)
			m := defaultMode(t, store)
			c := newCampaign(t, s, m)
			c.round(writeDuration(t, store))
			t.Logf("seed %d (%s): %s", s, m, c.stats)
			for _, f := range c.fails {
				t.Logf("a failed CLI job: %.400s", f)
			}
			for _, f := range c.lanceFails {
				t.Logf("a refused LanceDB operation: %.400s", f)
			}
			// S3 under load gets through a few MemWAL merges in its 7 s.
			if least := map[string]int{"file": 5, "s3": 2}[store]; c.stats.Writes["lsmMerge"] < least || c.stats.Writes["delete"] == 0 {
				t.Errorf("LanceDB wrote too little: %v", c.stats.Writes)
			}
			for k, w := range m.lanceMaint {
				if w > 0 && c.stats.LanceMaint[k] == 0 {
					t.Errorf("LanceDB's %s never succeeded: %s", k, c.stats)
				}
			}
			if c.stats.Merged == 0 || c.stats.Jobs["merge/ok"]+c.stats.Daemon["merge/success"] == 0 {
				t.Errorf("nothing merged: %s", c.stats)
			}
		})
	}
}

// TestLanceConcurrencyCatchesDamage proves the observer fires: an
// unmerged generation deleted behind compactord's back mid-run is a
// violation.
func TestLanceConcurrencyCatchesDamage(t *testing.T) {
	c := newCampaign(t, seed(t), defaultMode(t, "file"))
	// A generation damaged while a merge that already read it is in
	// flight is legitimately merged, not lost: damage another, a second
	// apart, until the observer has noticed one.
	var last time.Time
	damaged := false
	c.damage = func(tb *tab) bool {
		c.mu.Lock()
		noticed := c.stats.LostGenerations > 0
		c.mu.Unlock()
		if noticed {
			return true
		}
		if damaged && time.Since(last) < time.Second {
			return false
		}
		if damageUnmerged(tb) {
			damaged, last = true, time.Now()
		}
		return false
	}
	c.round(8 * time.Second)
	if !damaged {
		t.Fatal("no unmerged generation to damage during the round")
	}
	if c.stats.LostGenerations == 0 {
		t.Fatalf("the observer did not notice the lost generation: %s", c.stats)
	}
	t.Logf("%d violations after the damage: %s", c.stats.Violations, c.stats)
}

// damageUnmerged deletes the manifest (_versions) of one generation of
// tb not yet merged, behind compactord's back; false when there is none.
func damageUnmerged(tb *tab) bool {
	ctx := context.Background()
	f, _, err := meta.ReadLatest(ctx, tb.b)
	if err != nil {
		return false
	}
	mw, err := model.MemWALOf(f)
	if err != nil {
		return false
	}
	ids, _ := memwal.ListShards(ctx, tb.b)
	for _, id := range ids {
		ss, err := memwal.ReadShard(ctx, tb.b, id)
		if err != nil || ss.Manifest == nil {
			continue
		}
		for _, st := range ss.Manifest.GetSstables() {
			if st.GetGeneration() > mw.Compacted[id] {
				return os.RemoveAll(filepath.Join(tb.dir, memwal.GenerationDir(id, st.GetPath()), "_versions")) == nil
			}
		}
	}
	return false
}

// TestLanceConcurrencyCatchesDeferredRemap proves the campaign fails on
// the corruption it is there to catch: with compactord's compactions
// deferring their index remap to the fragment-reuse index, LanceDB's
// optimize (which remaps the btree through its own compaction's row map
// only) can leave index entries on addresses no fragment holds, and
// LanceDB's deletes and merge-inserts, which find rows through the index,
// then resurrect and duplicate keys. Besides the writers' own optimize
// calls, worker 0 runs, on the first table, a deferred compaction
// followed at once by LanceDB's optimize, again and again. The corruption
// needs an interleaving the campaign reaches by chance (in one 10-second
// round in two to five on file://, in most minute-long rounds), so the
// test runs fresh 30-second rounds until one reports a violation, for at
// most $COMPACTORD_LANCE_CONCURRENCY_PROOF_BUDGET (default 5m); it is
// opt-in (COMPACTORD_LANCE_CONCURRENCY_PROVE_DEFERRED=1) to keep make
// test short and deterministic.
func TestLanceConcurrencyCatchesDeferredRemap(t *testing.T) {
	if os.Getenv("COMPACTORD_LANCE_CONCURRENCY_PROVE_DEFERRED") != "1" {
		t.Skip("set COMPACTORD_LANCE_CONCURRENCY_PROVE_DEFERRED=1 to run")
	}
	budget := 5 * time.Minute
	if s := os.Getenv("COMPACTORD_LANCE_CONCURRENCY_PROOF_BUDGET"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("COMPACTORD_LANCE_CONCURRENCY_PROOF_BUDGET: %v", err)
		}
		budget = d
	}
	deadline := time.Now().Add(budget)
	stores := campaignStores(t)
	for round := 1; time.Now().Before(deadline); round++ {
		store := stores[(round-1)%len(stores)]
		var st Stats
		forced := 0
		t.Run(fmt.Sprintf("round=%d/%s", round, store), func(t *testing.T) {
			m := defaultMode(t, store)
			m.deferRemap = true
			c := newCampaign(t, seed(t), m)
			c.damage = func(tb *tab) bool {
				if _, err := c.run(context.Background(), "compact", tb.url, "--defer-remap=true"); err == nil {
					if _, err := lancedb.Run(t, lancedb.Program{URI: c.uri, StorageOptions: c.opts, Steps: []lancedb.Step{lancedb.Optimize(lancedb.OptimizeOpts{}).On(tb.spec.name)}}); err == nil {
						forced++
					}
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.stats.Violations > 0
			}
			c.round(30 * time.Second)
			st = c.stats
		})
		t.Logf("round %d (%s): %d forced deferred compactions followed by optimize; %s", round, store, forced, st)
		if st.Violations > 0 {
			return
		}
	}
	t.Fatalf("deferred remap raced with LanceDB's optimize for %v, and the campaign saw nothing", budget)
}

// ShareSoak is this campaign's share of COMPACTORD_SOAK (see
// model's ShareSoak).
const ShareSoak = 0.40

// TestSoakLanceConcurrency runs rounds of 2 minutes of writing (fresh
// tables each) for its share of COMPACTORD_SOAK (make soak DURATION=30m).
func TestSoakLanceConcurrency(t *testing.T) {
	budget, ok, err := faults.SoakBudget(ShareSoak)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := faults.SoakReport{Campaign: "concurrency"}
	// A round's drain and read-back take some seconds beyond its writing.
	for round := 1; time.Until(deadline) > 20*time.Second; round++ {
		dur := min(2*time.Minute, time.Until(deadline)-15*time.Second)
		var st Stats
		// The rounds alternate between the stores.
		stores := campaignStores(t)
		store := stores[(round-1)%len(stores)]
		t.Run(fmt.Sprintf("round=%d/%s", round, store), func(t *testing.T) {
			s := seed(t)
			m := defaultMode(t, store)
			c := newCampaign(t, s, m)
			c.round(dur)
			st = c.stats
			t.Logf("seed %d (%s), %v of writing: %s", s, m, dur.Round(time.Second), st)
		})
		sum.Runs++
		sum.Ops += st.ops()
		sum.Races += st.races()
		sum.Violations += st.Violations
		if st.Violations > 0 || t.Failed() {
			break
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Print(os.Stdout)
}
