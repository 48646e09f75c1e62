package table

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/lance/commit"
	"github.com/compactord/compactord/internal/lance/meta"
)

// TestBenchAppendGrowth (LANCE_BENCH=1) is docs/benchmarks.md's "Lance:
// append into a growing table": `table append` of the same
// LANCE_BENCH_ROWS (default 1 000 000) JSON rows into an empty table and
// into one of LANCE_BENCH_BASE_FRAGMENTS (default 50) fragments of that
// many rows each, best wall time of LANCE_BENCH_TRIALS (default 3)
// interleaved trials, with the process CPU each used. The big table is one
// real append, then its data file hard-linked under new names and
// committed as further Append fragments: an append reads none of the
// existing data, so its rows need not differ.
//
//	LANCE_BENCH=1 go test ./internal/lance/table -run TestBenchAppendGrowth -v
func TestBenchAppendGrowth(t *testing.T) {
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	rows := envInt("LANCE_BENCH_ROWS", 1_000_000)
	baseFrags := envInt("LANCE_BENCH_BASE_FRAGMENTS", 50)
	trials := envInt("LANCE_BENCH_TRIALS", 3)
	ctx := t.Context()
	fields, err := ParseFields("id:int64,cat:string,val:float64,at:timestamp", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	var input bytes.Buffer
	for i := range rows {
		fmt.Fprintf(&input, `{"id":%d,"cat":"c%d","val":%d.25,"at":%d}`+"\n", i, i%97, i, 1_700_000_000_000_000+int64(i))
	}
	dir := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		dir = filepath.Join(d, fmt.Sprintf("append-growth-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	mk := func(name string) *Handle {
		b := open(t, filepath.Join(dir, name))
		if _, err := Create(ctx, b, fields, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		return handle(t, b, commit.DefaultConfig())
	}
	empty, big := mk("empty.lance"), mk("big.lance")
	t0 := time.Now()
	res, n, err := big.AppendJSON(ctx, bytes.NewReader(input.Bytes()))
	if err != nil || n != uint64(rows) {
		t.Fatalf("first append: %d rows, %v", n, err)
	}
	first := res.Manifest.Manifest.GetFragments()[0]
	src := filepath.Join(dir, "big.lance", "data", first.GetFiles()[0].GetPath())
	for range baseFrags - 1 {
		read, naming, err := big.ReadForWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := DataFileName()
		if err := os.Link(src, filepath.Join(dir, "big.lance", "data", name)); err != nil {
			t.Fatal(err)
		}
		f := proto.Clone(first).(*pb.DataFragment)
		f.Files[0].Path = name
		if _, err := big.Append(ctx, read, naming, []*pb.DataFragment{f}, []string{meta.DataKey(name)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("built a table of %d fragments x %d rows in %.1f s", baseFrags, rows, time.Since(t0).Seconds())

	type cost struct{ wall, cpu time.Duration }
	best := map[string]cost{}
	for trial := range trials {
		for _, tc := range []struct {
			name string
			h    *Handle
		}{{"empty", empty}, {"big", big}} {
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			start := time.Now()
			if _, _, err := tc.h.AppendJSON(ctx, bytes.NewReader(input.Bytes())); err != nil {
				t.Fatal(err)
			}
			c := cost{wall: time.Since(start)}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			c.cpu = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			t.Logf("trial %d: append %d rows into the %s table: wall %.2f s, CPU %.2f s", trial, rows, tc.name, c.wall.Seconds(), c.cpu.Seconds())
			if b, ok := best[tc.name]; !ok || c.wall < b.wall {
				best[tc.name] = c
			}
		}
	}
	e, b := best["empty"], best["big"]
	t.Logf("append %d rows: into an empty table wall %.2f s CPU %.2f s; into %d x %d rows wall %.2f s CPU %.2f s; ratio %.2fx wall, %.2fx CPU",
		rows, e.wall.Seconds(), e.cpu.Seconds(), baseFrags, rows, b.wall.Seconds(), b.cpu.Seconds(), b.wall.Seconds()/e.wall.Seconds(), b.cpu.Seconds()/e.cpu.Seconds())
}
