package memwal_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// Lance #8293: the flush of generation N fails and the next
// flush succeeds. The replay cursor never passes N's entries: N is retried
// first, and a writer that crashes after the failure replays them.
func TestFailedFlushDoesNotMoveCursorPastIt(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault storage.Fault
	}{
		{"sstable upload fails", storage.Fault{Ops: []storage.Op{storage.OpUpload}, KeyContains: "/sst/", Nth: 1, Action: storage.Fail(nil)}},
		{"sstable lands then fails", storage.Fault{Ops: []storage.Op{storage.OpUpload}, KeyContains: "/sst/", Nth: 1, Action: storage.LandThenFail(nil)}},
		// The rule is installed after the claim: its first manifest put is
		// the flush's publish.
		{"publish fails", storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: storage.Fail(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			inner := openBucket(t, "mem://")
			f := storage.NewFaulty(inner)
			w := newWriter(t, f, "s0")
			claim(t, w) // marker at 1
			genN := []memwal.Record{up(1, "n"), up(2, "n")}
			mustAppend(t, w, genN...) // 2
			rule := f.Add(c.fault)
			if _, err := w.Flush(ctx); !errors.Is(err, storage.ErrInjected) {
				t.Fatalf("flush N: %v, want the injected fault", err)
			}
			if rule.Fired() != 1 {
				t.Fatalf("fault fired %d times", rule.Fired())
			}
			m := latest(t, inner, "s0")
			if m.ReplayAfterWalPosition != 0 || len(m.Sstables) != 0 || m.CurrentGeneration != 1 {
				t.Fatalf("a failed flush moved the shard manifest: %v", m)
			}
			if got := listKeys(t, inner, memwal.SSTableDir("s0")); len(got) != 0 {
				t.Fatalf("a failed flush left %v", got)
			}
			genN1 := []memwal.Record{up(2, "n+1"), up(3, "n+1")}
			mustAppend(t, w, genN1...) // 3
			res, err := w.Flush(ctx)
			if err != nil {
				t.Fatalf("flush N+1: %v", err)
			}
			// N was retried first, then N+1; the cursor sits where every
			// entry below it is flushed.
			if len(res.SSTables) != 2 {
				t.Fatalf("flushed %d SSTables", len(res.SSTables))
			}
			m = latest(t, inner, "s0")
			n, n1 := m.Sstables[0], m.Sstables[1]
			if n.Generation != 1 || n.FirstWalPosition != 1 || n.LastWalPosition != 2 ||
				n1.Generation != 2 || n1.FirstWalPosition != 3 || n1.LastWalPosition != 3 || m.ReplayAfterWalPosition != 3 {
				t.Fatalf("manifest %v", m)
			}
			equalModels(t, "flushed", flushedModel(t, inner, m), model{1: "upsert:n", 2: "upsert:n+1", 3: "upsert:n+1"})
		})
	}
}

// The generation that failed stays frozen and is flushed, as its own
// generation, before the next one: N then N+1, never N+1 alone.
func TestFrozenGenerationsFlushInOrder(t *testing.T) {
	ctx := t.Context()
	inner := openBucket(t, "mem://")
	f := storage.NewFaulty(inner)
	w := newWriter(t, f, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "n"))
	rule := f.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Action: storage.Fail(nil)})
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("flush N succeeded under a failing publish")
	}
	f.Remove(rule)
	// N is frozen; the writer goes on into a new MemTable.
	mustAppend(t, w, up(1, "n+1"), up(2, "n+1"))

	res, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SSTables) != 2 || res.SSTables[0].Generation != 1 || res.SSTables[1].Generation != 2 {
		t.Fatalf("flushed %v", res.SSTables)
	}
	a, b := res.SSTables[0], res.SSTables[1]
	if a.FirstWalPosition != 1 || a.LastWalPosition != 2 || b.FirstWalPosition != 3 || b.LastWalPosition != 3 {
		t.Fatalf("WAL ranges %d..%d and %d..%d", a.FirstWalPosition, a.LastWalPosition, b.FirstWalPosition, b.LastWalPosition)
	}
	m := latest(t, inner, "s0")
	if m.ReplayAfterWalPosition != 3 || m.CurrentGeneration != 3 {
		t.Fatalf("manifest %v", m)
	}
	equalModels(t, "flushed", flushedModel(t, inner, m), model{1: "upsert:n+1", 2: "upsert:n+1"})
}

