package lease_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMain(m *testing.M) { stores.Main(m) }

func manager(t *testing.T, holder string, clk clock.Clock) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(holder, 30*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openStore opens the store at url for the test.
func openStore(t *testing.T, url string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// twoHolders returns managers for holders "a" and "b" on one fake clock.
func twoHolders(t *testing.T) (clk *clock.Fake, a, b *lease.Manager) {
	t.Helper()
	clk = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return clk, manager(t, "a", clk), manager(t, "b", clk)
}

// acquireFree has m acquire the free lease on "table": the first record.
func acquireFree(t *testing.T, m *lease.Manager, b storage.Bucket) lease.State {
	t.Helper()
	st, held, err := m.TryAcquire(context.Background(), b, "table")
	if err != nil || !held || st.Epoch != 1 || st.Holder != m.Holder() {
		t.Fatalf("first acquire: %+v %v %v", st, held, err)
	}
	return st
}

// Acquire, renewal, refusal while live, takeover after expiry with an
// injected clock, and the old holder learning it lost the lease.
func TestTakeoverAfterExpiry(t *testing.T) {
	stores.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b := openStore(t, url)
		clk, a, c := twoHolders(t)
		acquireFree(t, a, b)
		if st, held, err := c.TryAcquire(ctx, b, "table"); err != nil || held || st.Holder != "a" {
			t.Fatalf("b took a live lease: %+v %v %v", st, held, err)
		}
		// Before half the TTL a holder keeps its record; after, it renews
		// with the next epoch.
		clk.Advance(10 * time.Second)
		if st, held, _ := a.TryAcquire(ctx, b, "table"); !held || st.Epoch != 1 {
			t.Fatalf("early renewal wrote a record: %+v", st)
		}
		clk.Advance(10 * time.Second)
		st, held, err := a.TryAcquire(ctx, b, "table")
		if err != nil || !held || st.Epoch != 2 || !st.Expires.Equal(clk.Now().Add(30*time.Second)) {
			t.Fatalf("renewal: %+v %v %v", st, held, err)
		}
		// a stalls; its lease expires; b takes over.
		clk.Advance(29 * time.Second)
		if _, held, _ := c.TryAcquire(ctx, b, "table"); held {
			t.Fatal("b took the lease a second before it expired")
		}
		clk.Advance(time.Second)
		st, held, err = c.TryAcquire(ctx, b, "table")
		if err != nil || !held || st.Holder != "b" || st.Epoch != 3 {
			t.Fatalf("takeover: %+v %v %v", st, held, err)
		}
		if st, held, _ := a.TryAcquire(ctx, b, "table"); held || st.Holder != "b" {
			t.Fatalf("the stalled holder still believes it holds the lease: %+v", st)
		}
		// A release hands the lease over at once.
		if err := c.Release(ctx, b, "table"); err != nil {
			t.Fatal(err)
		}
		if st, held, _ := a.TryAcquire(ctx, b, "table"); !held || st.Holder != "a" {
			t.Fatalf("acquire after release: %+v", st)
		}
		// At most two records remain.
		n := 0
		if err := b.List(ctx, lease.Dir("table"), func(storage.Attrs) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("%d lease records kept", n)
		}
	})
}

