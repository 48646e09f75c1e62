package merge_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func up(id int64, cat string) memwal.Record {
	return memwal.Record{Op: memwal.Upsert, Row: row(id, cat)}
}
func tomb(id int64) memwal.Record {
	return memwal.Record{Op: memwal.Delete, Row: table.Row{id, nil, nil}}
}

// Merge-insert semantics on a small case: within one job the later
// generation wins; upserts replace base rows exactly once, tombstones
// delete, new keys insert, tombstones of absent keys do nothing.
func TestMergeInsertSemantics(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	want := createTable(t, tb, 5, 5, "s0") // keys 0..4 in fragment 0
	g1 := []memwal.Record{up(2, "x"), tomb(3), up(10, "new"), tomb(99)}
	g2 := []memwal.Record{up(10, "newer"), up(3, "back"), tomb(4)}
	writeGeneration(t, tb.Bucket, "s0", g1)
	writeGeneration(t, tb.Bucket, "s0", g2)
	want.apply(g1)
	want.apply(g2)

	res, err := newMerger(t, tb).Run(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("results %+v", res)
	}
	r := res[0]
	if r.From != 1 || r.Through != 2 || r.Inserted != 1 || r.Updated != 2 || r.Deleted != 1 || r.SSTableRows != 7 || r.Lookup != "scan" {
		t.Fatalf("result %+v", r)
	}
	equalRef(t, scan(t, tb), want)
	m := latest(t, tb)
	if got := table.MemWal(m).CompactedSstables["s0"]; got != 2 {
		t.Fatalf("compacted_sstables = %d", got)
	}
	// Fragment 0 lost rows 2, 3, 4 to deletions; the new rows sit in one
	// new fragment.
	f0 := table.FragmentByID(m, 0)
	if f0 == nil || f0.DeletionFile == nil || f0.DeletionFile.NumDeleted != 3 || len(m.Fragments) != 2 {
		t.Fatalf("fragments %v", m.Fragments)
	}
	// Nothing left: a second run commits nothing.
	v := m.Version
	if res, err := newMerger(t, tb).Run(ctx, ""); err != nil || len(res) != 0 || latest(t, tb).Version != v {
		t.Fatalf("second run: %+v %v", res, err)
	}
}

// Merge-insert end to end, randomized over several rounds and two shards
// with disjoint keys: after every merge the table equals the reference.
func TestMergeInsertEndToEnd(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		tb := openTable(t, url, nil)
		want := createTable(t, tb, 300, 100, "s0", "s1")
		rng := rand.New(rand.NewPCG(7, 11))
		shardOf := func(id int64) string { return []string{"s0", "s1"}[id%2] }
		for round := 0; round < 4; round++ {
			// One to three generations per shard before each merge.
			for gen := 0; gen <= round%3; gen++ {
				recs := randomRecords(rng, 60, 500, "r"+string(rune('a'+round)))
				byShard := map[string][]memwal.Record{}
				for _, r := range recs {
					s := shardOf(r.Row[0].(int64))
					byShard[s] = append(byShard[s], r)
				}
				for _, s := range []string{"s0", "s1"} {
					writeGeneration(t, tb.Bucket, s, byShard[s])
					want.apply(byShard[s])
				}
			}
			res, err := newMerger(t, tb).Run(ctx, "")
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if len(res) != 2 {
				t.Fatalf("round %d: %+v", round, res)
			}
			equalRef(t, scan(t, tb), want)
		}
		d := table.MemWal(latest(t, tb))
		if d.CompactedSstables["s0"] != 7 || d.CompactedSstables["s1"] != 7 {
			t.Fatalf("compacted %v", d.CompactedSstables)
		}
	})
}

