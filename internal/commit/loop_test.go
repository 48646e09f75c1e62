package commit_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.Main(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

type fixture struct {
	bucket  storage.Bucket
	faulty  *storage.Faulty
	reg     *prometheus.Registry
	metrics *commit.Metrics
}

func newFixture(t *testing.T, url string) *fixture {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	reg := prometheus.NewRegistry()
	return &fixture{bucket: b, faulty: storage.NewFaulty(b), reg: reg, metrics: commit.NewMetrics(reg)}
}

func (f *fixture) table(t *testing.T, cfg commit.Config) *ops.Table {
	t.Helper()
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff, cfg.MaxBackoff = time.Millisecond, 20*time.Millisecond
	}
	c, err := commit.NewCommitter(cfg, f.faulty, nil, f.metrics, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(f.faulty, c, nil, nil)
}

func schema(t *testing.T) *pb.Schema {
	s, err := table.ParseSchema("id:int64,v:string", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rows(start, n int) []table.Row {
	out := make([]table.Row, n)
	for i := range out {
		out[i] = table.Row{int64(start + i), fmt.Sprint("v", start+i)}
	}
	return out
}

func scanKeys(t *testing.T, tb *ops.Table, v uint64) map[int64]bool {
	t.Helper()
	keys := map[int64]bool{}
	if _, err := tb.Scan(context.Background(), v, func(r table.Row) error {
		if keys[r[0].(int64)] {
			t.Fatalf("key %d returned twice", r[0])
		}
		keys[r[0].(int64)] = true
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	return keys
}

func listKeys(t *testing.T, b storage.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), prefix, func(a storage.Attrs) error { out = append(out, a.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// mustAppend appends rs through tb and returns the commit's result.
func mustAppend(t *testing.T, tb *ops.Table, rs []table.Row) *commit.Result {
	t.Helper()
	res, err := tb.Append(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// createWithRows creates the table through tb (version 1) and appends rows
// 0..n-1 (version 2), whose result it returns: tb's committer then holds a
// fresh hint of version 2.
func createWithRows(t *testing.T, tb *ops.Table, n int) *commit.Result {
	t.Helper()
	if _, err := tb.Create(context.Background(), schema(t)); err != nil {
		t.Fatal(err)
	}
	return mustAppend(t, tb, rows(0, n))
}

// readHead reads the newest version's manifest from b.
func readHead(t *testing.T, b storage.Bucket) *pb.Manifest {
	t.Helper()
	m, err := table.ReadLatest(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// deleteKeys deletes the rows with keys ks.
func deleteKeys(ks ...int64) ops.DeleteSpec {
	var s ops.DeleteSpec
	for _, k := range ks {
		s.Keys = append(s.Keys, table.Row{k, nil})
	}
	return s
}

// wantRows fails unless tb's head holds n rows, none of them with a key in
// deleted.
func wantRows(t *testing.T, tb *ops.Table, n int, deleted ...int64) {
	t.Helper()
	got := scanKeys(t, tb, 0)
	for _, k := range deleted {
		if got[k] {
			t.Fatalf("deleted key %d is back", k)
		}
	}
	if len(got) != n {
		t.Fatalf("%d rows, want %d", len(got), n)
	}
}

// Concurrent appenders all land as consecutive versions with no lost rows.
func TestConcurrentAppendsAllLand(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		const writers, per = 32, 20
		f := newFixture(t, url)
		tb := f.table(t, commit.Config{MaxAttempts: 200, MaxBackoff: 50 * time.Millisecond})
		ctx := context.Background()
		if _, err := tb.Create(ctx, schema(t)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := tb.Append(ctx, rows(w*per, per))
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		vs, err := table.ListVersions(ctx, f.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != writers+1 || vs[0] != writers+1 || vs[len(vs)-1] != 1 {
			t.Fatalf("versions %v, want 1..%d", vs, writers+1)
		}
		if got := len(scanKeys(t, tb, 0)); got != writers*per {
			t.Fatalf("%d rows, want %d", got, writers*per)
		}
	})
}

// The put landed, the client saw a timeout (Lance #8123). The commit is
// ours: read back, never committed twice, files never deleted.
func TestLandedPutWithLostResponseIsOurs(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	rule := f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Nth: 1, Action: storage.LandThenFail(nil)})
	res, err := tb.Append(ctx, rows(0, 10))
	if err != nil {
		t.Fatalf("append after a lost response: %v", err)
	}
	if rule.Fired() != 1 || res.Manifest.Version != 2 {
		t.Fatalf("fired %d, version %d", rule.Fired(), res.Manifest.Version)
	}
	if vs, _ := table.ListVersions(ctx, f.bucket); len(vs) != 2 {
		t.Fatalf("versions %v: committed twice or not at all", vs)
	}
	for _, fr := range res.Manifest.Fragments {
		if _, err := f.bucket.Attributes(ctx, fr.DataFile.Path); err != nil {
			t.Fatalf("data file of our own commit was deleted: %v", err)
		}
	}
	if got := promtest.ToFloat64(counter(t, f.reg, "compactord_commit_ambiguous_total", "resolution", "ours")); got != 1 {
		t.Fatalf("ambiguous{ours} = %v, want 1", got)
	}
}

// The put landed but the response was lost, and the retry's put came back
// "already exists": still ours.
func TestLandedPutThenAlreadyExistsIsOurs(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	// Read-back fails too, so the loop cannot tell and must go round again.
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Nth: 1, Action: storage.LandThenFail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet}, KeyPrefix: table.ManifestKey(2), Action: storage.Fail(nil), Nth: 1})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet}, KeyPrefix: table.ManifestKey(2), Action: storage.Fail(nil), Nth: 2})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet}, KeyPrefix: table.ManifestKey(2), Action: storage.Fail(nil), Nth: 3})
	res, err := tb.Append(ctx, rows(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if vs, _ := table.ListVersions(ctx, f.bucket); len(vs) != 2 || res.Manifest.Version != 2 {
		t.Fatalf("versions %v (result %d)", vs, res.Manifest.Version)
	}
	if len(scanKeys(t, tb, 0)) != 10 {
		t.Fatal("rows lost")
	}
}

// A lost race goes round again and lands on the next version.
func TestLostRaceIsRetried(t *testing.T) {
	f := newFixture(t, "mem://")
	slow := f.table(t, commit.Config{})
	fast := newFixtureShared(t, f)
	ctx := context.Background()
	if _, err := slow.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	rule := f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.ManifestKey(2), Nth: 1, Action: storage.Block(release)})
	done := make(chan error, 1)
	var res *commit.Result
	go func() {
		var err error
		res, err = slow.Append(ctx, rows(0, 5))
		done <- err
	}()
	waitFor(t, func() bool { return rule.Matched() == 1 })
	if _, err := fast.Append(ctx, rows(100, 5)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Version != 3 || res.Attempts != 2 {
		t.Fatalf("version %d after %d attempts, want 3 after 2", res.Manifest.Version, res.Attempts)
	}
	if len(scanKeys(t, slow, 0)) != 10 {
		t.Fatal("rows lost")
	}
}

// A permanent error surfaces as a clear error and removes the transaction's
// files (the transaction file too, when they are written).
func TestPermanentErrorSurfaces(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{TransactionFiles: true})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	denied := &fs.PathError{Op: "link", Path: "_versions/x", Err: fs.ErrPermission}
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Fail(denied)})
	_, err := tb.Append(ctx, rows(0, 5))
	if err == nil || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want a one-line permission error", err)
	}
	if got := listKeys(t, f.bucket, table.DataDir); len(got) != 0 {
		t.Fatalf("data files left behind: %v", got)
	}
	if got := listKeys(t, f.bucket, table.TransactionsDir); len(got) != 1 {
		t.Fatalf("transaction files %v, want only create's", got)
	}
}

