package lancewal

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// corpusTable opens a private copy of a LanceDB corpus table (no node
// needed) through a fault-injecting bucket.
func corpusTable(t testing.TB, name string) (*Table, *faults.Faulty) {
	t.Helper()
	dir := lancedb.CorpusDir(t, name)
	b, err := storage.Open(t.Context(), (&url.URL{Scheme: "file", Path: dir}).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	fb := faults.NewFaulty(b)
	return openBucket(fb, time.Now), fb
}

func mustWriter(t *testing.T, tbl *Table, key any) *Writer {
	t.Helper()
	s, err := tbl.ShardFor(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.OpenWriter(t.Context(), s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func walCount(t *testing.T, tbl *Table, shard string) int {
	t.Helper()
	ps, err := memwal.ListWAL(t.Context(), tbl.b, shard)
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// TestBadInput: rows the table cannot hold are refused with a one-line
// error before anything reaches the WAL.
func TestBadInput(t *testing.T) {
	ctx := t.Context()
	tbl, _ := corpusTable(t, "memwal_4")
	w := mustWriter(t, tbl, int64(1))
	before := walCount(t, tbl, w.Shard())
	other := int64(-1)
	for k := int64(0); k < 100; k++ {
		if s, _ := tbl.ShardFor(ctx, k); s != w.Shard() {
			other = k
			break
		}
	}
	for name, rows := range map[string][]Row{
		"no key":          {{"s": "x"}},
		"null key":        {{"id": nil}},
		"key of a string": {{"id": "one"}},
		"unknown column":  {{"id": int64(1), "nope": 1}},
		"int32 overflow":  {{"id": int64(1), "cat": int64(1) << 40}},
		"float for int":   {{"id": int64(1), "cat": 1.5}},
		"int for string":  {{"id": int64(1), "s": 7}},
		"another shard":   {{"id": other}},
		"uint64 too big":  {{"id": uint64(1) << 63}},
	} {
		err := w.Upsert(ctx, rows)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", name, err)
		}
	}
	if got := walCount(t, tbl, w.Shard()); got != before {
		t.Errorf("refused writes reached the WAL: %d entries, had %d", got, before)
	}
	if _, err := tbl.OpenWriter(ctx, "aa48498d-ac91-59e2-8452-69f46010ace2", WriterOptions{}); err == nil {
		t.Error("a shard id outside the bucket spec was accepted")
	}
	if _, err := tbl.OpenWriter(ctx, "not-a-uuid", WriterOptions{}); err == nil {
		t.Error("a malformed shard id was accepted")
	}
	if _, err := OpenTable(ctx, t.TempDir()); err == nil {
		t.Error("OpenTable of an empty directory succeeded")
	}
}

// TestSecondClaimFencesFirst: two Go writers of one shard: the later claim
// fences the earlier one, replays its unflushed entries, and its flush
// holds them.
func TestSecondClaimFencesFirst(t *testing.T) {
	ctx := t.Context()
	tbl, _ := corpusTable(t, "memwal_1")
	w1 := mustWriter(t, tbl, int64(0))
	if err := w1.Upsert(ctx, goRows(0, 3, "w1-")); err != nil {
		t.Fatal(err)
	}
	w2 := mustWriter(t, tbl, int64(0))
	if w2.Epoch() != w1.Epoch()+1 {
		t.Errorf("epochs %d then %d", w1.Epoch(), w2.Epoch())
	}
	if w2.Buffered() != 3 {
		t.Errorf("the second claim replayed %d rows, want 3", w2.Buffered())
	}
	if err := w1.Upsert(ctx, goRows(5, 6, "w1-")); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced writer's Upsert: %v", err)
	}
	g, err := w2.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.Rows != 3 || g.Generation != 3 {
		t.Errorf("generation %+v, want 3 rows as generation 3", g)
	}
	if _, err := w1.Flush(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced writer's Flush: %v", err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w2.Upsert(ctx, goRows(0, 1, "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Upsert after Close: %v", err)
	}
}

// TestFlushFailureKeepsRows: a flush whose shard manifest put fails keeps
// the MemTable; the next flush publishes it, and the failed attempt's
// directory is never referenced.
func TestFlushFailureKeepsRows(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, goRows(0, 4, "f-")); err != nil {
		t.Fatal(err)
	}
	r := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: faults.Fail(errors.New("injected"))})
	if _, err := w.Flush(ctx); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("flush with a failing manifest put: %v", err)
	}
	fb.Remove(r)
	if w.Buffered() != 4 {
		t.Fatalf("after the failed flush the MemTable holds %d rows", w.Buffered())
	}
	g, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := memwal.ReadShard(ctx, tbl.b, w.Shard())
	if err != nil {
		t.Fatal(err)
	}
	last := ss.Manifest.GetSstables()[len(ss.Manifest.GetSstables())-1]
	if last.GetPath() != g.Path || last.GetPhysicalRows() != 4 || ss.Manifest.GetReplayAfterWalEntryPosition() != g.CoversWAL {
		t.Errorf("shard manifest %v after the flush %+v", ss.Manifest, g)
	}
}

