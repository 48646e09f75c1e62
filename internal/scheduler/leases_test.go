package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
)

// faultSet collects the Faulty wrappers of one instance's buckets, so that a
// test can "kill" the instance: every operation fails from then on, and
// its leases are never released.
type faultSet struct {
	mu  sync.Mutex
	all []*faults.Faulty
}

func (f *faultSet) wrap(_ string, b storage.Bucket) storage.Bucket {
	fb := faults.NewFaulty(b)
	f.mu.Lock()
	f.all = append(f.all, fb)
	f.mu.Unlock()
	return fb
}

func (f *faultSet) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fb := range f.all {
		fb.Add(faults.Fault{Action: faults.Fail(nil)})
	}
}

func owned(h *harness) []string {
	var out []string
	for _, st := range h.s.Tables() {
		if st.Owned {
			out = append(out, st.Name)
		}
	}
	return out
}

// within polls cond for a short while: true when it holds.
func within(cond func() bool) bool {
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// leaseInstance starts one instance named holder over sp with leasing on
// and, when membersURL is set, membership there. f (optional) lets the test
// kill it; count (optional) counts its operations on every bucket.
func leaseInstance(t *testing.T, holder string, cfg scheduler.Config, clk *clock.Fake, jobs *fakeJobs, membersURL string, f *faultSet, count *opCounter, sp []scheduler.TableSpec) *harness {
	t.Helper()
	wrap := func(name string, b storage.Bucket) storage.Bucket {
		if count != nil {
			b = &countingBucket{Bucket: b, c: count}
		}
		if f != nil {
			b = f.wrap(name, b)
		}
		return b
	}
	var members storage.Bucket
	if membersURL != "" {
		mb, err := storage.Open(context.Background(), membersURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mb.Close() })
		members = wrap("members", mb)
	}
	return start(t, harnessOpts{cfg: cfg, clk: clk, jobs: jobs, wrap: wrap, deps: func(d *scheduler.Deps) {
		var err error
		if d.Leases, err = lease.NewManager(holder, cfg.Lease.TTL, clk); err != nil {
			t.Fatal(err)
		}
		if members != nil {
			if d.Members, err = lease.NewMembers(members, holder, cfg.Lease.TTL, clk); err != nil {
				t.Fatal(err)
			}
		}
	}}, sp...)
}

// parked waits until n timers are armed: every loop waits on the clock
// (harness.idle, with an attempt running).
func parked(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	eventually(t, "loops parked", func() bool { return clk.Timers() >= n })
}

func leaseConfig() scheduler.Config {
	cfg := testConfig()
	cfg.Lease = lease.Config{Enabled: true, TTL: 30 * time.Second, RenewInterval: 10 * time.Second}
	// Jobs held open over many lease rounds must not reach their budget.
	cfg.Timeouts.Default = time.Hour
	return cfg
}