// A holder renews from the record it remembers, without reading first; a
// lease lost meanwhile (taken over, even several epochs ahead) is reported
// lost, and the new holder's record stays the newest.
func TestRenewFromMemory(t *testing.T) {
	stores.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b := openStore(t, url)
		clk, a, c := twoHolders(t)
		st := acquireFree(t, a, b)
		if !a.Fresh(st) || c.Fresh(st) {
			t.Fatal("Fresh: a's new record is fresh for a only")
		}
		clk.Advance(16 * time.Second)
		if a.Fresh(st) {
			t.Fatal("a record with less than half its TTL left is fresh")
		}
		st, held, err := a.Renew(ctx, b, "table", st)
		if err != nil || !held || st.Epoch != 2 || !st.Expires.Equal(clk.Now().Add(30*time.Second)) {
			t.Fatalf("renew: %+v %v %v", st, held, err)
		}
		if cur, _ := a.Read(ctx, b, "table"); !same(cur, st) {
			t.Fatalf("read back %+v, renewed %+v", cur, st)
		}
		// a stalls past expiry; b takes over and renews twice.
		stale := st
		clk.Advance(30 * time.Second)
		bst, held, err := c.TryAcquire(ctx, b, "table")
		if err != nil || !held || bst.Epoch != 3 {
			t.Fatalf("takeover: %+v %v %v", bst, held, err)
		}
		if st, held, err := a.Renew(ctx, b, "table", stale); err != nil || held || st.Holder != "b" {
			t.Fatalf("renew of a lost lease (next epoch taken): %+v %v %v", st, held, err)
		}
		for range 2 {
			clk.Advance(16 * time.Second)
			if bst, held, err = c.Renew(ctx, b, "table", bst); err != nil || !held {
				t.Fatalf("b renews: %+v %v %v", bst, held, err)
			}
		}
		// Epoch 3 (the one after a's) is history now: a's write of it lands,
		// but is not the newest.
		if st, held, err := a.Renew(ctx, b, "table", stale); err != nil || held || !same(st, bst) {
			t.Fatalf("renew of a lost lease (epochs ahead): %+v %v %v; want b's %+v", st, held, err, bst)
		}
		if cur, _ := c.Read(ctx, b, "table"); !same(cur, bst) {
			t.Fatalf("after a's stale renewal the newest record is %+v, want b's %+v", cur, bst)
		}
	})
}

func same(x, y lease.State) bool {
	return x.Holder == y.Holder && x.Epoch == y.Epoch && x.Expires.Equal(y.Expires)
}

// Of many instances racing for a free lease, exactly one wins.
func TestRacingAcquireOneWinner(t *testing.T) {
	stores.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b := openStore(t, url)
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		for round := range 5 {
			var winners atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				m := manager(t, fmt.Sprintf("i%d", i), clk)
				wg.Go(func() {
					if _, held, err := m.TryAcquire(ctx, b, "race"); err != nil {
						t.Error(err)
					} else if held {
						winners.Add(1)
					}
				})
			}
			wg.Wait()
			if w := winners.Load(); w != 1 {
				t.Fatalf("round %d: %d winners", round, w)
			}
			clk.Advance(31 * time.Second) // expire it for the next round
		}
	})
}

// A corrupt newest record reads as expired, so it cannot block the table
// forever.
func TestCorruptRecordIsSuperseded(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, "mem://")
	if err := b.PutIfAbsent(ctx, lease.Key("table", 4), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	m := manager(t, "a", clock.NewFake(time.Unix(1e9, 0)))
	st, held, err := m.TryAcquire(ctx, b, "table")
	if err != nil || !held || st.Epoch != 5 {
		t.Fatalf("%+v %v %v", st, held, err)
	}
}

func TestAssignIsEvenAndDeterministic(t *testing.T) {
	tables := []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	for _, members := range [][]string{{"a"}, {"a", "b"}, {"b", "a", "c"}, {"a", "b", "c", "d", "e", "f", "g", "h"}} {
		got := lease.Assign(tables, members)
		load := map[string]int{}
		for _, tb := range tables {
			if got[tb] == "" {
				t.Fatalf("table %s unassigned", tb)
			}
			load[got[tb]]++
		}
		limit := (len(tables) + len(members) - 1) / len(members)
		for m, n := range load {
			if n > limit {
				t.Fatalf("%s has %d tables, limit %d", m, n, limit)
			}
		}
		// Same inputs in another order: same map.
		rev := make([]string, len(members))
		for i, m := range members {
			rev[len(members)-1-i] = m
		}
		other := lease.Assign([]string{"t7", "t6", "t5", "t4", "t3", "t2", "t1"}, rev)
		for _, tb := range tables {
			if other[tb] != got[tb] {
				t.Fatalf("assignment depends on input order: %v vs %v", got, other)
			}
		}
	}
	if got := lease.Assign([]string{"t1", "t2", "t3", "t4"}, []string{"a", "b"}); len(got) != 4 {
		t.Fatal(got)
	}
}