// TestReplayGarbage: a damaged WAL entry in the replay range fails the
// claim with an error naming it; it never panics and never loses the
// entry (it stays for an operator to inspect).
func TestReplayGarbage(t *testing.T) {
	ctx := context.Background()
	for name, data := range map[string][]byte{
		"empty":     {},
		"truncated": []byte{0xff, 0xff, 0xff, 0xff, 0x10},
		"text":      []byte("not an arrow stream"),
	} {
		t.Run(name, func(t *testing.T) {
			tbl, _ := corpusTable(t, "memwal_1")
			w := mustWriter(t, tbl, int64(0))
			pos := w.nextWAL
			w.Abandon()
			key := memwal.WALKey(w.Shard(), pos)
			if err := tbl.b.Put(ctx, key, data); err != nil {
				t.Fatal(err)
			}
			_, err := tbl.OpenWriter(ctx, w.Shard(), WriterOptions{})
			if err == nil || !strings.Contains(err.Error(), "replay") {
				t.Fatalf("claim over a damaged entry: %v", err)
			}
			if _, err := tbl.b.Get(ctx, key); err != nil {
				t.Fatalf("the damaged entry is gone: %v", err)
			}
		})
	}
}

// FuzzReplay: any bytes as a WAL entry decode to rows or fail, never
// panic (seeded with LanceDB's entries and sentinel).
func FuzzReplay(f *testing.F) {
	g, _ := filepath.Glob(filepath.Join(lancedb.CorpusRoot(), "memwal_1/_mem_wal/*/wal/*.arrow"))
	for _, p := range g {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(fenceSentinel(3))
	f.Add([]byte{})
	tbl, _ := corpusTable(f, "memwal_1")
	st, err := tbl.state(f.Context())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMemtable(st)
		bs, err := m.decodeEntry(data)
		if err != nil {
			return
		}
		for _, b := range bs {
			m.add(b)
			if _, err := b.walEntry(1); err != nil {
				t.Fatalf("a decoded entry does not encode: %v", err)
			}
		}
	})
}

// TestDamagedShardManifest: a newest shard manifest that does not decode
// fails the claim with an error naming it, and nothing is written.
func TestDamagedShardManifest(t *testing.T) {
	ctx := t.Context()
	tbl, _ := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	w.Abandon()
	next := w.manifest.GetVersion() + 1
	key := memwal.ShardManifestKey(w.Shard(), next)
	if err := tbl.b.Put(ctx, key, []byte("\xff\xff not a protobuf")); err != nil {
		t.Fatal(err)
	}
	before := walCount(t, tbl, w.Shard())
	_, err := tbl.OpenWriter(ctx, w.Shard(), WriterOptions{})
	if err == nil || !strings.Contains(err.Error(), memwal.BitName(next)) {
		t.Fatalf("claim over a damaged manifest: %v", err)
	}
	if got := walCount(t, tbl, w.Shard()); got != before {
		t.Errorf("the failed claim wrote WAL entries (%d, had %d)", got, before)
	}
}