// Two instances over one bucket split four tables through membership: each
// serves two, no job ever runs twice at once on a table, and when one
// instance dies its tables move to the other once its heartbeat expires,
// within about a TTL.
func TestTwoInstancesSplitTablesViaLeases(t *testing.T) {
	sp := specs(t, "t1", "t2", "t3", "t4")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs() // shared: counts overlap across both instances
	cfg := leaseConfig()
	cfg.Schedule.Merge = "@every 1s"
	cfg.Schedule.Compact = "@every 3s"

	fa := &faultSet{}
	a := leaseInstance(t, "a", cfg, clk, jobs, membersURL, fa, nil, sp)
	b := leaseInstance(t, "b", cfg, clk, jobs, membersURL, nil, nil, sp)

	split := false
	for range 20 {
		if within(func() bool { return len(owned(a)) == 2 && len(owned(b)) == 2 }) {
			split = true
			break
		}
		clk.Advance(cfg.Lease.RenewInterval)
	}
	if !split {
		t.Fatalf("tables not split: a owns %v, b owns %v", owned(a), owned(b))
	}
	for _, n := range []string{"t1", "t2", "t3", "t4"} {
		if stA, stB := a.status(n), b.status(n); stA.Owned == stB.Owned {
			t.Fatalf("%s owned by both or neither (a %v, b %v)", n, stA.Owned, stB.Owned)
		}
	}
	served := func() bool {
		for _, n := range []string{"t1", "t2", "t3", "t4"} {
			if jobs.count(n, "") == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 10 && !within(served); i++ {
		clk.Advance(time.Second)
	}
	if !served() {
		t.Fatal("not every table was served")
	}
	if perTable, _ := jobs.maxima(); perTable > 1 {
		t.Fatalf("%d jobs ran at once on one table across the instances", perTable)
	}

	// Kill a: its buckets fail from now on, so it can neither heartbeat
	// nor release its leases.
	aTables := owned(a)
	killed := clk.Now()
	fa.kill()
	_ = a.stop()
	took := false
	for range 20 {
		if within(func() bool { return len(owned(b)) == 4 }) {
			took = true
			break
		}
		clk.Advance(cfg.Lease.RenewInterval)
	}
	if !took {
		t.Fatalf("b did not take a's tables over: b owns %v", owned(b))
	}
	// a's last heartbeat is at most a round old at the kill: b must wait
	// for it to expire, and not much longer.
	if at := clk.Now().Sub(killed); at < cfg.Lease.TTL-cfg.Lease.RenewInterval || at > cfg.Lease.TTL+2*cfg.Lease.RenewInterval {
		t.Fatalf("b took over %v after the kill; want about a TTL (%v)", at, cfg.Lease.TTL)
	}
	before := map[string]int{}
	for _, n := range aTables {
		before[n] = jobs.count(n, "")
	}
	taken := func() bool {
		for _, n := range aTables {
			if jobs.count(n, "") <= before[n] {
				return false
			}
		}
		return true
	}
	for i := 0; i < 40 && !within(taken); i++ {
		clk.Advance(time.Second)
	}
	if !taken() {
		t.Fatal("b does not serve a's tables")
	}
	if perTable, _ := jobs.maxima(); perTable > 1 {
		t.Fatalf("%d jobs ran at once on one table across the instances", perTable)
	}
	if got := b.metric("compactord_lease_owned", "table", aTables[0]); got != 1 {
		t.Fatalf("lease_owned = %v", got)
	}
}

// An instance killed in the middle of a job holds that table's lease: the
// instance the table moves to serves it once the heartbeat expires, but
// starts no job before the dead holder's lease has expired too.
func TestTakeoverWaitsForTheDeadHoldersLease(t *testing.T) {
	sp := specs(t, "t")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs()
	g := newGate()
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if err := g.wait(ctx); err != nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{Version: 1}, nil
	})
	cfg := leaseConfig()
	// One table, two instances: the one Assign picks serves it, whichever
	// started first.
	want := lease.Assign([]string{"t"}, []string{"a", "b"})["t"]
	other := map[string]string{"a": "b", "b": "a"}[want]
	fa := &faultSet{}
	owner := leaseInstance(t, want, cfg, clk, jobs, membersURL, fa, nil, sp)
	spare := leaseInstance(t, other, cfg, clk, jobs, membersURL, nil, nil, sp)
	eventually(t, "the assignee serves t", func() bool {
		if !owner.status("t").Owned {
			clk.Advance(cfg.Lease.RenewInterval)
			owner.idle(6)
			return false
		}
		return true
	})
	owner.waitSynced("t")
	spare.idle(3)
	if err := owner.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job runs", func() bool { return jobs.count("t", "") == 1 })
	l := owner.status("t").Lease
	if l == nil || l.Holder != want {
		t.Fatalf("lease while the job runs: %+v", l)
	}
	fa.kill()
	// Its shutdown can release nothing: the lease outlives it.
	_ = owner.stop()
	// The dead instance's job lease is live for up to a TTL; its
	// heartbeat expires about as soon. spare serves t then, and runs
	// nothing before the lease is over.
	expires := l.Expires
	deadline := clk.Now().Add(3 * cfg.Lease.TTL)
	ran := false
	for clk.Now().Before(deadline) && !ran {
		clk.Advance(cfg.Lease.RenewInterval)
		spare.idle(3)
		if spare.status("t").Owned && jobs.count("t", "") == 1 {
			if err := spare.s.Trigger("t", scheduler.KindMerge); err == nil {
				eventually(t, "the trigger is taken or dropped", func() bool {
					st := spare.status("t")
					return jobs.count("t", "") == 2 || !st.Owned || len(st.Pending) == 0 && spare.metric("compactord_workers_busy") == 0
				})
			}
		}
		if jobs.count("t", "") == 2 {
			ran = true
			if clk.Now().Before(expires) {
				t.Fatalf("spare ran a job at %v, before the dead holder's lease expired at %v", clk.Now(), expires)
			}
		}
	}
	if !ran {
		t.Fatalf("spare never ran a job on t (status %+v)", spare.status("t"))
	}
	if got := spare.status("t").Lease; got == nil || got.Holder != other {
		t.Fatalf("lease after the takeover: %+v", got)
	}
	g.open()
}