// Retries run out: a typed retryable error, stale files removed.
func TestRetriesRunOut(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{MaxAttempts: 3, TransactionFiles: true})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	lost := fmt.Errorf("simulated lost race: %w", storage.ErrAlreadyExists)
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Fail(lost)})
	_, err := tb.Append(ctx, rows(0, 5))
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("got %v, want a retryable ConflictError", err)
	}
	if got := listKeys(t, f.bucket, table.TransactionsDir); len(got) != 1 {
		t.Fatalf("stale transaction files: %v", got)
	}
	if got := listKeys(t, f.bucket, table.DataDir); len(got) != 0 {
		t.Fatalf("stale data files: %v", got)
	}
	if got := promtest.ToFloat64(counter(t, f.reg, "compactord_commit_attempts_total", "operation", "append")); got != 3 {
		t.Fatalf("attempts = %v, want 3", got)
	}
}

// By default a commit writes its manifest only: the transaction travels
// inline, no transaction file is written or named, and conflicts are
// classified from the inline copy.
func TestNoTransactionFileByDefault(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		tb := f.table(t, commit.Config{})
		createWithRows(t, tb, 100)
		ctx := context.Background()
		read := readHead(t, f.bucket)
		if _, _, err := newFixtureShared(t, f).Delete(ctx, read, deleteKeys(1)); err != nil {
			t.Fatal(err)
		}
		res, _, err := tb.Delete(ctx, read, deleteKeys(2))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Rebased {
			t.Fatal("not rebased; want a rebase onto the other delete")
		}
		wantRows(t, tb, 98, 1, 2)
		if got := listKeys(t, f.bucket, table.TransactionsDir); len(got) != 0 {
			t.Fatalf("transaction files %v, want none", got)
		}
		for v := uint64(1); v <= 4; v++ {
			m, err := table.ReadManifest(ctx, f.bucket, v)
			if err != nil {
				t.Fatal(err)
			}
			if m.TransactionPath != "" || m.Transaction == nil || m.Transaction.Uuid != m.TransactionUuid {
				t.Fatalf("version %d: transaction path %q, inline transaction %v", v, m.TransactionPath, m.Transaction != nil)
			}
		}
	})
}

