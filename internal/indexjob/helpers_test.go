package indexjob_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type fixture struct {
	t   *testing.T
	url string
	tb  *ops.Table
}

func newFixture(t *testing.T, url string, nFrags, rows int64) *fixture {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := commit.NewCommitter(commit.Config{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}, b, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, url: url, tb: ops.NewTable(b, c, nil, nil)}
	s, err := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.tb.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < nFrags; i++ {
		f.appendKeys(i*rows, rows)
	}
	return f
}

func (f *fixture) appendKeys(start, n int64) {
	f.t.Helper()
	rows := make([]table.Row, 0, n)
	for k := start; k < start+n; k++ {
		rows = append(rows, table.Row{k, fmt.Sprintf("c%d", k%5), float64(k) / 4})
	}
	if _, err := f.tb.Append(context.Background(), rows); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) head() *pb.Manifest {
	f.t.Helper()
	m, err := table.ReadLatest(context.Background(), f.tb.Bucket)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) createIndex(name, col, typ string) {
	f.t.Helper()
	if _, err := index.Create(context.Background(), f.tb, index.Spec{Name: name, Column: col, Type: typ}, index.BuildConfig{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) compact(only ...uint32) *commit.Result {
	f.t.Helper()
	c, err := compact.New(compact.Config{TargetRowsPerFragment: 10_000}, f.tb, nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := c.Run(context.Background(), only)
	if err != nil {
		f.t.Fatal(err)
	}
	if out.Result == nil {
		f.t.Fatalf("nothing compacted among %v", only)
	}
	return out.Result
}

func (f *fixture) deleteKeys(pred func(int64) bool, lo, hi int64) {
	f.t.Helper()
	var spec ops.DeleteSpec
	for k := lo; k < hi; k++ {
		if pred(k) {
			spec.Keys = append(spec.Keys, table.Row{k, nil, nil})
		}
	}
	if _, _, err := f.tb.Delete(context.Background(), nil, spec); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deleteFragment(id uint32) {
	f.t.Helper()
	if _, _, err := f.tb.Delete(context.Background(), nil, ops.DeleteSpec{Fragment: &id}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) job(cfg indexjob.Config) *indexjob.Job {
	f.t.Helper()
	j, err := indexjob.New(cfg, f.tb, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// answers runs an index-only lookup of every key and returns the rows found,
// as "key->row JSON" lines, so that answers from different versions (and
// different addresses) compare by content.
func (f *fixture) answers(name string, keys []string) map[string][]string {
	f.t.Helper()
	m := f.head()
	out := map[string][]string{}
	for _, k := range keys {
		r, err := index.Lookup(context.Background(), f.tb.Bucket, m, name, k, index.LookupOptions{Rows: true})
		if err != nil {
			f.t.Fatalf("lookup %s=%s: %v", name, k, err)
		}
		var rows []string
		for _, mt := range r.Matches {
			rows = append(rows, string(table.RowJSON(m.Schema, mt.Row)))
		}
		slices.Sort(rows)
		out[k] = rows
	}
	return out
}

// truth scans the table for the rows whose column col renders as key.
func (f *fixture) truth(col int, keys []string) map[string][]string {
	f.t.Helper()
	m := f.head()
	out := map[string][]string{}
	for _, k := range keys {
		out[k] = nil
	}
	for _, fr := range m.Fragments {
		err := table.ScanFragment(context.Background(), f.tb.Bucket, m.Schema, fr, func(_ uint32, r table.Row) error {
			k := fmt.Sprint(r[col])
			if _, ok := out[k]; ok {
				out[k] = append(out[k], string(table.RowJSON(m.Schema, r)))
			}
			return nil
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func (f *fixture) liveRows() uint64 {
	var n uint64
	for _, fr := range f.head().Fragments {
		n += table.LiveRows(fr)
	}
	return n
}

func numKeys(lo, hi int64, url string) []string {
	step := int64(1)
	if !strings.HasPrefix(url, "mem://") {
		step = 7 // a lookup is a few round trips on a real store
	}
	var out []string
	for k := lo; k < hi; k += step {
		out = append(out, fmt.Sprint(k))
	}
	return out
}

func sameAnswers(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("%s: key %s: got %v, want %v", what, k, got[k], w)
		}
	}
}
