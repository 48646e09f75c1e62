package commit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// Tests of the fast path: a commit whose read version is the committer's
// fresh head hint puts the next version without finding the head first, and
// lists the head alongside the put as a defence (docs/format.md, "Commit
// protocol").

// offsetClock is the wall clock moved forward by a settable offset.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *offsetClock) Sleep(ctx context.Context, d time.Duration) error {
	return commit.RealClock{}.Sleep(ctx, d)
}

func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// tableWithClock is f.table with an injected clock.
func (f *fixture) tableWithClock(t *testing.T, clock commit.Clock) *ops.Table {
	t.Helper()
	c, err := commit.NewCommitter(commit.Config{BaseBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}, f.faulty, clock, f.metrics, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(f.faulty, c, nil, nil)
}

// other is a second, independent committer on the same store, bypassing
// f.faulty's rules.
func (f *fixture) other(t *testing.T) *ops.Table {
	t.Helper()
	return newFixtureShared(t, f)
}

func fastPath(t *testing.T, f *fixture, outcome string) float64 {
	t.Helper()
	return promtest.ToFloat64(counter(t, f.reg, "compactord_commit_fast_path_total", "outcome", outcome))
}

func fastPathTotal(t *testing.T, f *fixture) float64 {
	t.Helper()
	n := 0.0
	for _, o := range []string{"committed", "followed", "lost", "gap", "unverified", "ambiguous"} {
		n += fastPath(t, f, o)
	}
	return n
}

// appendTxn writes rows and returns an append transaction against read.
func appendTxn(t *testing.T, tb *ops.Table, read uint64, rs []table.Row) (*pb.Transaction, []string) {
	t.Helper()
	frags, files, err := tb.WriteFragments(context.Background(), schema(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	txn := tb.NewTxn(read)
	txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
	return txn, files
}

func versions(t *testing.T, b storage.Bucket) []uint64 {
	t.Helper()
	vs, err := table.ListVersions(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// onHeadListing installs a rule on the head listings (of the versions
// directory): the nth one, or every one with nth 0.
func (f *fixture) onHeadListing(nth int, a storage.Action) *storage.FaultRule {
	return f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpList}, KeyPrefix: table.VersionsDir, Nth: nth, Action: a})
}

// landedAs reports whether version v is stored with transaction uuid.
func landedAs(b storage.Bucket, v uint64, uuid string) bool {
	m, err := table.ReadManifest(context.Background(), b, v)
	return err == nil && m.TransactionUuid == uuid
}

// commitWhileListingHeld commits rows 5..9 through tb against version 2
// while the head listing (the nth, or every one with nth 0) is held, and
// returns once version 3 has landed as the transaction's: the put did not
// wait for the listing. finish releases the listing and returns the
// commit's result, failing the test if the commit failed.
func commitWhileListingHeld(t *testing.T, f *fixture, tb *ops.Table, nth int) (list *storage.FaultRule, txn *pb.Transaction, finish func() *commit.Result) {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	list = f.onHeadListing(nth, storage.Block(release))
	txn, _ = appendTxn(t, tb, 2, rows(5, 5))
	done := make(chan error, 1)
	var res *commit.Result
	go func() {
		var err error
		res, err = tb.Committer.Commit(context.Background(), txn)
		done <- err
	}()
	waitFor(t, func() bool { return landedAs(f.bucket, 3, txn.Uuid) })
	return list, txn, func() *commit.Result {
		t.Helper()
		open()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// overtaken returns a table at url whose committer holds a fresh hint of
// version 2 (rows 0..n-1, appended through it) while the head is version
// 4: another committer appended rows 100..104 and 200..204 as versions 3
// and 4. The fixture's other committers see the same store.
func overtaken(t *testing.T, url string, n int) (*fixture, *ops.Table, *commit.Result) {
	t.Helper()
	f := newFixture(t, url)
	tb := f.table(t, commit.Config{})
	r2 := createWithRows(t, tb, n)
	other := f.other(t)
	for i := 1; i <= 2; i++ {
		mustAppend(t, other, rows(100*i, 5))
	}
	return f, tb, r2
}

// wantVersions fails unless the store lists exactly the versions want,
// newest first; why says what a difference means.
func wantVersions(t *testing.T, b storage.Bucket, why string, want ...uint64) {
	t.Helper()
	if vs := versions(t, b); !slices.Equal(vs, want) {
		t.Fatalf("versions %v, want %v: %s", vs, want, why)
	}
}

// wantAmbiguous fails unless err is an AmbiguousError for version v.
func wantAmbiguous(t *testing.T, err error, v uint64) {
	t.Helper()
	var ae *commit.AmbiguousError
	if !errors.As(err, &ae) || ae.Version != v {
		t.Fatalf("got %v, want an AmbiguousError for version %d", err, v)
	}
}

// wantFilesKept fails if any of files is gone from b; whose names the
// version that references them.
func wantFilesKept(t *testing.T, b storage.Bucket, files []string, whose string) {
	t.Helper()
	for _, k := range files {
		if _, err := b.Attributes(context.Background(), k); err != nil {
			t.Fatalf("file %s of %s was deleted: %v", k, whose, err)
		}
	}
}

// With a fresh hint (the committer's own last commit), the put of the next
// version is issued without waiting for the head listing: it lands while
// the listing is held, and the listing still runs.
func TestFastPathPutsWithoutWaitingForTheListing(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		tb := f.table(t, commit.Config{})
		createWithRows(t, tb, 5)
		base := fastPath(t, f, "committed")
		list, _, finish := commitWhileListingHeld(t, f, tb, 0)
		// The listing runs beside the put, so it may reach the store
		// after the put landed; wait for it, then check it was the only one.
		waitFor(t, func() bool { return list.Matched() >= 1 })
		if list.Matched() != 1 {
			t.Fatalf("%d head listings issued alongside the put, want 1", list.Matched())
		}
		res := finish()
		if res.Manifest.Version != 3 || res.Attempts != 1 || fastPath(t, f, "committed") != base+1 {
			t.Fatalf("version %d after %d attempts, fast path committed %v times", res.Manifest.Version, res.Attempts, fastPath(t, f, "committed")-base)
		}
		if res.Manifest.ParentTransactionUuid == "" {
			t.Fatal("the manifest does not name its parent")
		}
		wantRows(t, tb, 10)
	})
}

// A hint learned from a listing (Committer.LatestVersion) counts too.
func TestFastPathAfterLatestVersion(t *testing.T) {
	f := newFixture(t, "mem://")
	tb := f.table(t, commit.Config{})
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, f.other(t), rows(0, 5))
	head, err := tb.Committer.LatestVersion(ctx)
	if err != nil || head != 2 {
		t.Fatalf("head %d, %v", head, err)
	}
	// The first head listing fails: the fast path does not need it.
	f.onHeadListing(1, storage.Fail(nil))
	txn, _ := appendTxn(t, tb, head, rows(5, 5))
	res, err := tb.Committer.Commit(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Version != 3 || fastPath(t, f, "committed") != 1 {
		t.Fatalf("version %d, fast path committed %v", res.Manifest.Version, fastPath(t, f, "committed"))
	}
}

// A hint older than HintTTL is not used: the commit finds the head first,
// so a failing head listing fails it before any put.
func TestStaleHintTakesTheNormalPath(t *testing.T) {
	f := newFixture(t, "mem://")
	clock := &offsetClock{}
	tb := f.tableWithClock(t, clock)
	ctx := context.Background()
	createWithRows(t, tb, 5)
	fast := fastPathTotal(t, f)
	clock.advance(commit.HintTTL)
	f.onHeadListing(1, storage.Fail(nil))
	put := f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir})
	txn, files := appendTxn(t, tb, 2, rows(5, 5))
	if _, err := tb.CommitOrClean(ctx, txn, files); err == nil || !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("got %v, want the injected listing failure", err)
	}
	if put.Matched() != 0 || fastPathTotal(t, f) != fast {
		t.Fatalf("%d puts issued, fast path taken %v times: a stale hint was used", put.Matched(), fastPathTotal(t, f)-fast)
	}
	// Just inside the TTL the same commit takes the fast path.
	clock.off.Store(0)
	mustAppend(t, tb, rows(5, 5))
	clock.advance(commit.HintTTL - time.Second)
	f.onHeadListing(1, storage.Fail(nil))
	txn, files = appendTxn(t, tb, 3, rows(10, 5))
	res, err := tb.CommitOrClean(ctx, txn, files)
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Version != 4 || fastPathTotal(t, f) != fast+2 {
		t.Fatalf("version %d, fast path taken %v times, want 2", res.Manifest.Version, fastPathTotal(t, f)-fast)
	}
}

