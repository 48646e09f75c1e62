package scheduler_test

import (
	"context"
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