// A writer that crashes after a failed flush: the next writer replays the
// unflushed entries, nothing is lost.
func TestCrashAfterFailedFlush(t *testing.T) {
	ctx := t.Context()
	inner := openBucket(t, "mem://")
	f := storage.NewFaulty(inner)
	w := newWriter(t, f, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "a"), del(5))
	f.Add(storage.Fault{Ops: []storage.Op{storage.OpUpload}, KeyContains: "/sst/", Action: storage.Fail(nil)})
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("flush succeeded")
	}
	w2 := newWriter(t, inner, "s0")
	cr := claim(t, w2)
	if cr.ReplayedRecords != 2 {
		t.Fatalf("replayed %d records", cr.ReplayedRecords)
	}
	equalModels(t, "replayed", pendingOf(t, w2, []int64{1, 5}), model{1: "upsert:a", 5: "delete"})
}

// An ambiguous publish that did land is recognised by reading it back.
func TestAmbiguousPublishLanded(t *testing.T) {
	ctx := t.Context()
	inner := openBucket(t, "mem://")
	f := storage.NewFaulty(inner)
	w := newWriter(t, f, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "a"))
	f.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Nth: 1, Action: storage.LandThenFail(nil)})
	res, err := w.Flush(ctx)
	if err != nil || len(res.SSTables) != 1 {
		t.Fatalf("flush: %v %v", res, err)
	}
	f.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/wal/", Nth: 1, Action: storage.LandThenFail(nil)})
	pos, err := w.Append(ctx, []memwal.Record{up(2, "b")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []memwal.Record{up(3, "c")}); err != nil {
		t.Fatalf("append after an ambiguous one: %v", err)
	}
	if pos != 3 || w.NextPosition() != 5 {
		t.Fatalf("positions: got %d next %d", pos, w.NextPosition())
	}
	// A backend that retries conditional puts reports our own landed
	// publish as a lost race: the flush recognises its own version and
	// keeps the SSTable it names.
	f.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyContains: "/manifest/", Nth: 1, Action: storage.LandThenFail(storage.ErrAlreadyExists)})
	res, err = w.Flush(ctx)
	if err != nil || len(res.SSTables) != 1 {
		t.Fatalf("flush reported as a lost race: %v %v", res, err)
	}
	m := latest(t, inner, "s0")
	if got := m.Sstables[len(m.Sstables)-1].Path; got != res.SSTables[0].Path {
		t.Fatalf("published %s, flushed %s", got, res.SSTables[0].Path)
	}
	if _, err := inner.Attributes(ctx, res.SSTables[0].Path); err != nil {
		t.Fatalf("the published SSTable was removed: %v", err)
	}
}

// Lance #6767: what to replay is decided by the replay
// cursor, not by whether the SSTable list is empty. A merge and a trim
// drained the list; the old entries are still in the WAL (trim keeps the
// newest covered one) and must not be applied again.
func TestReplayDecidedByCursorNotSSTableList(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		b := openBucket(t, url)
		w := newWriter(t, b, "s0")
		claim(t, w)
		mustAppend(t, w, up(1, "old"), up(2, "old"))
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, w, up(3, "new"))
		// Trim after a merge: the list is drained, the cursor stays.
		m := latest(t, b, "s0")
		drained := proto.Clone(m).(*pb.ShardManifest)
		drained.Version++
		drained.Sstables = nil
		drained.TrimmedThroughGeneration = 1
		putShardManifest(t, b, drained)

		w2 := newWriter(t, b, "s0")
		cr := claim(t, w2)
		if cr.ReplayedRecords != 1 {
			t.Fatalf("replayed %d records, want only the one above the cursor", cr.ReplayedRecords)
		}
		equalModels(t, "replayed", pendingOf(t, w2, []int64{1, 2, 3}), model{3: "upsert:new"})
	})
}