// Lance #8262: a job whose generations another merge already
// committed fails whole with ErrIncompatible; no row lands and its files
// are removed.
func TestStaleCompactedPositionFailsWhole(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	want := createTable(t, tb, 10, 10, "s0")
	g1 := []memwal.Record{up(1, "g1"), up(20, "g1")}
	g2 := []memwal.Record{tomb(2), up(21, "g2")}
	writeGeneration(t, tb.Bucket, "s0", g1)
	writeGeneration(t, tb.Bucket, "s0", g2)
	want.apply(g1)
	want.apply(g2)

	mg := newMerger(t, tb)
	_, stale, _, err := mg.PlanLatest(ctx, "")
	if err != nil || len(stale) != 1 {
		t.Fatalf("plan: %v %v", stale, err)
	}
	// Someone else merges first.
	if _, err := newMerger(t, openTable(t, "mem://", func(storage.Bucket) storage.Bucket { return tb.Bucket })).Run(ctx, ""); err != nil {
		t.Fatal(err)
	}
	head := latest(t, tb)
	dataBefore := listKeys(t, tb.Bucket, table.DataDir)
	delBefore := listKeys(t, tb.Bucket, table.DeletionsDir)

	for _, job := range []merge.Job{stale[0], {Shard: "s0", ReadVersion: stale[0].ReadVersion, From: 1, Through: 1, SSTables: stale[0].SSTables[:1]}} {
		_, err = mg.Execute(ctx, job)
		if !errors.Is(err, commit.ErrIncompatible) {
			t.Fatalf("stale job %d..%d: %v, want ErrIncompatible", job.From, job.Through, err)
		}
	}
	if v := latest(t, tb).Version; v != head.Version {
		t.Fatalf("a stale merge committed version %d", v)
	}
	if got := listKeys(t, tb.Bucket, table.DataDir); !slices.Equal(got, dataBefore) {
		t.Fatalf("stale merge left data files:\n%v\n%v", dataBefore, got)
	}
	if got := listKeys(t, tb.Bucket, table.DeletionsDir); !slices.Equal(got, delBefore) {
		t.Fatalf("stale merge left deletion files")
	}
	equalRef(t, scan(t, tb), want)
	if h := mergeHistory(t, tb); strings.Join(h, ",") != "s0@2" {
		t.Fatalf("merge history %v", h)
	}
}

// racingPair makes a table with gens pending generations of shard s0 and
// two handles on it: A plain, B with every version put parked until the
// returned channel releases it (closed: all; a send: one).
func racingPair(t *testing.T, gens int, seed uint64) (tbA, tbB *ops.Table, want ref, rule *storage.FaultRule, gate chan struct{}) {
	t.Helper()
	url := "mem://" + testutil.UniqueName(t)
	tbA = openTable(t, url, nil)
	want = createTable(t, tbA, 20, 10, "s0")
	for g := 0; g < gens; g++ {
		recs := randomRecords(rand.New(rand.NewPCG(uint64(g), seed)), 8, 30, "g")
		writeGeneration(t, tbA.Bucket, "s0", recs)
		want.apply(recs)
	}
	var faulty *storage.Faulty
	tbB = openTable(t, url, func(b storage.Bucket) storage.Bucket { faulty = storage.NewFaulty(b); return faulty })
	gate = make(chan struct{})
	rule = faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
	return tbA, tbB, want, rule, gate
}

type runOut struct {
	res []merge.Result
	err error
}

// runAsync runs m on shard in a goroutine; the channel gets its outcome.
func runAsync(ctx context.Context, m *merge.Merger, shard string) <-chan runOut {
	done := make(chan runOut, 1)
	go func() {
		res, err := m.Run(ctx, shard)
		done <- runOut{res, err}
	}()
	return done
}

// Racing merges, deterministic: B plans and stalls at its commit while A
// merges the same generations; B's commit is then incompatible and is
// skipped. Exactly one commit per generation.
func TestRacingMergesOneWins(t *testing.T) {
	ctx := t.Context()
	tbA, tbB, want, rule, release := racingPair(t, 2, 1)

	bDone := runAsync(ctx, newMerger(t, tbB), "s0")
	waitFor(t, "merge B to reach its commit", func() bool { return rule.Matched() >= 1 })
	resA, err := newMerger(t, tbA).Run(ctx, "s0")
	if err != nil || len(resA) != 1 || resA[0].Skipped {
		t.Fatalf("merge A: %+v %v", resA, err)
	}
	close(release)
	b := <-bDone
	if b.err != nil || len(b.res) != 1 || !b.res[0].Skipped || !strings.Contains(b.res[0].Reason, "already merged") {
		t.Fatalf("merge B: %+v %v", b.res, b.err)
	}
	if h := mergeHistory(t, tbA); strings.Join(h, ",") != "s0@2" {
		t.Fatalf("merge history %v, want one commit through 2", h)
	}
	equalRef(t, scan(t, tbA), want)
	assertNoOrphans(t, tbA)
}