// An instance that joins is assigned a table whose job is still running on
// its old instance: the newcomer serves the table but starts nothing under
// the old holder's lease; the old holder finishes, hands the table over and
// the newcomer runs its jobs from then on.
func TestHandOverWaitsForTheRunningJob(t *testing.T) {
	sp := specs(t, "t")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs()
	g := newGate()
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if c.trigger == scheduler.TriggerManual {
			if err := g.wait(ctx); err != nil {
				return scheduler.Outcome{}, err
			}
		}
		return scheduler.Outcome{Version: 1}, nil
	})
	cfg := leaseConfig()
	// A TTL of six rounds: a's lease always has more than two rounds left
	// when c reads it, so that c serving t within two rounds of the
	// hand-over shows it read the released lease again.
	cfg.Lease.TTL = 60 * time.Second
	newcomer := ""
	for i := 0; newcomer == ""; i++ {
		if n := fmt.Sprintf("c%d", i); lease.Assign([]string{"t"}, []string{"a", n})["t"] == n {
			newcomer = n
		}
	}
	a := leaseInstance(t, "a", cfg, clk, jobs, membersURL, nil, nil, sp)
	a.waitSynced("t")
	if err := a.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's job runs", func() bool { return jobs.count("t", "") == 1 })
	c := leaseInstance(t, newcomer, cfg, clk, jobs, membersURL, nil, nil, sp)
	c.waitSynced()
	// Rounds while a's job runs: c is assigned t, finds a's lease when it
	// would start a job, and stays off the table.
	for range 6 {
		clk.Advance(cfg.Lease.RenewInterval)
		parked(t, clk, 7) // both instances' loops and a's budget timer
		if st := c.status("t"); st.Owned {
			_ = c.s.Trigger("t", scheduler.KindCompact)
			eventually(t, "c takes the lease or finds a's", func() bool {
				st := c.status("t")
				return !st.Owned || jobs.count("t", "") > 1
			})
		}
		if got := jobs.count("t", ""); got != 1 {
			t.Fatalf("%d jobs ran on t while a's was running", got)
		}
	}
	if !a.status("t").Owned {
		t.Fatal("a stopped serving t in the middle of its job")
	}
	// Let c remember a's lease with more than two rounds left (just after a
	// renewed it), so that only reading it again lets c serve t sooner.
	for i := 0; ; i++ {
		if l := c.status("t").Lease; !c.status("t").Owned && l != nil && l.Expires.Sub(clk.Now()) > 2*cfg.Lease.RenewInterval {
			break
		}
		if i == 10 {
			t.Fatalf("c never saw a fresh lease of a: %+v", c.status("t"))
		}
		clk.Advance(cfg.Lease.RenewInterval)
		parked(t, clk, 7)
		if c.status("t").Owned {
			_ = c.s.Trigger("t", scheduler.KindCompact)
			eventually(t, "c finds a's lease", func() bool { return !c.status("t").Owned })
		}
	}
	g.open()
	eventually(t, "a's job ends", func() bool { return a.metric("compactord_workers_busy") == 0 })
	// a releases the lease when it hands over; c, which reads a lease that
	// fences it again every round, serves t within two rounds rather than
	// when the record it remembers expires. The clock stops after the
	// second round, so c serving t at all shows it did within two rounds
	// (c's first round may read the lease before a's releases it).
	handedOver := func() bool { return !a.status("t").Owned && c.status("t").Owned }
	clk.Advance(cfg.Lease.RenewInterval)
	a.idle(6)
	if !handedOver() {
		clk.Advance(cfg.Lease.RenewInterval)
	}
	eventually(t, "t handed over to c within two lease rounds", handedOver)
	if n := jobs.count("t", ""); n != 1 {
		t.Fatalf("%d jobs ran on t before the hand-over; want only a's merge (a must not start follow-ups on a table assigned to c)", n)
	}
	if err := c.s.Trigger("t", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c runs a job on t", func() bool { return jobs.count("t", scheduler.KindCompact) == 1 })
	if perTable, _ := jobs.maxima(); perTable > 1 {
		t.Fatalf("%d jobs ran at once on t", perTable)
	}
}