// Deletes on different rows of one fragment rebase by union;
// deleting the same row twice is harmless.
func TestConcurrentDeletesOnOneFragmentBothHold(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	createWithRows(t, tb, 100)
	ctx := context.Background()
	read := readHead(t, f.bucket)
	// Both planned against the same read version.
	r1, _, err := tb.Delete(ctx, read, deleteKeys(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	r2, _, err := tb.Delete(ctx, read, deleteKeys(3, 50, 99))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Rebased || !r2.Rebased {
		t.Fatalf("rebased: first %v second %v, want false/true", r1.Rebased, r2.Rebased)
	}
	wantRows(t, tb, 95, 1, 2, 3, 50, 99)
	if n := r2.Manifest.Fragments[0].DeletionFile.NumDeleted; n != 5 {
		t.Fatalf("deletion file holds %d rows, want 5", n)
	}
	// The superseded deletion file of the second delete was removed.
	if dels := listKeys(t, f.bucket, table.DeletionsDir); len(dels) != 2 {
		t.Fatalf("deletion files %v, want the two committed ones", dels)
	}
}

// Deletes that together remove every row of a fragment remove the fragment.
func TestConcurrentDeletesEmptyAFragment(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Append(ctx, rows(0, 4)); err != nil {
		t.Fatal(err)
	}
	read, _ := table.ReadLatest(ctx, f.bucket)
	p1, _ := ops.ParsePredicate(read.Schema, "id < 2")
	p2, _ := ops.ParsePredicate(read.Schema, "id >= 2")
	if _, _, err := tb.Delete(ctx, read, ops.DeleteSpec{Predicate: p1}); err != nil {
		t.Fatal(err)
	}
	res, _, err := tb.Delete(ctx, read, ops.DeleteSpec{Predicate: p2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Fragments) != 0 {
		t.Fatalf("fragments %v, want none", res.Manifest.Fragments)
	}
}

func newFixtureShared(t *testing.T, f *fixture) *ops.Table {
	c, err := commit.NewCommitter(commit.Config{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}, f.bucket, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(f.bucket, c, nil, nil)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond) // polling a condition, not synchronising on time
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string, kv ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.Metric {
			for i := 0; i+1 < len(kv); i += 2 {
				found := false
				for _, lp := range m.Label {
					if lp.GetName() == kv[i] && lp.GetValue() == kv[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return m.GetCounter().GetValue() })
		}
	}
	t.Fatalf("metric %s%v not found", name, kv)
	return nil
}

// Regression (found by the issue-8 fault campaign; Lance #8123 in a new
// shape): the put of version 2 landed but its response was lost, and the
// read-back failed too, so the outcome was unknown. The next attempt's
// head probe then failed, and Commit returned that plain error. The
// caller (ops.CommitOrClean) took it for a definite failure and deleted
// the data files of what was in fact the committed version 2: the table
// referenced missing files. Once a put's outcome is unknown, every later
// failure of the same Commit must be reported as ambiguous.
func TestUnresolvedPutThenFailedProbeIsAmbiguous(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	s := schema(t)
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	frags, files, err := tb.WriteFragments(ctx, s, rows(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	txn := tb.NewTxn(1)
	txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
	v2 := table.ManifestKey(2)
	// The put lands and reports a timeout; every read-back of version 2
	// fails; the second attempt's probe of version 2 fails.
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: v2, Nth: 1, Action: storage.LandThenFail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyPrefix: v2, Action: storage.Fail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpAttributes}, KeyPrefix: v2, Nth: 2, Action: storage.Fail(nil)})
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpList}, KeyPrefix: table.VersionsDir, Nth: 2, Action: storage.Fail(nil)})
	_, err = tb.CommitOrClean(ctx, txn, files)
	f.faulty.Clear()
	m, rerr := table.ReadManifest(ctx, f.bucket, 2)
	if rerr != nil {
		t.Fatalf("the put of version 2 was to land: %v", rerr)
	}
	if m.TransactionUuid != txn.Uuid {
		t.Fatal("version 2 is not ours")
	}
	var ae *commit.AmbiguousError
	if err != nil && !errors.As(err, &ae) {
		t.Errorf("Commit returned %v: a plain error after an unresolved put lets the caller delete a committed version's files", err)
	}
	for _, k := range files {
		if _, err := f.bucket.Attributes(ctx, k); err != nil {
			t.Errorf("data file %s of committed version 2 is gone: %v", k, err)
		}
	}
}