// A merge that keeps losing to another instance's progress does not give
// up: each loss is a generation merged elsewhere, not a failed attempt.
// (Before, three losses in a row exhausted replan_attempts and the job
// failed, which quarantined busy tables served by two instances.)
func TestLosingToProgressIsNotAFailure(t *testing.T) {
	ctx := t.Context()
	const gens = 3
	tbA, tbB, want, rule, tokens := racingPair(t, gens, 7)
	mB, err := merge.New(merge.Config{MaxGenerations: 1, ReplanAttempts: 1}, tbB)
	if err != nil {
		t.Fatal(err)
	}
	mA, err := merge.New(merge.Config{MaxGenerations: 1}, tbA)
	if err != nil {
		t.Fatal(err)
	}
	bDone := runAsync(ctx, mB, "s0")
	for i := 1; i <= gens; i++ {
		waitFor(t, fmt.Sprintf("merge B at commit %d", i), func() bool { return rule.Matched() >= i })
		_, jobs, _, err := mA.PlanLatest(ctx, "s0")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("plan A: %v %+v", err, jobs)
		}
		if _, err := mA.Execute(ctx, jobs[0]); err != nil {
			t.Fatal(err)
		}
		tokens <- struct{}{}
	}
	b := <-bDone
	if b.err != nil || len(b.res) != gens {
		t.Fatalf("merge B: %+v %v", b.res, b.err)
	}
	for _, r := range b.res {
		if !r.Skipped || !strings.Contains(r.Reason, "already merged") {
			t.Fatalf("merge B result %+v", r)
		}
	}
	if h := mergeHistory(t, tbA); strings.Join(h, ",") != "s0@1,s0@2,s0@3" {
		t.Fatalf("merge history %v", h)
	}
	equalRef(t, scan(t, tbA), want)
	assertNoOrphans(t, tbA)
}

// Racing merges, free-running: several merge jobs, each with its own
// bucket handle and committer, race while generations keep arriving. Every
// generation is committed exactly once and the table equals the reference.
func TestRacingMergesFreeRunning(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		tb := openTable(t, url, nil)
		want := createTable(t, tb, 50, 25, "s0")
		rng := rand.New(rand.NewPCG(3, 4))
		const gens = 6
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := 0; g < gens; g++ {
			recs := randomRecords(rng, 10, 80, "g"+string(rune('a'+g)))
			writeGeneration(t, tb.Bucket, "s0", recs)
			want.apply(recs)
			if g%2 == 1 {
				for i := 0; i < 3; i++ {
					wg.Add(1)
					mg := newMerger(t, openTable(t, url, nil))
					go func() {
						defer wg.Done()
						if _, err := mg.Run(ctx, "s0"); err != nil {
							errs <- err
						}
					}()
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("merge: %v", err)
		}
		// A last merge picks up anything the racers left.
		if _, err := newMerger(t, tb).Run(ctx, "s0"); err != nil {
			t.Fatal(err)
		}
		h := mergeHistory(t, tb)
		last := uint64(0)
		for _, e := range h {
			var through uint64
			for _, c := range strings.TrimPrefix(e, "s0@") {
				through = through*10 + uint64(c-'0')
			}
			if through <= last {
				t.Fatalf("generation merged twice: history %v", h)
			}
			last = through
		}
		if last != gens {
			t.Fatalf("history %v ends at %d, want %d", h, last, gens)
		}
		equalRef(t, scan(t, tb), want)
		assertNoOrphans(t, tb)
	})
}

// assertNoOrphans checks that every data and deletion file is referenced by
// some version: failed merges removed their files.
func assertNoOrphans(t testing.TB, tb *ops.Table) {
	t.Helper()
	ctx := context.Background()
	used := map[string]bool{}
	head := latest(t, tb)
	for v := uint64(1); v <= head.Version; v++ {
		m, err := table.ReadManifest(ctx, tb.Bucket, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Fragments {
			used[f.DataFile.GetPath()] = true
			used[f.DeletionFile.GetPath()] = true
		}
	}
	for _, dir := range []string{table.DataDir, table.DeletionsDir} {
		for _, k := range listKeys(t, tb.Bucket, dir) {
			if !used[k] {
				t.Errorf("orphan %s", k)
			}
		}
	}
}

// A delete that commits between the merge's plan and its commit is
// rebased, not hidden: the merge commits with its plan's read version
// (Lance #6653), so the deleted row stays deleted.
func TestMergeRebasesOverConcurrentDelete(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	want := createTable(t, tb, 10, 10, "s0")
	g1 := []memwal.Record{up(3, "g1"), tomb(5)}
	writeGeneration(t, tb.Bucket, "s0", g1)
	want.apply(g1)
	mg := newMerger(t, tb)
	_, jobs, _, err := mg.PlanLatest(ctx, "")
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Keys: []table.Row{{int64(7), nil, nil}}}); err != nil {
		t.Fatal(err)
	}
	delete(want, 7)
	res, err := mg.Execute(ctx, jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.ReadVersion != jobs[0].ReadVersion {
		t.Fatalf("read version %d, planned %d", res.ReadVersion, jobs[0].ReadVersion)
	}
	equalRef(t, scan(t, tb), want)
}

