package scheduler_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/scheduler/clock"
	"github.com/compactord/compactord/internal/storage"
)

// faults collects the Faulty wrappers of one instance's buckets, so that a
// test can "kill" the instance: every operation fails from then on, and
// its leases are never released.
type faults struct {
	mu  sync.Mutex
	all []*storage.Faulty
}

func (f *faults) wrap(_ string, b storage.Bucket) storage.Bucket {
	fb := storage.NewFaulty(b)
	f.mu.Lock()
	f.all = append(f.all, fb)
	f.mu.Unlock()
	return fb
}

func (f *faults) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fb := range f.all {
		fb.Add(storage.Fault{Action: storage.Fail(nil)})
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

// Two instances over one bucket split four tables through leases: each
// serves two, no job ever runs twice at once on a table, and when one
// instance dies its tables move to the other once its leases expire.
func TestTwoInstancesSplitTablesViaLeases(t *testing.T) {
	sp := specs(t, "t1", "t2", "t3", "t4")
	membersURL := memRoot(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jobs := newFakeJobs() // shared: counts overlap across both instances
	cfg := testConfig()
	cfg.Schedule.Merge = "@every 1s"
	cfg.Schedule.Compact = "@every 3s"
	cfg.Lease = lease.Config{Enabled: true, TTL: 30 * time.Second, RenewInterval: 10 * time.Second}

	instance := func(holder string, f *faults) *harness {
		mb, err := storage.Open(context.Background(), membersURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mb.Close() })
		var members storage.Bucket = mb
		var wrap func(string, storage.Bucket) storage.Bucket
		if f != nil {
			members, wrap = f.wrap("members", mb), f.wrap
		}
		return start(t, harnessOpts{cfg: cfg, clk: clk, jobs: jobs, wrap: wrap, deps: func(d *scheduler.Deps) {
			var err error
			if d.Leases, err = lease.NewManager(holder, cfg.Lease.TTL, clk); err != nil {
				t.Fatal(err)
			}
			if d.Members, err = lease.NewMembers(members, holder, cfg.Lease.TTL, clk); err != nil {
				t.Fatal(err)
			}
		}}, sp...)
	}
	fa := &faults{}
	a := instance("a", fa)
	b := instance("b", nil)

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

	// Kill a: its buckets fail from now on, so it can neither renew nor
	// release its leases.
	aTables := owned(a)
	var expiry time.Time
	for _, n := range aTables {
		if l := b.status(n).Lease; l != nil && l.Expires.After(expiry) {
			expiry = l.Expires
		}
	}
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
	if clk.Now().Before(expiry) {
		t.Fatalf("b took over at %v, before a's leases expired at %v", clk.Now(), expiry)
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
	for i := 0; i < 10 && !within(taken); i++ {
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

// A holder touches the store for its lease only to renew it, once half the
// TTL has passed: the rounds in between cost no request.
func TestLeaseRoundsBetweenRenewalsDoNoIO(t *testing.T) {
	cfg := testConfig()
	cfg.Lease = lease.Config{Enabled: true, TTL: 30 * time.Second, RenewInterval: 10 * time.Second}
	cb := &opCounter{prefix: lease.Dir("table"), ops: map[string]int{}}
	h := start(t, harnessOpts{cfg: cfg, wrap: func(_ string, b storage.Bucket) storage.Bucket {
		return &countingBucket{Bucket: b, c: cb}
	}, deps: func(d *scheduler.Deps) {
		var err error
		if d.Leases, err = lease.NewManager("a", cfg.Lease.TTL, d.Clock); err != nil {
			t.Fatal(err)
		}
	}}, specs(t, "t")...)
	h.waitSynced("t")
	h.idle(3)
	before := cb.counts()
	for range 6 {
		h.clk.Advance(cfg.Lease.RenewInterval)
		h.idle(3)
	}
	after := cb.counts()
	// Six rounds, three renewals: each writes the next record, confirms with
	// a listing that it is the newest, and deletes the one before the last
	// (none before the second record).
	for op, want := range map[string]int{"put_if_absent": 3, "list": 3, "get": 0, "delete": 2} {
		if got := after[op] - before[op]; got != want {
			t.Errorf("%s on the lease: %d in six rounds, want %d (all: before %v, after %v)", op, got, want, before, after)
		}
	}
	if !h.status("t").Owned {
		t.Fatal("the lease was lost")
	}
}