// TestConcurrentWrites: goroutines upserting distinct keys through one
// writer while another flushes lose nothing: the generations hold every
// key once.
func TestConcurrentWrites(t *testing.T) {
	ctx := t.Context()
	tbl, _ := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	errs := make(chan error, 5)
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 25; i++ {
				k := int64(1000 + g*100 + i)
				if err := w.Upsert(ctx, []Row{{"id": k, "s": "c"}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	flushed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flushed <- n
				return
			default:
			}
			g, err := w.Flush(ctx)
			if err != nil {
				errs <- err
				flushed <- n
				return
			}
			if g != nil {
				n += g.Rows
			}
		}
	}()
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	n := <-flushed
	g, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g != nil {
		n += g.Rows
	}
	if n != 100 {
		t.Fatalf("generations hold %d rows, want 100", n)
	}
}

// TestAutoFlush: MaxRows and MaxBytes flush the MemTable as it fills (in
// the background: the generations are published by the time the writer
// is abandoned, which waits for its flush goroutine).
func TestAutoFlush(t *testing.T) {
	ctx := t.Context()
	for _, o := range []WriterOptions{{MaxRows: 10}, {MaxBytes: 300}} {
		tbl, _ := corpusTable(t, "memwal_1")
		s, _ := tbl.ShardFor(ctx, int64(0))
		w, err := tbl.OpenWriter(ctx, s, o)
		if err != nil {
			t.Fatal(err)
		}
		before := len(w.manifest.GetSstables())
		for i := int64(0); i < 30; i++ {
			if err := w.Upsert(ctx, goRows(i, i+1, "a-")); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the background flushes", func() bool { return w.flushIdle() })
		w.Abandon()
		ss, err := memwal.ReadShard(ctx, tbl.b, s)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ss.Manifest.GetSstables()) - before; n < 2 {
			t.Errorf("%+v: %d generations flushed by 30 single-row writes", o, n)
		}
	}
	tbl, _ := corpusTable(t, "memwal_1")
	s, _ := tbl.ShardFor(ctx, int64(0))
	if _, err := tbl.OpenWriter(ctx, s, WriterOptions{MaxBytes: -1}); err == nil {
		t.Error("negative MaxBytes accepted")
	}
}

// TestAmbiguousManifestPut: a shard manifest put that lands but reports an
// error is recognised as the writer's own (its bytes are there): the flush
// succeeds and the writer keeps going.
func TestAmbiguousManifestPut(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, goRows(0, 2, "amb-")); err != nil {
		t.Fatal(err)
	}
	r := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: faults.LandThenFail(errors.New("injected timeout"))})
	if _, err := w.Flush(ctx); err != nil {
		t.Fatalf("flush whose manifest put landed but failed: %v", err)
	}
	if r.Fired() != 1 {
		t.Fatalf("the fault fired %d times", r.Fired())
	}
	if err := w.Upsert(ctx, goRows(2, 3, "amb-")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAmbiguousWALPut: a WAL append that lands but reports an error is the
// writer's own entry: the write succeeds, and the next one goes to the
// next position.
func TestAmbiguousWALPut(t *testing.T) {
	ctx := t.Context()
	tbl, fb := corpusTable(t, "memwal_1")
	w := mustWriter(t, tbl, int64(0))
	fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/wal/", Nth: 1, Action: faults.LandThenFail(errors.New("injected timeout"))})
	if err := w.Upsert(ctx, goRows(0, 2, "amb-")); err != nil {
		t.Fatalf("append that landed: %v", err)
	}
	if err := w.Upsert(ctx, goRows(2, 3, "amb-")); err != nil {
		t.Fatal(err)
	}
	g, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.Rows != 3 {
		t.Fatalf("generation of %d rows, want 3", g.Rows)
	}
}