// A WAL entry with a bad checksum stops replay with a clear error naming
// it; nothing after it is applied, and the writer refuses to go on.
func TestCorruptWALStopsReplay(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := t.Context()
		b := openBucket(t, url)
		w := newWriter(t, b, "s0")
		claim(t, w)                    // 1
		mustAppend(t, w, up(1, "a"))   // 2
		mustAppend(t, w, up(2, "bad")) // 3
		mustAppend(t, w, up(3, "c"))   // 4
		key := memwal.WALKey("s0", 3)
		data, err := b.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x40
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		w2 := newWriter(t, b, "s0")
		_, err = w2.Claim(ctx)
		if !memwal.IsCorruptWAL(err) || !errors.Is(err, table.ErrCorrupt) {
			t.Fatalf("claim over a corrupt entry: %v", err)
		}
		for _, want := range []string{"stopped at WAL position 3", key, "checksum mismatch"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if _, err := w2.Append(ctx, []memwal.Record{up(9, "x")}); !memwal.IsCorruptWAL(err) {
			t.Fatalf("append after a failed replay: %v", err)
		}
		if _, err := w2.Flush(ctx); !memwal.IsCorruptWAL(err) {
			t.Fatalf("flush after a failed replay: %v", err)
		}
		// Nothing was written past the corrupt entry.
		if _, err := b.Attributes(ctx, memwal.WALKey("s0", 5)); !storage.IsNotFound(err) {
			t.Fatalf("a marker was written after a failed replay: %v", err)
		}
	})
}

// A missing entry above the cursor stops replay too: skipping it would
// drop its rows.
func TestMissingWALEntryStopsReplay(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, "mem://")
	w := newWriter(t, b, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "a"))
	mustAppend(t, w, up(2, "b"))
	if err := b.Delete(ctx, memwal.WALKey("s0", 2)); err != nil {
		t.Fatal(err)
	}
	_, err := newWriter(t, b, "s0").Claim(ctx)
	if err == nil || !strings.Contains(err.Error(), "WAL entry at position 2 is missing") {
		t.Fatalf("claim over a hole: %v", err)
	}
	// The newest entry gone too: the shard manifest's last-seen position
	// still catches it once a flush recorded it.
	b2 := openBucket(t, "mem://")
	w = newWriter(t, b2, "s0")
	claim(t, w)
	mustAppend(t, w, up(1, "a"))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := latest(t, b2, "s0")
	bumped := proto.Clone(m).(*pb.ShardManifest)
	bumped.Version++
	bumped.WalPositionLastSeen = m.ReplayAfterWalPosition + 2
	putShardManifest(t, b2, bumped)
	_, err = newWriter(t, b2, "s0").Claim(ctx)
	if err == nil || !strings.Contains(err.Error(), "are missing") {
		t.Fatalf("claim with entries missing at the end: %v", err)
	}
}

func TestWALEntryCodec(t *testing.T) {
	e := &pb.WalEntry{ShardId: "s0", WriterEpoch: 3, Position: 7, Records: []*pb.WalRecord{{Values: []*pb.Value{{Kind: &pb.Value_Int64{Int64: 1}}}}}}
	data, err := memwal.EncodeWALEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := memwal.DecodeWALEntry("k", data)
	if err != nil || !proto.Equal(got, e) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	flip := func(i int) []byte { d := bytes.Clone(data); d[i] ^= 1; return d }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"truncated", data[:len(data)-3], "length prefix"},
		{"magic", flip(0), "bad magic"},
		{"length", flip(5), "length prefix"},
		{"payload", flip(12), "checksum mismatch"},
		{"crc", flip(len(data) - 1), "checksum mismatch"},
		{"extended", append(bytes.Clone(data), 0), "length prefix"},
	} {
		_, err := memwal.DecodeWALEntry("k", c.data)
		if !memwal.IsCorruptWAL(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A position mismatch between key and content is corruption too.
	b := openBucket(t, "mem://")
	if err := b.Put(context.Background(), memwal.WALKey("s0", 8), data); err != nil {
		t.Fatal(err)
	}
	if _, err := memwal.ReadWALEntry(context.Background(), b, "s0", 8); !memwal.IsCorruptWAL(err) {
		t.Fatalf("misplaced entry: %v", err)
	}
}
