package lancewal

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// waitUntil polls cond until it holds, failing the test after a minute
// (a generation's vector copy takes seconds on a loaded machine).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// flushIdle reports whether no frozen MemTable waits and no background
// flush runs.
func (w *Writer) flushIdle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frozen) == 0 && !w.bgRunning
}

// within runs f and fails the test if it has not returned within a minute:
// a call that waits for a parked flush would never return.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return while a flush was parked", what)
	}
}

type flushResult struct {
	g   *Generation
	err error
}

func flushAsync(ctx context.Context, w *Writer) <-chan flushResult {
	ch := make(chan flushResult, 1)
	go func() {
		g, err := w.Flush(ctx)
		ch <- flushResult{g, err}
	}()
	return ch
}

// parkGenerationWrites parks the next put of a generation's files until
// the returned function is called.
func parkGenerationWrites(fb *faults.Faulty) (*faults.FaultRule, func()) {
	release := make(chan struct{})
	r := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, KeyContains: "_gen_", Nth: 1, Action: faults.Block(release)})
	return r, func() { close(release) }
}

// TestWritesProceedWhileFlushing: while a flush is parked in the middle of
// writing its generation, Upserts, Deletes and another Flush's freeze go
// on; the parked flush publishes only the rows frozen before it began,
// and the next generation, in order, the rows written meanwhile.
func TestWritesProceedWhileFlushing(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, goRows(0, 4, "a-")); err != nil {
		t.Fatal(err)
	}
	coversA := w.nextWAL - 1
	rule, release := parkGenerationWrites(fb)
	first := flushAsync(ctx, w)
	waitUntil(t, "the flush to park", func() bool { return rule.Matched() >= 1 })

	within(t, "Upsert during a flush", func() error { return w.Upsert(ctx, goRows(10, 13, "b-")) })
	within(t, "Delete during a flush", func() error { return w.Delete(ctx, []any{int64(1)}) })
	if got := w.Buffered(); got != 4+3+1 {
		t.Fatalf("Buffered during the flush: %d rows, want 8 (4 frozen, 4 written since)", got)
	}
	second := flushAsync(ctx, w) // freezes the rows written meanwhile, then waits its turn
	waitUntil(t, "the second flush to freeze", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.frozen) == 2
	})
	within(t, "Upsert while two flushes wait", func() error { return w.Upsert(ctx, goRows(20, 21, "c-")) })
	release()

	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("flushes: %v, %v", r1.err, r2.err)
	}
	if r1.g.Rows != 4 || r1.g.CoversWAL != coversA {
		t.Errorf("first generation %+v, want 4 rows covering WAL position %d", r1.g, coversA)
	}
	if r2.g.Rows != 4 || r2.g.Tombstones != 1 || r2.g.Generation != r1.g.Generation+1 || r2.g.CoversWAL != coversA+2 {
		t.Errorf("second generation %+v, want 4 rows (1 tombstone) as generation %d covering WAL position %d", r2.g, r1.g.Generation+1, coversA+2)
	}
	if got := w.Buffered(); got != 1 {
		t.Errorf("after both flushes %d rows buffered, want 1", got)
	}
	ss, err := memwal.ReadShard(ctx, tbl.b, w.Shard())
	if err != nil {
		t.Fatal(err)
	}
	sst := ss.Manifest.GetSstables()
	if n := len(sst); n < 2 || sst[n-2].GetPath() != r1.g.Path || sst[n-1].GetPath() != r2.g.Path || ss.Manifest.GetReplayAfterWalEntryPosition() != r2.g.CoversWAL {
		t.Fatalf("shard manifest %v after generations %+v and %+v", ss.Manifest, r1.g, r2.g)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFlushFailureDuringWrites: a flush that fails after writes went on
// beside it loses nothing: the frozen rows stay buffered, and the next
// Flush publishes them and then the rows written meanwhile, as two
// generations in WAL order.
func TestFlushFailureDuringWrites(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, goRows(0, 5, "a-")); err != nil {
		t.Fatal(err)
	}
	rule, release := parkGenerationWrites(fb)
	fail := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: faults.Fail(errors.New("injected"))})
	first := flushAsync(ctx, w)
	waitUntil(t, "the flush to park", func() bool { return rule.Matched() >= 1 })
	within(t, "Upsert during a flush", func() error { return w.Upsert(ctx, goRows(100, 102, "b-")) })
	release()
	if r := <-first; r.err == nil || errors.Is(r.err, ErrFenced) || strings.Contains(r.err.Error(), "\n") {
		t.Fatalf("flush with a failing manifest put: %v", r.err)
	}
	fb.Remove(fail)
	if got := w.Buffered(); got != 7 {
		t.Fatalf("after the failed flush %d rows are buffered, want 7", got)
	}
	if err := w.Upsert(ctx, goRows(200, 201, "c-")); err != nil {
		t.Fatal(err)
	}
	g, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := memwal.ReadShard(ctx, tbl.b, w.Shard())
	if err != nil {
		t.Fatal(err)
	}
	sst := ss.Manifest.GetSstables()
	n := len(sst)
	if g.Rows != 3 || n < 2 || sst[n-1].GetPath() != g.Path || sst[n-2].GetPhysicalRows() != 5 || sst[n-2].GetGeneration()+1 != g.Generation ||
		ss.Manifest.GetReplayAfterWalEntryPosition() != w.nextWAL-1 {
		t.Fatalf("shard manifest %v after the retried flush returned %+v", ss.Manifest, g)
	}
}