// Without membership every instance serves every table; the lease, taken
// when a job is to start, keeps the second instance from running one at
// the same time: it stops serving the table until that lease expires.
func TestLeaseFencesJobsWithoutMembership(t *testing.T) {
	sp := specs(t, "t")
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs()
	g := newGate()
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if err := g.wait(ctx); err != nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{Version: 1}, nil
	})
	cfg := leaseConfig()
	a := leaseInstance(t, "a", cfg, clk, jobs, "", nil, nil, sp)
	b := leaseInstance(t, "b", cfg, clk, jobs, "", nil, nil, sp)
	a.waitSynced("t")
	b.waitSynced("t")
	if err := a.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a runs the job", func() bool { return jobs.count("t", "") == 1 })
	if err := b.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b finds a's lease", func() bool { return !b.status("t").Owned })
	if l := b.status("t").Lease; l == nil || l.Holder != "a" {
		t.Fatalf("b's view of the lease: %+v", l)
	}
	// a renews while its job runs: b stays off the table.
	for range 6 {
		clk.Advance(cfg.Lease.RenewInterval)
		parked(t, clk, 7) // a's budget timer besides both instances' loops
		if b.status("t").Owned && jobs.count("t", "") > 1 {
			t.Fatal("b ran a job while a's was running")
		}
	}
	if got := jobs.count("t", ""); got != 1 {
		t.Fatalf("%d jobs ran, want 1", got)
	}
	g.open()
	eventually(t, "a's job ends", func() bool { return a.metric("compactord_workers_busy") == 0 })
	// Idle, a no longer renews: its lease expires within a TTL and b
	// serves the table again.
	for range 5 {
		clk.Advance(cfg.Lease.RenewInterval)
		a.idle(6)
	}
	eventually(t, "b serves t again", func() bool { return b.status("t").Owned })
	if perTable, _ := jobs.maxima(); perTable > 1 {
		t.Fatalf("%d jobs ran at once on t", perTable)
	}
}

// opCounter counts operations on keys under a prefix, over every bucket
// wrapped with it (two loops may open a table at once; one handle wins).
type opCounter struct {
	prefix string
	mu     sync.Mutex
	ops    map[string]int
}

func (c *opCounter) note(op, key string) {
	if strings.HasPrefix(key, c.prefix) {
		c.mu.Lock()
		c.ops[op]++
		c.mu.Unlock()
	}
}

func (c *opCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ops)
}

type countingBucket struct {
	storage.Bucket
	c *opCounter
}

func (c *countingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	c.c.note("get", key)
	return c.Bucket.Get(ctx, key)
}

func (c *countingBucket) Put(ctx context.Context, key string, data []byte) error {
	c.c.note("put", key)
	return c.Bucket.Put(ctx, key, data)
}

func (c *countingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	c.c.note("put_if_absent", key)
	return c.Bucket.PutIfAbsent(ctx, key, data)
}

func (c *countingBucket) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	c.c.note("list", prefix)
	return c.Bucket.List(ctx, prefix, fn)
}

func (c *countingBucket) Delete(ctx context.Context, key string) error {
	c.c.note("delete", key)
	return c.Bucket.Delete(ctx, key)
}

// Idle, an instance's lease traffic is its heartbeat: two instances over
// forty idle tables write two records a round (one heartbeat each), and
// no table lease is read or written.
func TestIdleLeaseCostIsPerInstance(t *testing.T) {
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	sp := specs(t, names...)
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig()
	cb := &opCounter{prefix: lease.LeasesDir, ops: map[string]int{}}
	a := leaseInstance(t, "a", cfg, clk, newFakeJobs(), membersURL, nil, cb, sp)
	b := leaseInstance(t, "b", cfg, clk, newFakeJobs(), membersURL, nil, cb, sp)
	a.waitSynced()
	b.waitSynced()
	eventually(t, "the tables split", func() bool {
		if len(owned(a))+len(owned(b)) == len(names) && len(owned(a)) == len(names)/2 {
			return true
		}
		clk.Advance(cfg.Lease.RenewInterval)
		a.idle(6)
		return false
	})
	a.idle(6)
	before := cb.counts()
	const rounds = 6
	for range rounds {
		clk.Advance(cfg.Lease.RenewInterval)
		a.idle(6)
	}
	after := cb.counts()
	writes := func(m map[string]int) int { return m["put"] + m["put_if_absent"] + m["delete"] }
	if got := writes(after) - writes(before); got != 2*rounds {
		t.Errorf("%d lease writes in %d idle rounds of 2 instances over %d tables, want %d (one heartbeat each a round): before %v, after %v",
			got, rounds, len(names), 2*rounds, before, after)
	}
	// Reads: per round and instance one listing of the members and a read
	// of each heartbeat; nothing per table.
	if got, limit := after["get"]+after["list"]-before["get"]-before["list"], rounds*2*3; got > limit {
		t.Errorf("%d lease reads in %d idle rounds, want at most %d: before %v, after %v", got, rounds, limit, before, after)
	}
}