// A manufactured gap: cleanup on a host whose clock runs an hour ahead
// deletes version 3 while keeping the tagged version 2 and the head 4. A
// committer whose fresh hint says 2 puts version 3 into the gap; the
// listing alongside shows 4, which was built on another version 3, so the
// commit must not succeed below the head: the stray version is removed and
// the commit fails without claiming success.
func TestFastPathIntoAGapDoesNotCommitBelowTheHead(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f, tb, _ := overtaken(t, url, 5)
		ctx := context.Background()
		if err := f.bucket.Put(ctx, table.TagsDir+"keep", []byte("2")); err != nil {
			t.Fatal(err)
		}
		skewed := time.Now().Add(time.Hour)
		if _, err := cleanup.Run(ctx, f.bucket, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 1, MinAge: time.Hour}, Concurrency: 1}, skewed); err != nil {
			t.Fatal(err)
		}
		wantVersions(t, f.bucket, "after the skewed cleanup", 4, 2)
		txn, files := appendTxn(t, tb, 2, rows(50, 5))
		res, err := tb.CommitOrClean(ctx, txn, files)
		if err == nil {
			t.Fatalf("committed version %d below the head 4", res.Manifest.Version)
		}
		var ae *commit.AmbiguousError
		if errors.As(err, &ae) {
			t.Fatalf("got an ambiguous error %v; the gap was detected and the stray version removed", err)
		}
		if fastPath(t, f, "gap") != 1 {
			t.Fatalf("fast path gap = %v, want 1", fastPath(t, f, "gap"))
		}
		wantVersions(t, f.bucket, "the stray version 3 was to be removed", 4, 2)
		wantRows(t, tb, 15, 50)
		// Planned again from the head, the append commits.
		mustAppend(t, tb, rows(50, 5))
		wantRows(t, tb, 20)
	})
}

