package memwal_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// A writer claims, logs, flushes; the SSTable holds the last write per key,
// key-sorted, and the next writer has nothing to replay.
func TestClaimAppendFlush(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		b := openBucket(t, url)
		w := newWriter(t, b, "s0")
		cr := claim(t, w)
		if cr.Epoch != 1 || cr.ManifestVersion != 1 || cr.ReplayedEntries != 0 || cr.MarkerPosition != 1 {
			t.Fatalf("first claim: %+v", cr)
		}
		ref := model{}
		batches := [][]memwal.Record{{up(3, "a"), up(1, "b")}, {up(2, "c"), del(3)}, {up(1, "d"), del(9)}}
		for i, recs := range batches {
			if pos := mustAppend(t, w, recs...); pos != uint64(i+2) {
				t.Fatalf("batch %d at position %d, want %d", i, pos, i+2)
			}
			ref.apply(recs...)
		}
		res, err := w.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.SSTables) != 1 {
			t.Fatalf("flushed %d sstables", len(res.SSTables))
		}
		sst := res.SSTables[0]
		if sst.Generation != 1 || sst.Rows != 4 || sst.FirstWalPosition != 1 || sst.LastWalPosition != 4 {
			t.Fatalf("sstable %+v", sst)
		}
		if !strings.HasPrefix(sst.Path, "_mem_wal/s0/sst/00000000000000000001-") {
			t.Fatalf("sstable path %s", sst.Path)
		}
		m := latest(t, b, "s0")
		if m.Version != 2 || m.CurrentGeneration != 2 || m.ReplayAfterWalPosition != 4 || len(m.Sstables) != 1 {
			t.Fatalf("shard manifest after flush: %v", m)
		}
		equalModels(t, "flushed", flushedModel(t, b, m), ref)

		// Keys come back strictly ascending with their min/max recorded.
		s := testSchema(t)
		var keys []string
		if err := memwal.ScanSSTable(ctx, b, s, sst, func(k string, _ memwal.Record) error {
			keys = append(keys, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if string(sst.MinKey) != keys[0] || string(sst.MaxKey) != keys[len(keys)-1] {
			t.Fatalf("min/max keys do not bound the file")
		}

		w2 := newWriter(t, b, "s0")
		cr2 := claim(t, w2)
		if cr2.Epoch != 2 || cr2.ReplayedEntries != 0 || cr2.MarkerPosition != 5 {
			t.Fatalf("second claim: %+v", cr2)
		}
		if rows, _ := w2.Pending(); rows != 0 {
			t.Fatalf("second writer holds %d rows after replaying nothing", rows)
		}
		// A flush with nothing to flush publishes nothing.
		res2, err := w2.Flush(ctx)
		if err != nil || len(res2.SSTables) != 0 {
			t.Fatalf("empty flush: %v %v", res2, err)
		}
	})
}