// A job takes the table's lease when it is to start and the lease is
// renewed while jobs run; idle, the table costs no lease request at all.
func TestLeaseTakenForJobsOnly(t *testing.T) {
	cfg := leaseConfig()
	cb := &opCounter{prefix: lease.Dir("table"), ops: map[string]int{}}
	g := newGate()
	jobs := newFakeJobs()
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if err := g.wait(ctx); err != nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{Version: 1}, nil
	})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := leaseInstance(t, "a", cfg, clk, jobs, "", nil, cb, specs(t, "t"))
	h.waitSynced("t")
	h.idle(3)
	for range 6 {
		h.clk.Advance(cfg.Lease.RenewInterval)
		h.idle(3)
	}
	if got := cb.counts(); len(got) != 0 {
		t.Fatalf("lease requests of an idle table: %v", got)
	}
	if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job runs", func() bool { return jobs.count("t", "") == 1 })
	if l := h.status("t").Lease; l == nil || l.Holder != "a" {
		t.Fatalf("lease while the job runs: %+v", l)
	}
	first := cb.counts()["put_if_absent"]
	// Six rounds of a running job: renewed once half the TTL has passed,
	// every other round.
	for range 6 {
		h.clk.Advance(cfg.Lease.RenewInterval)
		parked(t, clk, 4) // the budget timer of the running attempt besides the loops
	}
	if got := cb.counts()["put_if_absent"] - first; got != 3 {
		t.Fatalf("%d renewals in six rounds of a running job, want 3 (all: %v)", got, cb.counts())
	}
	g.open()
	eventually(t, "the job ends", func() bool { return h.metric("compactord_workers_busy") == 0 })
	h.idle(3)
	done := cb.counts()
	for range 6 {
		h.clk.Advance(cfg.Lease.RenewInterval)
		h.idle(3)
	}
	if got := cb.counts(); !maps.Equal(got, done) {
		t.Fatalf("lease requests after the job: %v, then %v", done, got)
	}
	if !h.status("t").Owned {
		t.Fatal("the table is no longer served")
	}
}

// oldBuild stands in for a build that predates membership: it writes no
// heartbeat, and every round it takes or renews the lease of each table it
// serves, whether or not the table has work, as those builds did (a record
// with more than half its TTL left is kept; one it holds is renewed from
// memory; otherwise it tries to take it).
type oldBuild struct {
	m       *lease.Manager
	buckets map[string]storage.Bucket
	held    map[string]lease.State
}