// If the stray version in a gap cannot be removed, the commit is
// ambiguous: its files must stay, since the version names them.
func TestFastPathGapNotRemovedIsAmbiguous(t *testing.T) {
	f, tb, _ := overtaken(t, "mem://", 5)
	ctx := context.Background()
	if err := f.bucket.Delete(ctx, table.ManifestKey(3)); err != nil {
		t.Fatal(err)
	}
	f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpDelete}, KeyPrefix: table.ManifestKey(3), Action: storage.Fail(nil)})
	txn, files := appendTxn(t, tb, 2, rows(50, 5))
	_, err := tb.CommitOrClean(ctx, txn, files)
	wantAmbiguous(t, err, 3)
	wantFilesKept(t, f.bucket, files, "the stray version 3")
}

// The listing alongside the put may see versions committed on top of ours
// after it landed; those are not a gap. Version 4, built on our version 3,
// names it as parent, and our commit stands.
func TestFastPathFollowedBySuccessorsIsNotAGap(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		tb := f.table(t, commit.Config{})
		createWithRows(t, tb, 5)
		_, txn, finish := commitWhileListingHeld(t, f, tb, 1)
		// Another writer commits on top of ours before our listing runs.
		r4 := mustAppend(t, f.other(t), rows(100, 5))
		if r4.Manifest.Version != 4 || r4.Manifest.ParentTransactionUuid != txn.Uuid {
			t.Fatalf("version %d with parent %q, want 4 on ours", r4.Manifest.Version, r4.Manifest.ParentTransactionUuid)
		}
		res := finish()
		if res.Manifest.Version != 3 || fastPath(t, f, "followed") != 1 || fastPath(t, f, "gap") != 0 {
			t.Fatalf("version %d, fast path followed %v gap %v", res.Manifest.Version, fastPath(t, f, "followed"), fastPath(t, f, "gap"))
		}
		wantVersions(t, f.bucket, "ours and its successor both stand", 4, 3, 2, 1)
		wantRows(t, tb, 15)
	})
}

// A lost race on the fast path goes round the normal path: the delete
// committed meanwhile is classified and ours rebased onto it.
func TestFastPathLostRaceRebases(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		tb := f.table(t, commit.Config{})
		read := createWithRows(t, tb, 100).Manifest
		ctx := context.Background()
		if _, _, err := f.other(t).Delete(ctx, read, deleteKeys(1, 2, 3)); err != nil {
			t.Fatal(err)
		}
		res, _, err := tb.Delete(ctx, read, deleteKeys(3, 50, 99))
		if err != nil {
			t.Fatal(err)
		}
		if fastPath(t, f, "lost") != 1 {
			t.Fatalf("fast path lost = %v, want 1", fastPath(t, f, "lost"))
		}
		if res.Manifest.Version != 4 || !res.Rebased || res.Attempts != 2 {
			t.Fatalf("version %d, rebased %v, attempts %d; want 4, true, 2", res.Manifest.Version, res.Rebased, res.Attempts)
		}
		wantRows(t, tb, 95, 1, 2, 3, 50, 99)
	})
}