func TestMembersLiveAndExpiry(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, "mem://")
	clk := clock.NewFake(time.Unix(1e9, 0))
	a, err := lease.NewMembers(b, "a", 30*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lease.NewMembers(b, "c", 30*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := a.Live(ctx)
	if err != nil || fmt.Sprint(live) != "[a c]" {
		t.Fatalf("%v %v", live, err)
	}
	clk.Advance(31 * time.Second)
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if live, _ := a.Live(ctx); fmt.Sprint(live) != "[a]" {
		t.Fatalf("an expired member is live: %v", live)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if live, _ := c.Live(ctx); fmt.Sprint(live) != "[c]" {
		t.Fatalf("after leave: %v", live)
	}
}

// Instances split the tables only with those that publish the same table
// list: an instance that lacks a table must not be assigned it. A
// heartbeat without a list (an older build) counts as the same.
func TestMembersLiveOnlyWithTheSameTables(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, "mem://")
	clk := clock.NewFake(time.Unix(1e9, 0))
	ms := map[string]*lease.Members{}
	for _, h := range []string{"a", "b", "c", "old"} {
		m, err := lease.NewMembers(b, h, 30*time.Second, clk)
		if err != nil {
			t.Fatal(err)
		}
		ms[h] = m
	}
	same := lease.Fingerprint([]string{"t2", "t1"})
	if same != lease.Fingerprint([]string{"t1", "t2", "t1"}) || same == lease.Fingerprint([]string{"t1"}) {
		t.Fatal("the fingerprint depends on order or duplicates, or ignores a table")
	}
	ms["a"].SetTables(same)
	ms["b"].SetTables(same)
	ms["c"].SetTables(lease.Fingerprint([]string{"t1"}))
	for _, m := range ms {
		if err := m.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if live, err := ms["a"].Live(ctx); err != nil || fmt.Sprint(live) != "[a b old]" {
		t.Fatalf("a sees %v %v, want [a b old]", live, err)
	}
	if live, err := ms["c"].Live(ctx); err != nil || fmt.Sprint(live) != "[c old]" {
		t.Fatalf("c sees %v %v, want [c old]", live, err)
	}
	if live, err := ms["old"].Live(ctx); err != nil || fmt.Sprint(live) != "[a b c old]" {
		t.Fatalf("an instance without a list sees %v %v, want everyone", live, err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []lease.Config{
		{Enabled: true, TTL: 0, RenewInterval: time.Second},
		{Enabled: true, TTL: 30 * time.Second, RenewInterval: 11 * time.Second},
		{Enabled: true, TTL: 30 * time.Second, RenewInterval: 10 * time.Second, Holder: "bad/holder"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := lease.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := lease.ValidateHolder(lease.DefaultHolder()); err != nil {
		t.Fatal(err)
	}
}

// A lease write is a put-if-absent of the next epoch; when its response is
// lost, reading the record back decides: a landed write holds the lease, a
// write that did not land does not, and a permanent failure is an error.
func TestLeaseWriteWithUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	_, a, _ := twoHolders(t)
	putFault := func(act faults.Action) *faults.Faulty {
		f := faults.NewFaulty(openStore(t, "mem://"))
		f.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Nth: 1, Action: act})
		return f
	}

	st, held, err := a.TryAcquire(ctx, putFault(faults.LandThenFail(nil)), "table")
	if err != nil || !held || st.Epoch != 1 || st.Holder != "a" {
		t.Errorf("landed, response lost: %+v held=%v err=%v; want epoch 1 held by a", st, held, err)
	}
	st, held, err = a.TryAcquire(ctx, putFault(faults.Fail(faults.ErrInjectedTimeout)), "table")
	if err != nil || held || st.Epoch != 0 {
		t.Errorf("not landed, response lost: %+v held=%v err=%v; want not held, no record", st, held, err)
	}
	if _, held, err = a.TryAcquire(ctx, putFault(faults.Fail(fs.ErrPermission)), "table"); err == nil || held {
		t.Errorf("permission denied: held=%v err=%v; want an error", held, err)
	}
}