func newOldBuild(t *testing.T, holder string, ttl time.Duration, clk *clock.Fake, sp []scheduler.TableSpec) *oldBuild {
	t.Helper()
	m, err := lease.NewManager(holder, ttl, clk)
	if err != nil {
		t.Fatal(err)
	}
	o := &oldBuild{m: m, buckets: map[string]storage.Bucket{}, held: map[string]lease.State{}}
	for _, s := range sp {
		b, err := storage.Open(context.Background(), s.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		o.buckets[s.Name] = b
	}
	return o
}

// round is one lease round of the old build; it must keep every lease.
func (o *oldBuild) round(t *testing.T) {
	t.Helper()
	for name, b := range o.buckets {
		cur, ok := o.held[name]
		if ok && o.m.Fresh(cur) {
			continue
		}
		var st lease.State
		var held bool
		var err error
		if ok {
			st, held, err = o.m.Renew(context.Background(), b, "table", cur)
		} else {
			st, held, err = o.m.TryAcquire(context.Background(), b, "table")
		}
		if err != nil || !held {
			t.Fatalf("the old build lost the lease of %s: %+v %v", name, st, err)
		}
		o.held[name] = st
	}
}

// expires is when the old build's last records expire.
func (o *oldBuild) expires() time.Time {
	var last time.Time
	for _, st := range o.held {
		if st.Expires.After(last) {
			last = st.Expires
		}
	}
	return last
}

// During a rolling upgrade a build that predates membership (it renews the
// lease of every table it serves, forever) runs beside a current one over
// one bucket. The current build stays off the tables whose lease the old
// build keeps renewing: it does not serve them (owned false, not even for a
// moment) and starts no job on them, while it serves the others. Once the
// old build is killed it takes those tables over, starting no job before
// the old build's last record has expired and within a round or two after.
// The old build's rounds run at every phase relative to the current
// build's, with and without membership.
func TestRollingUpgradeFromPerTableLeases(t *testing.T) {
	for _, withMembers := range []bool{true, false} {
		for _, phase := range []time.Duration{0, 3 * time.Second, 5 * time.Second, 9 * time.Second} {
			t.Run(fmt.Sprintf("members=%v/phase=%v", withMembers, phase), func(t *testing.T) {
				rollingUpgrade(t, withMembers, phase)
			})
		}
	}
}

func rollingUpgrade(t *testing.T, withMembers bool, phase time.Duration) {
	sp := specs(t, "t1", "t2", "t3", "t4")
	oldTables, newTables := []string{"t1", "t2"}, []string{"t3", "t4"}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start0 := clk.Now()
	cfg := leaseConfig()
	cfg.Schedule.Merge = "@every 1s"
	// The old build was configured with t1 and t2 only: one that served
	// every table would also take the leases the current build leaves to
	// expire on its idle tables.
	old := newOldBuild(t, "old", cfg.Lease.TTL, clk, sp[:2])
	old.round(t)

	jobs := newFakeJobs()
	var mu sync.Mutex
	started := map[string][]time.Time{}
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		mu.Lock()
		started[c.table] = append(started[c.table], clk.Now())
		mu.Unlock()
		return scheduler.Outcome{Version: 1}, nil
	})
	starts := func(name string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), started[name]...)
	}
	// Every change of serving is logged ("serving the table" when it
	// starts): the status and gauge alone would miss a table served for a
	// moment between two polls.
	core, logs := observer.New(zap.DebugLevel)
	servings := func(name string) int {
		return logs.FilterMessage("serving the table").FilterField(zap.String("table", name)).Len()
	}
	var members *lease.Members
	if withMembers {
		mb, err := storage.Open(context.Background(), memRoot(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mb.Close() })
		if members, err = lease.NewMembers(mb, "new", cfg.Lease.TTL, clk); err != nil {
			t.Fatal(err)
		}
	}
	nw := start(t, harnessOpts{cfg: cfg, clk: clk, jobs: jobs, deps: func(d *scheduler.Deps) {
		var err error
		if d.Leases, err = lease.NewManager("new", cfg.Lease.TTL, clk); err != nil {
			t.Fatal(err)
		}
		d.Members = members
		d.Logger = zap.New(zapcore.NewTee(d.Logger.Core(), core))
	}}, sp...)
	const loops = 4 // main (a merge is always scheduled), sync, poll, lease
	eventually(t, "ready", nw.s.Ready)
	nw.idle(loops)

	// step advances the clock a second and lets the current build settle;
	// the old build's rounds come every renew interval, at its own phase.
	step := func(oldRenews bool) {
		clk.Advance(time.Second)
		nw.idle(loops)
		if oldRenews && clk.Now().Sub(start0.Add(phase))%cfg.Lease.RenewInterval == 0 {
			old.round(t)
		}
	}
	// Until a job is due on them the current build has read none of these
	// leases (an idle table costs no request); the first due job finds the
	// old build's lease and fences the table.
	fencedAt := -1
	for i := 0; i < 90; i++ {
		step(true)
		if fencedAt < 0 {
			if !nw.status("t1").Owned && !nw.status("t2").Owned {
				fencedAt = i
				for _, n := range oldTables {
					if l := nw.status(n).Lease; l == nil || l.Holder != "old" {
						t.Fatalf("%s fenced by %+v, want the old build's lease", n, l)
					}
				}
			} else if i > 3 {
				t.Fatalf("t1 and t2 still served %ds after start: the old build's leases did not fence them", i+1)
			}
		}
		for _, n := range oldTables {
			if got := len(starts(n)); got != 0 {
				t.Fatalf("%d jobs started on %s at %v while the old build renews its lease", got, n, starts(n))
			}
			if fencedAt >= 0 {
				if nw.status(n).Owned || nw.metric("compactord_lease_owned", "table", n) != 0 {
					t.Fatalf("%s served at %v while the old build renews its lease (until %v)", n, clk.Now().Sub(start0), old.expires().Sub(start0))
				}
			}
		}
		for _, n := range newTables {
			if !nw.status(n).Owned || nw.metric("compactord_lease_owned", "table", n) != 1 {
				t.Fatalf("%s not served at %v", n, clk.Now().Sub(start0))
			}
		}
	}
	for _, n := range oldTables {
		// At most once: from the start until the first due job found the
		// lease (an idle table's lease is not read).
		if got := servings(n); got > 1 {
			t.Fatalf("%s was served %d times while the old build renewed its lease, want at most once, before the first job found it", n, got)
		}
	}
	for _, n := range newTables {
		if got := len(starts(n)); got < 80 {
			t.Fatalf("%d jobs on %s in 90s with a merge every second", got, n)
		}
	}

	// The old build is killed: its leases are never renewed again.
	expires := old.expires()
	for clk.Now().Before(expires.Add(3*cfg.Lease.RenewInterval)) && (len(starts("t1")) == 0 || len(starts("t2")) == 0) {
		step(false)
	}
	for _, n := range oldTables {
		s := starts(n)
		if len(s) == 0 {
			t.Fatalf("%s not taken over %v after the old build's lease expired (status %+v)", n, clk.Now().Sub(expires), nw.status(n))
		}
		if s[0].Before(expires) {
			t.Fatalf("a job started on %s at %v, before the old build's lease expired at %v", n, s[0].Sub(start0), expires.Sub(start0))
		}
		// A fenced table reads its lease again every full round: it is
		// served within a round or two of the expiry.
		if late := s[0].Sub(expires); late > 2*cfg.Lease.RenewInterval {
			t.Fatalf("%s taken over %v after the old build's lease expired, want within two rounds", n, late)
		}
		if !nw.status(n).Owned || nw.metric("compactord_lease_owned", "table", n) != 1 {
			t.Fatalf("%s runs jobs but is not reported served", n)
		}
		if l := nw.status(n).Lease; l == nil || l.Holder != "new" {
			t.Fatalf("lease of %s after the takeover: %+v", n, l)
		}
	}
}