// An ambiguous put on the fast path keeps the ambiguity rules: a landed put
// whose read-back fails, followed by a failing head listing, is an
// AmbiguousError and no file is deleted; with a working read-back the
// commit is recognised as ours.
func TestFastPathAmbiguousPut(t *testing.T) {
	for _, readBack := range []bool{false, true} {
		t.Run(map[bool]string{false: "unresolved", true: "read back"}[readBack], func(t *testing.T) {
			f := newFixture(t, "mem://")
			tb := f.table(t, commit.Config{})
			createWithRows(t, tb, 5)
			base := fastPath(t, f, "committed")
			v3 := table.ManifestKey(3)
			f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: v3, Nth: 1, Action: storage.LandThenFail(nil)})
			if !readBack {
				f.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyPrefix: v3, Action: storage.Fail(nil)})
				// The first listing runs alongside the put; the second
				// attempt's fails.
				f.onHeadListing(2, storage.Fail(nil))
			}
			txn, files := appendTxn(t, tb, 2, rows(5, 5))
			ctx := context.Background()
			res, err := tb.CommitOrClean(ctx, txn, files)
			f.faulty.Clear()
			if m, rerr := table.ReadManifest(ctx, f.bucket, 3); rerr != nil || m.TransactionUuid != txn.Uuid {
				t.Fatalf("version 3 was to land as ours: %v", rerr)
			}
			if readBack {
				if err != nil || res.Manifest.Version != 3 || fastPath(t, f, "committed") != base+1 {
					t.Fatalf("got %v, want version 3 recognised as ours on the fast path", err)
				}
				if got := promtest.ToFloat64(counter(t, f.reg, "compactord_commit_ambiguous_total", "resolution", "ours")); got != 1 {
					t.Fatalf("ambiguous{ours} = %v, want 1", got)
				}
			} else {
				wantAmbiguous(t, err, 3)
				if fastPath(t, f, "lost") != 1 {
					t.Fatalf("fast path lost = %v, want 1", fastPath(t, f, "lost"))
				}
			}
			wantFilesKept(t, f.bucket, files, "committed version 3")
		})
	}
}

// The normal path checks that the versions it classifies against chain
// (each names the one below as parent). A stray version in a gap (here
// forged: version 3 deleted under version 4, then another version 3 put in
// its place, as an undetected fast-path put would) breaks the chain; the
// commit fails instead of classifying against a change that was never
// committed on the line.
func TestNormalPathRefusesABrokenChain(t *testing.T) {
	f, _, r2 := overtaken(t, "mem://", 100)
	ctx := context.Background()
	if err := f.bucket.Delete(ctx, table.ManifestKey(3)); err != nil {
		t.Fatal(err)
	}
	// The stray version 3, built on version 2.
	m3, err := commit.BuildManifest(r2.Manifest, &pb.Transaction{ReadVersion: 2, Uuid: "stray", Operation: &pb.Transaction_ReserveFragments{ReserveFragments: &pb.ReserveFragments{NumFragments: 1}}}, r2.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	data, err := table.EncodeProto(m3)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.bucket.PutIfAbsent(ctx, table.ManifestKey(3), data); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.other(t).Delete(ctx, r2.Manifest, ops.DeleteSpec{Predicate: mustPredicate(t, "id < 50")})
	var ae *commit.AmbiguousError
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "was not built on version 3") {
		t.Fatalf("got %v, want a plain error naming the broken chain", err)
	}
	if vs := versions(t, f.bucket); vs[0] != 4 {
		t.Fatalf("versions %v: something committed across the gap", vs)
	}
}

func mustPredicate(t *testing.T, expr string) *ops.Predicate {
	t.Helper()
	p, err := ops.ParsePredicate(schema(t), expr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A version's timestamp is when it was committed, not when its transaction
// started, and never below its parent's: cleanup's age cutoff and trim's
// reader grace read it as "committed at".
func TestVersionTimestampIsCommitTime(t *testing.T) {
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sch, _ := table.ParseSchema("id:int64", []string{"id"})
	started := time.Now().Add(-2 * time.Hour).UnixMicro() // a long job
	before := time.Now()
	c, err := commit.NewCommitter(commit.Config{}, b, &offsetClock{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := c.Commit(ctx, &pb.Transaction{Uuid: uuid.NewString(), TimestampMicros: started,
		Operation: &pb.Transaction_Create{Create: &pb.Create{Schema: sch}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r1.Manifest.TimestampMicros; got < before.UnixMicro() || got > time.Now().UnixMicro() {
		t.Fatalf("version 1 stamped %s, committed between %s and now", time.UnixMicro(got), before)
	}
	behind := &offsetClock{}
	behind.advance(-time.Hour)
	c2, err := commit.NewCommitter(commit.Config{}, b, behind, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c2.Commit(ctx, &pb.Transaction{ReadVersion: 1, Uuid: uuid.NewString(), TimestampMicros: started,
		Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{{PhysicalRows: 1, DataFile: &pb.DataFile{Path: "data/x.parquet", SizeBytes: 1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Manifest.TimestampMicros != r1.Manifest.TimestampMicros {
		t.Fatalf("a committer an hour behind stamped %s after %s; timestamps must not go down", time.UnixMicro(r2.Manifest.TimestampMicros), time.UnixMicro(r1.Manifest.TimestampMicros))
	}
}