// TestCrashDuringFlush: a writer that dies at any storage operation of a
// flush, with writes acknowledged during it, loses none of them: the
// shard's next owner replays exactly the rows no published generation
// holds, and its flush publishes them once.
func TestCrashDuringFlush(t *testing.T) {
	ctx := t.Context()
	for k := 0; ; k++ {
		dir := lancedb.CorpusDir(t, "memwal_1")
		b, err := storage.Open(ctx, (&url.URL{Scheme: "file", Path: dir}).String())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		cb := faults.NewCrashBucket(b)
		fb := faults.NewFaulty(cb)
		tbl := openBucket(fb, time.Now)
		w := mustWriter(t, tbl, int64(0))
		shard := w.Shard()
		ss0, err := memwal.ReadShard(ctx, b, shard)
		if err != nil {
			t.Fatal(err)
		}
		before := len(ss0.Manifest.GetSstables())
		if err := w.Upsert(ctx, goRows(0, 4, "a-")); err != nil {
			t.Fatal(err)
		}
		rule, release := parkGenerationWrites(fb)
		flushed := flushAsync(ctx, w)
		waitUntil(t, "the flush to park", func() bool { return rule.Matched() >= 1 })
		acked := 4
		within(t, "Upsert during a flush", func() error { return w.Upsert(ctx, goRows(10, 13, "b-")) })
		acked += 3
		cb.Arm(k)
		release()
		r := <-flushed
		crashed := cb.Disarm()
		w.Abandon()
		if !crashed && r.err != nil {
			t.Fatalf("crash point %d: flush failed without a crash: %v", k, r.err)
		}

		// The next owner, on the storage as the crash left it.
		tbl2 := openBucket(b, time.Now)
		w2, err := tbl2.OpenWriter(ctx, shard, WriterOptions{})
		if err != nil {
			t.Fatalf("crash point %d: claim after the crash: %v", k, err)
		}
		ss1, err := memwal.ReadShard(ctx, b, shard)
		if err != nil {
			t.Fatal(err)
		}
		published := 0
		for _, s := range ss1.Manifest.GetSstables()[before:] {
			published += int(s.GetPhysicalRows())
		}
		if published+w2.Buffered() != acked {
			t.Fatalf("crash point %d: %d rows published and %d replayed, want %d acknowledged", k, published, w2.Buffered(), acked)
		}
		if err := w2.Close(ctx); err != nil {
			t.Fatalf("crash point %d: the next owner's flush: %v", k, err)
		}
		ss2, err := memwal.ReadShard(ctx, b, shard)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, s := range ss2.Manifest.GetSstables()[before:] {
			total += int(s.GetPhysicalRows())
		}
		if total != acked {
			t.Fatalf("crash point %d: generations hold %d rows, want %d", k, total, acked)
		}
		if !crashed {
			if k < 3 {
				t.Fatalf("the flush finished within %d storage operations", k)
			}
			return // every operation of the flush was a crash point
		}
	}
}

