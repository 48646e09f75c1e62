package compact_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type fixture struct {
	t       *testing.T
	url     string
	tb      *ops.Table
	metrics *commit.Metrics
	reg     *prometheus.Registry
}

func openFixture(t *testing.T, url string) *fixture {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	reg := prometheus.NewRegistry()
	m := commit.NewMetrics(reg)
	c, err := commit.NewCommitter(commit.Config{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}, b, nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, url: url, tb: ops.NewTable(b, c, nil, nil), metrics: m, reg: reg}
}

// newFixture creates a table (id int64 key, cat string, val float64) with
// nFrags fragments of rows rows each; key k lives in fragment k/rows.
func newFixture(t *testing.T, url string, nFrags, rows int64) *fixture {
	t.Helper()
	f := openFixture(t, url)
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

// where maps every live key of m to its row address.
func (f *fixture) where(m *pb.Manifest) map[int64]uint64 {
	f.t.Helper()
	out := map[int64]uint64{}
	for _, fr := range m.Fragments {
		err := table.ScanFragment(context.Background(), f.tb.Bucket, m.Schema, fr, func(off uint32, r table.Row) error {
			k := r[0].(int64)
			if _, dup := out[k]; dup {
				return fmt.Errorf("key %d is live twice", k)
			}
			out[k] = table.RowAddr(fr.Id, off)
			return nil
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}

func (f *fixture) createIndex(name, col, typ string) {
	f.t.Helper()
	if _, err := index.Create(context.Background(), f.tb, index.Spec{Name: name, Column: col, Type: typ}, index.BuildConfig{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) compactor(cfg compact.Config) *compact.Compactor {
	f.t.Helper()
	if cfg.TargetRowsPerFragment == 0 {
		cfg.TargetRowsPerFragment = 10_000
	}
	c, err := compact.New(cfg, f.tb, nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// prepare plans against the head (restricted to only) and executes, without
// committing.
func (f *fixture) prepare(c *compact.Compactor, only ...uint32) *compact.Prepared {
	f.t.Helper()
	read, jobs, err := c.Plan(context.Background(), only)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(jobs) == 0 {
		f.t.Fatalf("nothing to compact among %v", only)
	}
	p, err := c.Execute(context.Background(), read, jobs)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) run(c *compact.Compactor, only ...uint32) *commit.Result {
	f.t.Helper()
	out, err := c.Run(context.Background(), only)
	if err != nil {
		f.t.Fatal(err)
	}
	if out.Result == nil {
		f.t.Fatalf("nothing compacted among %v", only)
	}
	return out.Result
}

func (f *fixture) deleteWhere(m *pb.Manifest, expr string) *commit.Result {
	f.t.Helper()
	if m == nil {
		m = f.head()
	}
	p, err := ops.ParsePredicate(m.Schema, expr)
	if err != nil {
		f.t.Fatal(err)
	}
	res, _, err := f.tb.Delete(context.Background(), m, ops.DeleteSpec{Predicate: p})
	if err != nil {
		f.t.Fatalf("delete %s: %v", expr, err)
	}
	return res
}

// checkLookups asserts that index name alone (no fallback scan) finds
// exactly the live row of every key in keys, and nothing for keys not live.
func (f *fixture) checkLookups(name string, keys []int64) { f.checkLookupsOpts(name, keys, false) }

// checkLookupsOpts is checkLookups, optionally with the scan of fragments
// the index does not cover.
func (f *fixture) checkLookupsOpts(name string, keys []int64, scan bool) {
	f.t.Helper()
	m := f.head()
	live := f.where(m)
	if !strings.HasPrefix(f.url, "mem://") && len(keys) > 40 {
		// Every lookup is a few round trips on a real store: sample.
		var sample []int64
		for i := 0; i < len(keys); i += 9 {
			sample = append(sample, keys[i])
		}
		keys = append(sample, keys[len(keys)-1])
	}
	for _, k := range keys {
		r, err := index.Lookup(context.Background(), f.tb.Bucket, m, name, fmt.Sprint(k), index.LookupOptions{ScanUnindexed: scan})
		if err != nil {
			f.t.Fatalf("lookup %d: %v", k, err)
		}
		addr, ok := live[k]
		got := r.Addrs()
		if ok && !slices.Equal(got, []uint64{addr}) || !ok && len(got) != 0 {
			f.t.Fatalf("lookup %s=%d: got %v, want %v (live=%v)", name, k, got, addr, ok)
		}
	}
}

func (f *fixture) chain() *fri.Chain {
	f.t.Helper()
	c, err := fri.Compile(table.FragReuse(f.head()).GetVersions())
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// counter reads a commit metric from the registry: labels are name=value
// pairs that must all match.
func (f *fixture) counter(name string, labels ...string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	f.t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

func keysRange(lo, hi int64) []int64 {
	var out []int64
	for k := lo; k < hi; k++ {
		out = append(out, k)
	}
	return out
}

func opsFragment(id uint32) ops.DeleteSpec { return ops.DeleteSpec{Fragment: &id} }

// newIDs returns the ids of the fragments a committed Rewrite created, in
// group order (found by data-file path: ids are assigned at build time).
func newIDs(m *pb.Manifest, txn *pb.Transaction) []uint32 {
	byPath := map[string]uint32{}
	for _, f := range m.Fragments {
		byPath[f.GetDataFile().GetPath()] = f.Id
	}
	var out []uint32
	for _, g := range txn.GetRewrite().GetGroups() {
		for _, nf := range g.NewFragments {
			if id, ok := byPath[nf.GetDataFile().GetPath()]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func opsKeys(pred func(int64) bool, lo, hi int64) ops.DeleteSpec {
	var spec ops.DeleteSpec
	for k := lo; k < hi; k++ {
		if pred(k) {
			spec.Keys = append(spec.Keys, table.Row{k, nil, nil})
		}
	}
	return spec
}