// The SSTable is plain Parquet: a reader that knows nothing of compactord
// sees the table's columns and "_op".
func TestSSTableIsPlainParquet(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, "mem://")
	w := newWriter(t, b, "s0")
	claim(t, w)
	mustAppend(t, w, up(2, "x"), del(1))
	res, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Get(ctx, res.SSTables[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(strings.NewReader(string(data)), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Schema().Columns() {
		names = append(names, strings.Join(c, "."))
	}
	if strings.Join(names, ",") != "_op,cat,id,val" {
		t.Fatalf("columns %v", names)
	}
	type row struct {
		Op  string   `parquet:"_op"`
		ID  int64    `parquet:"id"`
		Cat *string  `parquet:"cat,optional"`
		Val *float64 `parquet:"val,optional"`
	}
	rows, err := parquet.Read[row](strings.NewReader(string(data)), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != 1 || rows[0].Op != "delete" || rows[0].Cat != nil ||
		rows[1].ID != 2 || rows[1].Op != "upsert" || rows[1].Cat == nil || *rows[1].Cat != "x" {
		t.Fatalf("rows %+v", rows)
	}
}

// Writer crash between WAL append and flush: the next writer replays the
// entries and nothing is lost.
func TestWriterCrashReplay(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		a := newWriter(t, openBucket(t, url), "s0")
		claim(t, a)
		ref := model{}
		for i := int64(0); i < 5; i++ {
			recs := []memwal.Record{up(i, "a"), up(i+10, "b")}
			if i > 2 {
				recs = append(recs, del(i-2))
			}
			mustAppend(t, a, recs...)
			ref.apply(recs...)
		}
		// a "crashes": it is dropped without flushing. A second process
		// (its own bucket handle) takes over.
		b := openBucket(t, url)
		w := newWriter(t, b, "s0")
		cr := claim(t, w)
		if cr.ReplayedEntries != 6 || cr.ReplayedRecords != 12 { // a's marker + 5 entries
			t.Fatalf("replay: %+v", cr)
		}
		equalModels(t, "replayed", pendingOf(t, w, keysOf(ref)), ref)
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		equalModels(t, "flushed", flushedModel(t, b, latest(t, b, "s0")), ref)
		// And the stale writer can do nothing.
		if _, err := a.Append(ctx, []memwal.Record{up(99, "z")}); !errors.Is(err, memwal.ErrFenced) {
			t.Fatalf("stale append: %v", err)
		}
	})
}

// Writer fencing: a writer whose epoch has been superseded can neither
// append a WAL entry nor publish a flush, and nothing of it lands.
func TestWriterFencing(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		b := openBucket(t, url)
		a := newWriter(t, b, "s0")
		claim(t, a)
		mustAppend(t, a, up(1, "a1"))
		ref := model{}
		ref.apply(up(1, "a1"))

		w := newWriter(t, b, "s0")
		cr := claim(t, w)
		if cr.Epoch != 2 || cr.ReplayedRecords != 1 {
			t.Fatalf("claim: %+v", cr)
		}
		walBefore := listKeys(t, b, memwal.WALDir("s0"))
		smBefore := listKeys(t, b, memwal.ShardManifestDir("s0"))

		_, err := a.Append(ctx, []memwal.Record{up(2, "stale")})
		var fe *memwal.FencedError
		if !errors.As(err, &fe) || fe.Epoch != 1 || fe.Newer != 2 || fe.MaybeLanded || fe.Op != "append" {
			t.Fatalf("stale append: %v", err)
		}
		if _, err := a.Flush(ctx); !errors.Is(err, memwal.ErrFenced) {
			t.Fatalf("stale flush: %v", err)
		}
		if got := listKeys(t, b, memwal.WALDir("s0")); strings.Join(got, ",") != strings.Join(walBefore, ",") {
			t.Fatalf("the fenced writer changed the WAL:\n%v\n%v", walBefore, got)
		}
		if got := listKeys(t, b, memwal.ShardManifestDir("s0")); len(got) != len(smBefore) {
			t.Fatalf("the fenced writer published a shard manifest")
		}
		if got := listKeys(t, b, memwal.SSTableDir("s0")); len(got) != 0 {
			t.Fatalf("the fenced writer left SSTables: %v", got)
		}
		mustAppend(t, w, up(3, "w"))
		ref.apply(up(3, "w"))
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		equalModels(t, "flushed", flushedModel(t, b, latest(t, b, "s0")), ref)
	})
}

// A claim landing while a stale writer is between writing its SSTable and
// publishing it: the publish collides, the writer is fenced, and its
// SSTable is removed.
func TestFencedFlushPublish(t *testing.T) {
	ctx := t.Context()
	inner := openBucket(t, "mem://")
	f := storage.NewFaulty(inner)
	a := newWriter(t, f, "s0")
	claim(t, a)
	mustAppend(t, a, up(1, "a"))

	release := make(chan struct{})
	rule := f.Add(storage.Fault{Ops: []storage.Op{storage.OpUpload}, KeyContains: "/sst/", Action: storage.Block(release)})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Flush(ctx)
		errc <- err
	}()
	waitFor(t, "the flush to reach its SSTable upload", func() bool { return rule.Matched() == 1 })
	w := newWriter(t, inner, "s0")
	claim(t, w)
	close(release)
	err := <-errc
	if !errors.Is(err, memwal.ErrFenced) {
		t.Fatalf("flush after a claim: %v", err)
	}
	if m := latest(t, inner, "s0"); m.WriterEpoch != 2 || len(m.Sstables) != 0 {
		t.Fatalf("shard manifest %v", m)
	}
	if got := listKeys(t, inner, memwal.SSTableDir("s0")); len(got) != 0 {
		t.Fatalf("fenced flush left %v", got)
	}
	// The new writer replayed a's record; nothing lost.
	equalModels(t, "replayed", pendingOf(t, w, []int64{1}), model{1: "upsert:a"})
}