// The lease loop's full round (heartbeat, assignment, renewal of the leases
// of running jobs) comes every renew interval even while lease requests of
// other tables wake the loop more often than that: three tables whose
// leases fall due for renewal five seconds apart must not starve it, or
// the lease of a long job would expire under it (another instance could
// then start a job on the table) and the heartbeat with it.
func TestLeaseRequestsDoNotPostponeTheFullRound(t *testing.T) {
	sp := specs(t, "long", "t2", "t3", "t4")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig()
	cfg.Schedule.Merge = "@every 1s"
	jobs := newFakeJobs()
	g := newGate()
	defer g.open()
	jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if c.table == "long" {
			if err := g.wait(ctx); err != nil {
				return scheduler.Outcome{}, err
			}
		}
		return scheduler.Outcome{Version: 1}, nil
	})
	h := leaseInstance(t, "a", cfg, clk, jobs, membersURL, nil, nil, sp)
	mb, err := storage.Open(context.Background(), membersURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mb.Close() })
	heartbeat := func() time.Time {
		data, err := mb.Get(context.Background(), lease.MembersDir+"a.json")
		if err != nil {
			t.Fatal(err)
		}
		var hb struct{ Expires time.Time }
		if err := json.Unmarshal(data, &hb); err != nil {
			t.Fatal(err)
		}
		return hb.Expires
	}
	h.waitSynced("long", "t2", "t3", "t4")
	// t3 and t4 start later, so that the three short tables' leases fall
	// due for renewal at different times.
	ctx := context.Background()
	for _, n := range []string{"t3", "t4"} {
		if err := h.s.Pause(ctx, n, "staggered start"); err != nil {
			t.Fatal(err)
		}
	}
	busy := func() int { return int(h.metric("compactord_workers_busy")) }
	settle := func() {
		// The four loops, and the budget timer of each running attempt.
		eventually(t, "scheduler settled", func() bool { b := busy(); return b <= 1 && clk.Timers() >= 4+b })
	}
	settle()
	for i := 1; i <= 120; i++ {
		clk.Advance(time.Second)
		settle()
		switch i {
		case 5:
			_ = h.s.Resume(ctx, "t3")
		case 10:
			_ = h.s.Resume(ctx, "t4")
		}
		now := clk.Now()
		if left := heartbeat().Sub(now); left < cfg.Lease.TTL-cfg.Lease.RenewInterval {
			t.Fatalf("at %ds the heartbeat has %v left: not written for more than a renew interval", i, left)
		}
		if i < 2 {
			continue // the long job starts at 1s
		}
		if l := h.status("long").Lease; l == nil || l.Holder != "a" || !l.Expires.After(now) {
			t.Fatalf("at %ds the lease of the running job's table is %+v: not renewed", i, l)
		}
		jobs.mu.Lock()
		running := jobs.running["long"]
		jobs.mu.Unlock()
		if running != 1 || jobs.count("long", "") != 1 {
			t.Fatalf("at %ds: %d jobs on long, %d running; want the first, still running", i, jobs.count("long", ""), running)
		}
	}
	if got := jobs.count("t4", ""); got < 100 {
		t.Fatalf("%d jobs on t4: the short tables did not keep requesting their leases", got)
	}
}