// The catch-up derivation through real commits: credit comes
// from the read version, appends between the read and the commit do not
// block it, an index that stops covering the table carries its position
// forward without gaining, and a commit that changes nothing leaves the
// MemWAL segment untouched.
func TestCatchupThroughRealCommits(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	createTable(t, tb, 20, 10, "s0") // fragments 0, 1
	mg := newMerger(t, tb)
	mergeGen := func(recs ...memwal.Record) {
		t.Helper()
		writeGeneration(t, tb.Bucket, "s0", recs)
		if _, err := mg.Run(ctx, "s0"); err != nil {
			t.Fatal(err)
		}
	}
	catchup := func() map[string]uint64 {
		t.Helper()
		out := map[string]uint64{}
		for n, sg := range table.MemWal(latest(t, tb)).IndexCatchup {
			for s, g := range sg.Generations {
				out[n+"/"+s] = g
			}
		}
		return out
	}
	appendRow := func(id int64) {
		t.Helper()
		if _, err := tb.Append(ctx, []table.Row{row(id, "app")}); err != nil {
			t.Fatal(err)
		}
	}
	mergeGen(up(100, "a")) // compacted 1, fragment 2
	mergeGen(up(101, "b")) // compacted 2, fragment 3

	// An index built at R covering every fragment of R; an append lands
	// between its read and its commit, and must not block credit.
	r := latest(t, tb)
	txn := indexTxn(t, tb, r, "idx", liveIDs(r), 1)
	appendRow(200) // fragment 4, unindexed
	if _, err := tb.Committer.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if got := catchup(); got["idx/s0"] != 2 || len(got) != 1 {
		t.Fatalf("after the index build: %v, want idx/s0 = 2 (R's compacted position)", got)
	}
	// A merge whose read version has the unindexed fragment 4: unproven,
	// the index is unchanged, so its position carries forward (not 3).
	mergeGen(up(102, "c")) // compacted 3, fragment 5
	if got := catchup(); got["idx/s0"] != 2 {
		t.Fatalf("after merge 3: %v, want idx/s0 carried at 2", got)
	}
	// Catch up with a delta segment over the unindexed fragments: proven
	// at its read version, credited with R's compacted position, 3.
	r = latest(t, tb)
	covered := roaring.BitmapOf(0, 1, 2, 3)
	delta := roaring.New()
	for _, id := range liveIDs(r) {
		if !covered.Contains(id) {
			delta.Add(id)
		}
	}
	if _, err := tb.Committer.Commit(ctx, indexTxn(t, tb, r, "idx", delta.ToArray(), 1)); err != nil {
		t.Fatal(err)
	}
	if got := catchup(); got["idx/s0"] != 3 {
		t.Fatalf("after the catch-up segment: %v, want 3", got)
	}
	// An append changes nothing of the MemWAL index: same segment.
	before := table.FindIndex(latest(t, tb), table.MemWalIndexName)
	appendRow(201)
	after := table.FindIndex(latest(t, tb), table.MemWalIndexName)
	if before.Uuid != after.Uuid || before.DatasetVersion != after.DatasetVersion {
		t.Fatalf("a no-op append churned the MemWAL index: %s@%d -> %s@%d", before.Uuid, before.DatasetVersion, after.Uuid, after.DatasetVersion)
	}
	// The append's fragment is unindexed at the next merge's read version:
	// unproven, so the position carries at 3 and is not raised to 4.
	mergeGen(up(103, "d"))
	if got := catchup(); got["idx/s0"] != 3 {
		t.Fatalf("after merge 4: %v, want 3", got)
	}
	// Catch up again (credited 4), then merge generation 5 from a read
	// version the index fully covers: the credit is capped by the read
	// version's compacted position, 4, not the 5 the commit records
	// (credit is capped by the read version).
	r = latest(t, tb)
	if _, err := tb.Committer.Commit(ctx, indexTxn(t, tb, r, "idx", liveIDs(r), 1)); err != nil {
		t.Fatal(err)
	}
	if got := catchup(); got["idx/s0"] != 4 {
		t.Fatalf("after the second catch-up: %v, want 4", got)
	}
	mergeGen(up(104, "e"))
	if got := catchup(); got["idx/s0"] != 4 {
		t.Fatalf("after merge 5: %v, want 4 (capped by the read version)", got)
	}
	if c := table.MemWal(latest(t, tb)).CompactedSstables["s0"]; c != 5 {
		t.Fatalf("compacted %d", c)
	}
}