// racingAppend parks tb's next version put, lets other append theirs, then
// releases tb's put: tb's append read the table before other's committed.
func racingAppend(t *testing.T, f *fixture, tb *ops.Table, ours, theirs []table.Row) error {
	t.Helper()
	gate := make(chan struct{})
	rule := f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
	done := make(chan error, 1)
	go func() {
		_, err := tb.Append(context.Background(), ours)
		done <- err
	}()
	waitFor(t, func() bool { return rule.Matched() > 0 })
	mustAppend(t, f.other(t), theirs)
	f.faulty.Remove(rule)
	close(gate)
	return <-done
}

// Primary-key uniqueness of an append is a precondition of its commit, not
// only of its plan: an append that read the table before another append of
// one of its keys committed conflicts, checks its keys again and fails; one
// whose keys are disjoint (in range or only in hashes) commits.
func TestRacingAppendsOfOneKey(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ours, theirs  []table.Row
		wantErr       string
		wantConflicts float64
	}{
		{"one shared key", rows(100, 3), rows(101, 1), "primary key 101 already exists", 1},
		{"disjoint ranges", rows(100, 3), rows(200, 1), "", 0},
		{"interleaved, no shared key", []table.Row{{int64(100), "a"}, {int64(300), "b"}}, rows(200, 1), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "mem://")
			tb := f.table(t, commit.Config{})
			createWithRows(t, tb, 5)
			err := racingAppend(t, f, tb, tc.ours, tc.theirs)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
			got := promtest.ToFloat64(counter(t, f.reg, "compactord_commit_conflicts_total", "ours", "append", "theirs", "append", "decision", "retryable"))
			if got != tc.wantConflicts {
				t.Fatalf("%v retryable append-vs-append conflicts, want %v", got, tc.wantConflicts)
			}
			keys := scanKeys(t, tb, 0) // fails on a key live twice
			for _, r := range tc.theirs {
				if !keys[r[0].(int64)] {
					t.Fatalf("their key %v is not live", r[0])
				}
			}
			for _, r := range tc.ours {
				if k := r[0].(int64); keys[k] != (tc.wantErr == "") && !slices.ContainsFunc(tc.theirs, func(o table.Row) bool { return o[0] == r[0] }) {
					t.Fatalf("our key %d live = %v", k, keys[k])
				}
			}
			if tc.wantErr != "" {
				if n := len(listKeys(t, f.bucket, table.DataDir)); n != 2 {
					t.Fatalf("%d data files, want 2 (the failed append's removed)", n)
				}
			}
		})
	}
}
