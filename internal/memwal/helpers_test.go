package memwal_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func testSchema(t testing.TB) *pb.Schema {
	t.Helper()
	s, err := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openBucket(t testing.TB, url string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func fixedNow() time.Time { return time.UnixMicro(1_700_000_000_000_000) }

func newWriter(t testing.TB, b storage.Bucket, shard string) *memwal.Writer {
	t.Helper()
	w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: testSchema(t), Now: fixedNow}, b)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func claim(t testing.TB, w *memwal.Writer) *memwal.ClaimResult {
	t.Helper()
	res, err := w.Claim(context.Background())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res
}

func up(id int64, cat string) memwal.Record {
	return memwal.Record{Op: memwal.Upsert, Row: table.Row{id, cat, float64(id) / 2}}
}

func del(id int64) memwal.Record {
	return memwal.Record{Op: memwal.Delete, Row: table.Row{id, nil, nil}}
}

func mustAppend(t testing.TB, w *memwal.Writer, recs ...memwal.Record) uint64 {
	t.Helper()
	pos, err := w.Append(context.Background(), recs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return pos
}

// model is the reference: key id -> "upsert:cat" or "delete".
type model map[int64]string

func (m model) apply(recs ...memwal.Record) {
	for _, r := range recs {
		id := r.Row[0].(int64)
		if r.Op == memwal.Delete {
			m[id] = "delete"
		} else {
			m[id] = "upsert:" + r.Row[1].(string)
		}
	}
}

func describe(r memwal.Record) string {
	if r.Op == memwal.Delete {
		return "delete"
	}
	return "upsert:" + r.Row[1].(string)
}

// pendingModel reads what a writer holds unflushed for the model's keys.
func pendingOf(t testing.TB, w *memwal.Writer, ids []int64) model {
	t.Helper()
	s := testSchema(t)
	out := model{}
	for _, id := range ids {
		if r, ok := w.Get(table.KeyOf(s, table.Row{id, nil, nil})); ok {
			out[id] = describe(r)
		}
	}
	return out
}

// flushedModel reads every SSTable of the shard manifest, oldest first, and
// folds them (later generations win).
func flushedModel(t testing.TB, b storage.Bucket, m *pb.ShardManifest) model {
	t.Helper()
	s := testSchema(t)
	out := model{}
	for _, sst := range m.Sstables {
		err := memwal.ScanSSTable(context.Background(), b, s, sst, func(_ string, r memwal.Record) error {
			out.apply(r)
			return nil
		})
		if err != nil {
			t.Fatalf("scan %s: %v", sst.Path, err)
		}
	}
	return out
}

func keysOf(m model) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func equalModels(t testing.TB, what string, got, want model) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func latest(t testing.TB, b storage.Bucket, shard string) *pb.ShardManifest {
	t.Helper()
	m, err := memwal.ReadShardManifest(context.Background(), b, shard)
	if err != nil {
		t.Fatal(err)
	}
	return m
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