func liveIDs(m *pb.Manifest) []uint32 {
	var out []uint32
	for _, f := range m.Fragments {
		out = append(out, f.Id)
	}
	return out
}

// indexTxn builds a CreateIndex adding one segment of a metadata-only
// btree index over fields, planned at read version r.
func indexTxn(t testing.TB, tb *ops.Table, r *pb.Manifest, name string, frags []uint32, fields ...int32) *pb.Transaction {
	t.Helper()
	bm, err := roaring.BitmapOf(frags...).ToBytes()
	if err != nil {
		t.Fatal(err)
	}
	txn := tb.NewTxn(r.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{{
		Uuid: uuid.NewString(), Name: name, Type: "btree", FieldIds: fields,
		DatasetVersion: r.Version, FragmentBitmap: bm,
		Details: &pb.IndexMetadata_Scalar{Scalar: &pb.ScalarIndexDetails{}},
	}}}}
	return txn
}

// countingLocator records that the index path was taken.
type countingLocator struct {
	calls int
	inner merge.Locator
}

func (c *countingLocator) Name() string { return "index:pk" }
func (c *countingLocator) Locate(ctx context.Context, b storage.Bucket, m *pb.Manifest, keys *merge.KeySet, fn func(frag, off uint32, i int) error) error {
	c.calls++
	return c.inner.Locate(ctx, b, m, keys, fn)
}

// With an index over exactly the primary key, base rows are found through
// the index locator (the seam internal/index plugs into); without one, by
// a scan.
func TestPrimaryKeyIndexLocator(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	want := createTable(t, tb, 10, 10, "s0")
	if _, err := tb.Committer.Commit(ctx, indexTxn(t, tb, latest(t, tb), "pk", []uint32{0}, 0)); err != nil {
		t.Fatal(err)
	}
	if got := merge.PrimaryKeyIndex(latest(t, tb)); got != "pk" {
		t.Fatalf("primary-key index %q", got)
	}
	g := []memwal.Record{up(1, "x"), tomb(2)}
	writeGeneration(t, tb.Bucket, "s0", g)
	want.apply(g)
	loc := &countingLocator{inner: merge.ScanLocator{}}
	mg, err := merge.New(merge.Config{IndexLocator: func(name string) merge.Locator {
		if name != "pk" {
			t.Errorf("locator asked for %q", name)
		}
		return loc
	}}, tb)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mg.Run(ctx, "")
	if err != nil || len(res) != 1 || res[0].Lookup != "index:pk" || loc.calls != 1 {
		t.Fatalf("%+v %v calls=%d", res, err, loc.calls)
	}
	equalRef(t, scan(t, tb), want)
}

