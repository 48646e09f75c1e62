package merge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func schema(t testing.TB) *pb.Schema {
	t.Helper()
	s, err := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openTable opens a table handle of its own (its own bucket and committer),
// as a separate process would.
func openTable(t testing.TB, url string, wrap func(storage.Bucket) storage.Bucket) *ops.Table {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if wrap != nil {
		b = wrap(b)
	}
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(b, c, nil, nil)
}

func newMerger(t testing.TB, tb *ops.Table) *merge.Merger {
	t.Helper()
	m, err := merge.New(merge.Config{}, tb)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ref is the reference model of the table: id -> cat.
type ref map[int64]string

func row(id int64, cat string) table.Row { return table.Row{id, cat, float64(id)} }

// createTable makes a table with base rows 0..n-1 (cat "base") in fragments
// of per rows, and a MemWAL over shards.
func createTable(t testing.TB, tb *ops.Table, n, per int, shards ...string) ref {
	t.Helper()
	ctx := context.Background()
	if _, err := tb.Create(ctx, schema(t)); err != nil {
		t.Fatal(err)
	}
	r := ref{}
	for start := 0; start < n; start += per {
		var rows []table.Row
		for i := start; i < min(start+per, n); i++ {
			rows = append(rows, row(int64(i), "base"))
			r[int64(i)] = "base"
		}
		if _, err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	if len(shards) > 0 {
		if _, err := memwal.Configure(ctx, tb, shards, nil); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// writeGeneration claims shard, appends recs and flushes one generation.
func writeGeneration(t testing.TB, b storage.Bucket, shard string, recs []memwal.Record) *pb.SSTable {
	t.Helper()
	ctx := context.Background()
	w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: schema(t)}, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if len(recs) > 0 {
		if _, err := w.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SSTables) != 1 {
		t.Fatalf("flushed %d SSTables", len(res.SSTables))
	}
	return res.SSTables[0]
}

func (r ref) apply(recs []memwal.Record) {
	for _, rec := range recs {
		id := rec.Row[0].(int64)
		if rec.Op == memwal.Delete {
			delete(r, id)
		} else {
			r[id] = rec.Row[1].(string)
		}
	}
}

// randomRecords makes n records over keys [0, keySpace): upserts of new
// and existing keys and tombstones, at most one per key.
func randomRecords(rng *rand.Rand, n int, keySpace int64, tag string) []memwal.Record {
	seen := map[int64]bool{}
	var out []memwal.Record
	for len(out) < n {
		id := rng.Int64N(keySpace)
		if seen[id] {
			continue
		}
		seen[id] = true
		if rng.IntN(4) == 0 {
			out = append(out, memwal.Record{Op: memwal.Delete, Row: table.Row{id, nil, nil}})
		} else {
			out = append(out, memwal.Record{Op: memwal.Upsert, Row: row(id, fmt.Sprintf("%s-%d", tag, id))})
		}
	}
	return out
}

// scan reads the latest version into a model, failing on duplicate keys:
// an upsert must replace its base row exactly once.
func scan(t testing.TB, tb *ops.Table) ref {
	t.Helper()
	got := ref{}
	_, err := tb.Scan(context.Background(), 0, func(r table.Row) error {
		id := r[0].(int64)
		if _, dup := got[id]; dup {
			return fmt.Errorf("key %d is live twice", id)
		}
		got[id] = r[1].(string)
		if r[2].(float64) != float64(id) {
			return fmt.Errorf("key %d: val %v", id, r[2])
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func equalRef(t testing.TB, got, want ref) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("table has %d keys, reference %d", len(got), len(want))
	}
	var bad []int64
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, k)
		}
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i] < bad[j] })
	if len(bad) > 0 {
		k := bad[0]
		t.Fatalf("%d keys differ; first %d: table %q, reference %q", len(bad), k, got[k], want[k])
	}
}

func latest(t testing.TB, tb *ops.Table) *pb.Manifest {
	t.Helper()
	m, err := table.ReadLatest(context.Background(), tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mergeHistory lists (shard, through) of every MergeSSTables committed.
func mergeHistory(t testing.TB, tb *ops.Table) []string {
	t.Helper()
	ctx := context.Background()
	head := latest(t, tb)
	var out []string
	for v := uint64(1); v <= head.Version; v++ {
		m, err := table.ReadManifest(ctx, tb.Bucket, v)
		if err != nil {
			t.Fatal(err)
		}
		txn := m.Transaction // inline; the transaction file is optional
		if txn == nil {
			if txn, err = table.ReadTransaction(ctx, tb.Bucket, m.TransactionPath); err != nil {
				t.Fatal(err)
			}
		}
		if ms := txn.GetMergeSstables(); ms != nil {
			out = append(out, fmt.Sprintf("%s@%d", ms.Shard, ms.ThroughGeneration))
		}
	}
	return out
}

func listKeys(t testing.TB, b storage.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), prefix, func(a storage.Attrs) error {
		out = append(out, a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond, for at most 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