// Lance #6699: trim deleted every WAL entry, so a stalled
// writer's next position is free. Its put lands, but the re-check after
// writing fences it, and the entry, below the replay cursor, is never
// replayed.
func TestFenceRecheckAfterFreedPosition(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, "mem://")
	a := newWriter(t, b, "s0")
	claim(t, a) // marker at 1
	mustAppend(t, a, up(1, "a"))

	w := newWriter(t, b, "s0")
	claim(t, w) // replays 1..2, marker at 3
	mustAppend(t, w, up(2, "w"))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := latest(t, b, "s0")
	if m.ReplayAfterWalPosition != 4 {
		t.Fatalf("cursor %d", m.ReplayAfterWalPosition)
	}
	// An over-eager trim removes every covered entry, the newest included,
	// and every shard manifest but the newest: the stale writer's version
	// + 1 is gone too, so only a listing can tell it is superseded.
	for _, k := range listKeys(t, b, memwal.WALDir("s0")) {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range listKeys(t, b, memwal.ShardManifestDir("s0"))[1:] {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Append(ctx, []memwal.Record{up(66, "ghost")})
	var fe *memwal.FencedError
	if !errors.As(err, &fe) || !fe.MaybeLanded {
		t.Fatalf("stale append into a freed position: %v", err)
	}
	if _, err := b.Attributes(ctx, memwal.WALKey("s0", 3)); err != nil {
		t.Fatalf("the stale entry should have landed at the freed position 3: %v", err)
	}
	// The next writer replays from the cursor: the ghost stays out.
	w3 := newWriter(t, b, "s0")
	cr := claim(t, w3)
	if cr.ReplayedRecords != 0 {
		t.Fatalf("replayed %d records from below the cursor", cr.ReplayedRecords)
	}
	if _, ok := w3.Get(table.KeyOf(testSchema(t), table.Row{int64(66), nil, nil})); ok {
		t.Fatal("the fenced writer's record was replayed")
	}
}

// Concurrent claims: every claim that returns holds a distinct epoch, and
// afterwards only the newest epoch can append.
func TestConcurrentClaims(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		const n = 6
		ws := make([]*memwal.Writer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range ws {
			ws[i] = newWriter(t, openBucket(t, url), "s0")
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = ws[i].Claim(ctx)
			}(i)
		}
		wg.Wait()
		epochs := map[uint64]bool{}
		for i, err := range errs {
			if err != nil && !errors.Is(err, memwal.ErrFenced) {
				t.Fatalf("claim %d: %v", i, err)
			}
			if err == nil {
				if epochs[ws[i].Epoch()] {
					t.Fatalf("epoch %d claimed twice", ws[i].Epoch())
				}
				epochs[ws[i].Epoch()] = true
			}
		}
		b := openBucket(t, url)
		top := latest(t, b, "s0").WriterEpoch
		if top != n {
			t.Fatalf("newest epoch %d, want %d", top, n)
		}
		ok := 0
		for i, w := range ws {
			if errs[i] != nil {
				continue
			}
			_, err := w.Append(ctx, []memwal.Record{up(int64(i), "x")})
			switch {
			case err == nil:
				ok++
				if w.Epoch() != top {
					t.Fatalf("epoch %d appended while %d holds the shard", w.Epoch(), top)
				}
			case !errors.Is(err, memwal.ErrFenced):
				t.Fatalf("append: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d writers appended, want exactly 1", ok)
		}
	})
}

// A maintenance job (trim) publishing a version with the same epoch is
// adopted; the flush rebases on it.
func TestFlushRebasesOnMaintenanceVersion(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, "mem://")
	w := newWriter(t, b, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "a"))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, up(2, "b"))
	// "trim" drains the SSTable list, keeping the epoch.
	m := latest(t, b, "s0")
	trimmed := proto.Clone(m).(*pb.ShardManifest)
	trimmed.Version++
	trimmed.Sstables = nil
	trimmed.TrimmedThroughGeneration = 1
	putShardManifest(t, b, trimmed)

	res, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := latest(t, b, "s0")
	if got.Version != m.Version+2 || len(got.Sstables) != 1 || got.Sstables[0].Generation != 2 || got.TrimmedThroughGeneration != 1 {
		t.Fatalf("flush did not rebase on the maintenance version: %v (flushed %v)", got, res.SSTables)
	}
}

func putShardManifest(t testing.TB, b storage.Bucket, m *pb.ShardManifest) {
	t.Helper()
	data, err := table.EncodeProto(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(context.Background(), memwal.ShardManifestKey(m.ShardId, m.Version), data); err != nil {
		t.Fatal(err)
	}
}

// Bad records get one clear error each and write nothing.
func TestAppendRejectsBadRecords(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, "mem://")
	w := newWriter(t, b, "s0")
	claim(t, w)
	before := listKeys(t, b, memwal.WALDir("s0"))
	for _, c := range []struct {
		recs []memwal.Record
		want string
	}{
		{nil, "no records"},
		{[]memwal.Record{{Op: memwal.Upsert, Row: table.Row{nil, "x", 1.0}}}, `record 1: missing primary-key field "id"`},
		{[]memwal.Record{up(1, "ok"), {Op: memwal.Delete, Row: table.Row{nil, nil, nil}}}, `record 2: missing primary-key field "id"`},
		{[]memwal.Record{{Op: memwal.Upsert, Row: table.Row{int64(1), 7, 1.0}}}, `field "cat": Go value int does not fit type string`},
		{[]memwal.Record{{Op: memwal.Upsert, Row: table.Row{int64(1)}}}, "row has 1 values, schema has 3 fields"},
	} {
		_, err := w.Append(ctx, c.recs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("append %v: %v, want %q", c.recs, err, c.want)
		}
	}
	if got := listKeys(t, b, memwal.WALDir("s0")); len(got) != len(before) {
		t.Fatalf("bad records wrote WAL entries: %v", got)
	}
	// The writer is still usable.
	mustAppend(t, w, up(1, "fine"))
}