// A shard that is not configured, or a table without MemWAL, is a clear
// error; a blocked shard is reported, not merged past.
func TestRunErrors(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	createTable(t, tb, 3, 3)
	if _, err := newMerger(t, tb).Run(ctx, ""); err == nil || !strings.Contains(err.Error(), "no MemWAL configured") {
		t.Fatalf("no MemWAL: %v", err)
	}
	if _, err := memwal.Configure(ctx, tb, []string{"s0"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newMerger(t, tb).Run(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `shard "nope" is not configured`) {
		t.Fatalf("unknown shard: %v", err)
	}
}

// With a real btree index over the primary key (internal/index), a small
// merge finds base rows through the index and scans only the fragments the
// index does not cover yet; a large one scans.
func TestMergeThroughRealPrimaryKeyIndex(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	want := createTable(t, tb, 300, 100)
	if _, err := index.Create(ctx, tb, index.Spec{Name: "pk", Column: "id", Type: index.TypeBTree}, index.BuildConfig{}); err != nil {
		t.Fatal(err)
	}
	var more []table.Row
	for i := int64(300); i < 350; i++ {
		more = append(more, row(i, "base"))
		want[i] = "base"
	}
	if _, err := tb.Append(ctx, more); err != nil { // unindexed fragment
		t.Fatal(err)
	}
	if _, err := memwal.Configure(ctx, tb, []string{"s0"}, []string{"pk"}); err != nil {
		t.Fatal(err)
	}
	g := []memwal.Record{up(5, "x"), up(150, "x"), up(320, "x"), up(999, "new"), tomb(7), tomb(330), tomb(12345)}
	writeGeneration(t, tb.Bucket, "s0", g)
	want.apply(g)
	res, err := newMerger(t, tb).Run(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Lookup != "index:pk" || res[0].Updated != 3 || res[0].Deleted != 2 || res[0].Inserted != 1 {
		t.Fatalf("%+v", res)
	}
	equalRef(t, scan(t, tb), want)

	// Above the key limit: a scan, with the same outcome.
	g2 := []memwal.Record{up(6, "y"), up(999, "y"), tomb(320)}
	writeGeneration(t, tb.Bucket, "s0", g2)
	want.apply(g2)
	mg, err := merge.New(merge.Config{IndexLookupMaxKeys: 2}, tb)
	if err != nil {
		t.Fatal(err)
	}
	res, err = mg.Run(ctx, "")
	if err != nil || len(res) != 1 || res[0].Lookup != "scan" {
		t.Fatalf("%+v %v", res, err)
	}
	equalRef(t, scan(t, tb), want)
}

// A timestamp primary key with an index over it: the index locator encodes
// the keys as timestamps (table.AppendKey stores them like int64s).
func TestMergeThroughTimestampKeyIndex(t *testing.T) {
	ctx := t.Context()
	tb := openTable(t, "mem://", nil)
	s, err := table.ParseSchema("ts:timestamp,cat:string", []string{"ts"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	var rows []table.Row
	for i := int64(0); i < 5; i++ {
		rows = append(rows, table.Row{table.Timestamp(i), "base"})
	}
	if _, err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Name: "byts", Column: "ts", Type: index.TypeBTree}, index.BuildConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := memwal.Configure(ctx, tb, []string{"s0"}, []string{"byts"}); err != nil {
		t.Fatal(err)
	}
	w, err := memwal.NewWriter(memwal.Config{Shard: "s0", Schema: s}, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	recs := []memwal.Record{{Op: memwal.Upsert, Row: table.Row{table.Timestamp(2), "wal"}}, {Op: memwal.Upsert, Row: table.Row{table.Timestamp(9), "new"}},
		{Op: memwal.Delete, Row: table.Row{table.Timestamp(4), nil}}}
	if _, err := w.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := newMerger(t, tb).Run(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Lookup != "index:byts" || res[0].Updated != 1 || res[0].Deleted != 1 || res[0].Inserted != 1 {
		t.Fatalf("%+v", res)
	}
	got := map[table.Timestamp]string{}
	if _, err := tb.Scan(ctx, 0, func(r table.Row) error { got[r[0].(table.Timestamp)] = r[1].(string); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	want := map[table.Timestamp]string{0: "base", 1: "base", 2: "wal", 3: "base", 9: "new"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// A merge found its keys' base rows at its read version; an append of one
// of its new keys committed before the merge's commit conflicts with it,
// and the re-planned merge replaces the appended row instead of adding a
// second live row of the key.
func TestMergeRacingAppendOfItsKey(t *testing.T) {
	ctx := t.Context()
	url := "mem://" + testutil.UniqueName(t)
	tbA := openTable(t, url, nil)
	want := createTable(t, tbA, 20, 10, "s0")
	g := []memwal.Record{up(5, "wal"), up(500, "wal")}
	writeGeneration(t, tbA.Bucket, "s0", g)
	var faulty *storage.Faulty
	tbB := openTable(t, url, func(b storage.Bucket) storage.Bucket { faulty = storage.NewFaulty(b); return faulty })
	gate := make(chan struct{})
	rule := faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
	done := runAsync(ctx, newMerger(t, tbB), "s0")
	waitFor(t, "merge parked at its commit", func() bool { return rule.Matched() > 0 })
	if _, err := tbA.Append(ctx, []table.Row{row(500, "appended")}); err != nil {
		t.Fatal(err)
	}
	faulty.Remove(rule)
	close(gate)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	want.apply(g)
	equalRef(t, scan(t, tbA), want) // scan fails on a key live twice
}