// TestBackpressure: past MaxUnflushedBytes a write waits for the
// background flush; when that flush fails, the write fails with nothing
// appended to the WAL, and once storage recovers writes go on.
func TestBackpressure(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	s, _ := tbl.ShardFor(ctx, int64(0))
	w, err := tbl.OpenWriter(ctx, s, WriterOptions{MaxRows: 1, MaxUnflushedBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	fail := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, KeyContains: "_gen_", Action: faults.Fail(errors.New("injected"))})
	if err := w.Upsert(ctx, goRows(0, 1, "a-")); err != nil {
		t.Fatal(err) // frozen; its background flush fails
	}
	entries := walCount(t, tbl, s)
	err = w.Upsert(ctx, goRows(1, 2, "a-"))
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("a write over the bound whose flush fails: %v", err)
	}
	if got := walCount(t, tbl, s); got != entries {
		t.Fatalf("the refused write reached the WAL: %d entries, had %d", got, entries)
	}
	if w.Buffered() != 1 {
		t.Fatalf("%d rows buffered, want the frozen 1", w.Buffered())
	}
	fb.Remove(fail)
	release := make(chan struct{})
	park := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, KeyContains: "_gen_", Nth: 1, Action: faults.Block(release)})
	done := make(chan error, 1)
	go func() { done <- w.Upsert(ctx, goRows(1, 2, "b-")) }()
	waitUntil(t, "the write to start the flush", func() bool { return park.Matched() >= 1 })
	select {
	case err := <-done:
		t.Fatalf("a write over the bound returned (%v) while the flush that makes room was parked", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := walCount(t, tbl, s); got != entries+1 {
		t.Fatalf("%d WAL entries, want %d", got, entries+1)
	}
}

// TestNoFlushOutlivesTheWriter: Close and Abandon return only once no
// background flush of the writer runs, Abandon even when one is parked.
func TestNoFlushOutlivesTheWriter(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	s, _ := tbl.ShardFor(ctx, int64(0))
	w, err := tbl.OpenWriter(ctx, s, WriterOptions{MaxRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 9; i++ {
		if err := w.Upsert(ctx, goRows(i, i+1, "a-")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Buffered() != 0 {
		t.Fatalf("%d rows left after Close", w.Buffered())
	}

	w, err = tbl.OpenWriter(ctx, s, WriterOptions{MaxRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	rule, release := parkGenerationWrites(fb)
	defer release()
	for i := int64(0); i < 2; i++ {
		if err := w.Upsert(ctx, goRows(i, i+1, "b-")); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the background flush to park", func() bool { return rule.Matched() >= 1 })
	w.Abandon()
	w.mu.Lock()
	running := w.bgRunning
	w.mu.Unlock()
	if running {
		t.Fatal("a background flush runs after Abandon")
	}
}

// TestWritesProceedWhileVectorCopyBuilds: on a table whose MemWAL maintains
// an IVF_PQ index, writes go on while a flush builds the generation's HNSW
// copy and waits to publish it; LanceDB's LSM view then reads every row,
// and its LSM vector search finds each row written during the flush (in the
// next generation) as its own nearest neighbour.
func TestWritesProceedWhileVectorCopyBuilds(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
	f.Run(t,
		lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 400, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_pq", "vec_idx", map[string]any{"numPartitions": 2, "numSubVectors": 4}),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.SetPrimaryKey("id"),
		lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"id_idx", "vec_idx"}}))
	b, err := storage.Open(ctx, (&url.URL{Scheme: "file", Path: f.Dir}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fb := faults.NewFaulty(b)
	tbl := openBucket(fb, time.Now)
	w := mustWriter(t, tbl, int64(0))
	var rows []Row
	for _, r := range lancedb.VectorRows(1000, 3000, "g1-") {
		rows = append(rows, Row(r))
	}
	if err := w.Upsert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Park the flush at its publish: the generation, copy included, is
	// built by then.
	release := make(chan struct{})
	publish := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: faults.Block(release)})
	flushed := flushAsync(ctx, w)
	waitUntil(t, "the flush to freeze the MemTable", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.mem.rows == 0
	})
	const during = 20
	beforeBuilt := 0
	for i := range int64(during) {
		within(t, "Upsert during a vector flush", func() error {
			return w.Upsert(ctx, []Row{Row(lancedb.VectorRows(5000+i, 5001+i, "d-")[0])})
		})
		if publish.Matched() == 0 {
			beforeBuilt++
		}
	}
	t.Logf("%d of %d Upserts returned before the generation was built", beforeBuilt, during)
	close(release)
	r := <-flushed
	if r.err != nil || r.g.Rows != 2000 {
		t.Fatalf("the flush: %+v, %v", r.g, r.err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(vectorRowsOf(t, f, true)); got != 400+2000+during {
		t.Fatalf("LanceDB's LSM view reads %d rows, want %d", got, 400+2000+during)
	}
	for q, hits := range lsmSearch(t, f, "l2", during, true, false, 0) {
		if len(hits) == 0 || hits[0].id != int64(5000+q) || hits[0].dist > 1e-6 {
			t.Errorf("query %d: LSM search hits %v, want row %d at distance 0 first", q, hits, 5000+q)
		}
	}
}

// TestConcurrentCloseWaits: a Close called while another is flushing
// returns only once that flush has published, with its result, so that
// neither caller is told the rows are flushed while they are being written.
func TestConcurrentCloseWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, goRows(0, 4, "a-")); err != nil {
		t.Fatal(err)
	}
	rule, release := parkGenerationWrites(fb)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- w.Close(ctx) }()
	waitUntil(t, "the first Close's flush to park", func() bool { return rule.Matched() >= 1 })
	go func() { second <- w.Close(ctx) }()
	// The parked flush cannot publish, so nothing may return before the
	// release; a wrong early return shows up within the window.
	select {
	case err := <-second:
		release()
		t.Fatalf("the second Close returned (%v) while the first was still flushing", err)
	case err := <-first:
		release()
		t.Fatalf("the first Close returned (%v) with its flush parked", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ss, err := memwal.ReadShard(ctx, tbl.b, w.Shard())
	if err != nil {
		t.Fatal(err)
	}
	if ss.Manifest.GetReplayAfterWalEntryPosition() != w.nextWAL-1 || w.Buffered() != 0 {
		t.Fatalf("after both Closes: replay after %d (want %d), %d rows buffered", ss.Manifest.GetReplayAfterWalEntryPosition(), w.nextWAL-1, w.Buffered())
	}
}