// The instance that takes a table over from a dead one logs it, at info,
// naming the instance it took the table from: the dead one logs nothing.
func TestTakeoverIsLoggedWhereItHappens(t *testing.T) {
	sp := specs(t, "t")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs()
	cfg := leaseConfig()
	want := lease.Assign([]string{"t"}, []string{"a", "b"})["t"]
	other := map[string]string{"a": "b", "b": "a"}[want]
	fa := &faultSet{}
	owner := leaseInstance(t, want, cfg, clk, jobs, membersURL, fa, nil, sp)
	mb, err := storage.Open(context.Background(), membersURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mb.Close() })
	core, logs := observer.New(zap.DebugLevel)
	spare := start(t, harnessOpts{cfg: cfg, clk: clk, jobs: jobs, deps: func(d *scheduler.Deps) {
		d.Logger = zap.New(core)
		var err error
		if d.Leases, err = lease.NewManager(other, cfg.Lease.TTL, clk); err != nil {
			t.Fatal(err)
		}
		if d.Members, err = lease.NewMembers(mb, other, cfg.Lease.TTL, clk); err != nil {
			t.Fatal(err)
		}
	}}, sp...)
	eventually(t, "the assignee serves t", func() bool {
		if !owner.status("t").Owned {
			clk.Advance(cfg.Lease.RenewInterval)
			owner.idle(6)
			return false
		}
		return true
	})
	// The spare may have served t before it saw the assignee's heartbeat:
	// it hands t over at a full round.
	eventually(t, "the spare hands t over", func() bool {
		spare.idle(3)
		if spare.status("t").Owned {
			clk.Advance(cfg.Lease.RenewInterval)
			return false
		}
		return true
	})
	if n := logs.FilterMessage("took over the table").Len(); n != 0 {
		t.Fatalf("%d takeover lines while the assignee lives", n)
	}
	fa.kill()
	_ = owner.stop()
	deadline := clk.Now().Add(3 * cfg.Lease.TTL)
	for !spare.status("t").Owned && clk.Now().Before(deadline) {
		clk.Advance(cfg.Lease.RenewInterval)
		spare.idle(3)
	}
	if !spare.status("t").Owned {
		t.Fatal("the spare never took t over")
	}
	lines := logs.FilterMessage("took over the table").FilterField(zap.String("table", "t")).All()
	if len(lines) != 1 || lines[0].Level != zap.InfoLevel || lines[0].ContextMap()["from"] != want || lines[0].ContextMap()["holder"] != other {
		t.Fatalf("takeover lines %+v, want one at info from %s", lines, want)
	}
}

// An operator's job request on a table this instance is about to serve
// (the lease that fenced it has expired; the lease round that takes it
// over has not finished) says so: it never calls this instance "another
// instance".
func TestTriggerNeverNamesThisInstanceAsAnother(t *testing.T) {
	// With membership the table is assigned to this instance by name;
	// without, to none: the answer named "a" or "" as another instance.
	for _, members := range []bool{false, true} {
		t.Run(fmt.Sprintf("members=%v", members), func(t *testing.T) { triggerWhileTakingOver(t, members) })
	}
}

func triggerWhileTakingOver(t *testing.T, withMembers bool) {
	ctx := context.Background()
	sp := specs(t, "t")
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig()
	tb, err := storage.Open(ctx, sp[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	lb, err := lease.NewManager("b", cfg.Lease.TTL, clk)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lb.TryAcquire(ctx, tb, "table"); err != nil || !ok {
		t.Fatalf("b's lease: %v %v", ok, err)
	}
	fs := &faultSet{}
	membersURL := ""
	if withMembers {
		membersURL = memRoot(t)
	}
	a := leaseInstance(t, "a", cfg, clk, newFakeJobs(), membersURL, fs, nil, sp)
	eventually(t, "a serves t", func() bool { return a.status("t").Owned })
	a.waitSynced("t")
	// a serves t until it asks for the lease a job needs and finds b's.
	if err := a.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a fenced by b's lease", func() bool { return !a.status("t").Owned })
	var ae *scheduler.APIError
	if err := a.s.Trigger("t", scheduler.KindMerge); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(err.Error(), "served by another instance (b)") {
		t.Fatalf("trigger while b's lease is live: %v", err)
	}
	// b's lease expires; the round that would take t over is held in its
	// reads of the lease bucket (with membership, the heartbeat first).
	release := make(chan struct{})
	var rules []*faults.FaultRule
	fs.mu.Lock()
	for _, f := range fs.all {
		rules = append(rules, f.Add(faults.Fault{KeyPrefix: lease.LeasesDir, Action: faults.Block(release)}))
	}
	fs.mu.Unlock()
	clk.Advance(cfg.Lease.TTL + time.Second)
	eventually(t, "the lease round reads the lease", func() bool {
		for _, r := range rules {
			if r.Fired() > 0 {
				return true
			}
		}
		return false
	})
	err = a.s.Trigger("t", scheduler.KindMerge)
	close(release)
	if !errors.As(err, &ae) || ae.Status != 503 || strings.Contains(err.Error(), "another instance") || !strings.Contains(err.Error(), "not served by this instance (a) yet") {
		t.Fatalf("trigger on a table this instance is taking over: %v", err)
	}
	eventually(t, "a serves t", func() bool { return a.status("t").Owned })
}
