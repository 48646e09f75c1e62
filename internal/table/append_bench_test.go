package table

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/peakrss"
)

// benchCost is one measured append: the whole child process as its parent
// sees it (wall, CPU, peak RSS) and the append alone as the child measures
// it, after its start-up.
type benchCost struct {
	Wall, CPU         time.Duration // whole process
	MaxRSS            int64         // bytes, whole process (its VmHWM)
	WorkWall, WorkCPU time.Duration // the append, start-up left out
	// LanceDB only: Node's start-up (to LanceDB's module loaded) and the
	// JSON-to-Arrow parse, which is JavaScript, not LanceDB.
	StartWall, StartCPU time.Duration
	StartRSS            int64
	ParseWall, ParseCPU time.Duration
}

func (c benchCost) String() string {
	s := fmt.Sprintf("append wall %.2f s, CPU %.2f s; process wall %.2f s, CPU %.2f s, peak RSS %.0f MiB",
		c.WorkWall.Seconds(), c.WorkCPU.Seconds(), c.Wall.Seconds(), c.CPU.Seconds(), float64(c.MaxRSS)/(1<<20))
	if c.StartWall > 0 {
		s += fmt.Sprintf(" (Node start-up wall %.2f s, CPU %.2f s, RSS %.0f MiB; JSON parse wall %.2f s, CPU %.2f s)",
			c.StartWall.Seconds(), c.StartCPU.Seconds(), float64(c.StartRSS)/(1<<20), c.ParseWall.Seconds(), c.ParseCPU.Seconds())
	}
	return s
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// TestBenchAppendGrowth (LANCE_BENCH=1) is docs/benchmarks.md's "table
// append into a growing table": the same LANCE_BENCH_ROWS (default
// 1 000 000) JSON rows appended into an empty table and into one of
// LANCE_BENCH_BASE_FRAGMENTS (default 50) fragments of that many rows
// each, by compactord (`table append --jsonl`'s AppendJSON, this test
// binary re-run) and by LanceDB 0.39 (testdata/bench_append.mjs: the same
// file parsed into Arrow, then Table.add), each in a process of its own on
// its own copy of the same table; best wall time of LANCE_BENCH_TRIALS
// (default 3) interleaved trials. The big table is one real append, then
// its data file hard-linked under new names and committed as further
// Append fragments: an append reads none of the existing data, so its rows
// need not differ. The copies hard-link the data files (neither side
// changes one) and copy the rest.
//
//	LANCE_BENCH=1 CI=true go test ./internal/table -run TestBenchAppendGrowth -v
func TestBenchAppendGrowth(t *testing.T) {
	if p := os.Getenv("LANCE_APPEND_CHILD"); p != "" {
		appendChild(t, p, os.Getenv("LANCE_APPEND_INPUT"))
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
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
	dir := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		dir = filepath.Join(d, fmt.Sprintf("append-growth-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "rows.jsonl")
	{
		f, err := os.Create(input)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := range rows {
			fmt.Fprintf(w, `{"id":%d,"cat":"c%d","val":%d.25,"at":%d}`+"\n", i, i%97, i, 1_700_000_000_000_000+int64(i))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(dir, "base")
	mk := func(name string) *Handle {
		b := open(t, filepath.Join(base, name+".lance"))
		if _, err := Create(ctx, b, fields, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		return handle(t, b, commit.DefaultConfig())
	}
	mk("empty")
	big := mk("big")
	t0 := time.Now()
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	res, n, err := big.AppendJSON(ctx, f)
	f.Close()
	if err != nil || n != uint64(rows) {
		t.Fatalf("first append: %d rows, %v", n, err)
	}
	first := res.Manifest.Manifest.GetFragments()[0]
	src := filepath.Join(base, "big.lance", "data", first.GetFiles()[0].GetPath())
	for range baseFrags - 1 {
		read, naming, err := big.ReadForWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := DataFileName()
		if err := os.Link(src, filepath.Join(base, "big.lance", "data", name)); err != nil {
			t.Fatal(err)
		}
		f := proto.Clone(first).(*pb.DataFragment)
		f.Files[0].Path = name
		if _, err := big.Append(ctx, read, naming, []*pb.DataFragment{f}, []string{meta.DataKey(name)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("built a table of %d fragments x %d rows in %.1f s", baseFrags, rows, time.Since(t0).Seconds())

	start := map[string]int64{"empty": 0, "big": int64(baseFrags) * int64(rows)}
	best := map[string]benchCost{}
	for trial := range trials {
		tdir := filepath.Join(dir, fmt.Sprintf("t%d", trial))
		for _, name := range []string{"empty", "big"} {
			ours, theirs := filepath.Join(tdir, "c_"+name+".lance"), filepath.Join(tdir, "l_"+name+".lance")
			linkTable(t, filepath.Join(base, name+".lance"), ours)
			linkTable(t, filepath.Join(base, name+".lance"), theirs)

			c := runAppendChild(t, ours, input, rows)
			l := runAppendNode(t, in, theirs, input, rows, start[name])
			t.Logf("trial %d, %s table: compactord %s", trial, name, c)
			t.Logf("trial %d, %s table: LanceDB    %s", trial, name, l)
			if trial == trials-1 {
				// LanceDB reads compactord's append as it reads its own.
				got := lancedb.MustRun(t, lancedb.Program{URI: tdir, Table: "c_" + name, Steps: []lancedb.Step{lancedb.CountRows("")}})
				if cnt, err := got.Count(0); err != nil || cnt != start[name]+int64(rows) {
					t.Fatalf("LanceDB counts %d rows in compactord's %s table (%v), want %d", cnt, name, err, start[name]+int64(rows))
				}
			}
			if b, ok := best["c_"+name]; !ok || c.WorkWall < b.WorkWall {
				best["c_"+name] = c
			}
			if b, ok := best["l_"+name]; !ok || l.WorkWall < b.WorkWall {
				best["l_"+name] = l
			}
		}
		os.RemoveAll(tdir)
	}
	ce, cb, le, lb := best["c_empty"], best["c_big"], best["l_empty"], best["l_big"]
	t.Logf("append %d rows, best of %d trials:", rows, trials)
	for _, r := range []struct {
		into string
		c, l benchCost
	}{{"an empty table", ce, le}, {fmt.Sprintf("%d x %d rows", baseFrags, rows), cb, lb}} {
		t.Logf("  into %s: compactord %s", r.into, r.c)
		t.Logf("  into %s: LanceDB    %s", r.into, r.l)
		t.Logf("  into %s: compactord/LanceDB: append CPU %.2fx, wall %.2fx (against LanceDB's add and parse: CPU %.2fx, wall %.2fx); peak RSS %.2fx",
			r.into, r.c.WorkCPU.Seconds()/r.l.WorkCPU.Seconds(), r.c.WorkWall.Seconds()/r.l.WorkWall.Seconds(),
			r.c.WorkCPU.Seconds()/(r.l.WorkCPU+r.l.ParseCPU).Seconds(), r.c.WorkWall.Seconds()/(r.l.WorkWall+r.l.ParseWall).Seconds(),
			float64(r.c.MaxRSS)/float64(r.l.MaxRSS))
	}
	t.Logf("  big/empty: compactord CPU %.2fx, wall %.2fx, peak RSS %.2fx; LanceDB CPU %.2fx, wall %.2fx, peak RSS %.2fx",
		cb.WorkCPU.Seconds()/ce.WorkCPU.Seconds(), cb.WorkWall.Seconds()/ce.WorkWall.Seconds(), float64(cb.MaxRSS)/float64(ce.MaxRSS),
		lb.WorkCPU.Seconds()/le.WorkCPU.Seconds(), lb.WorkWall.Seconds()/le.WorkWall.Seconds(), float64(lb.MaxRSS)/float64(le.MaxRSS))
}

// appendChild is the measured compactord process: `table append --jsonl
// FILE` of input into the table at path.
func appendChild(t *testing.T, path, input string) {
	h := handle(t, open(t, path), commit.DefaultConfig())
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	_, n, err := h.AppendJSON(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	fmt.Printf("APPEND rows=%d wall=%d cpu=%d hwm=%d\n", n, wall.Nanoseconds(), cpu.Nanoseconds(), peakrss.Self())
}

func runAppendChild(t *testing.T, path, input string, rows int) benchCost {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchAppendGrowth$", "-test.v")
	cmd.Env = append(os.Environ(), "LANCE_APPEND_CHILD="+path, "LANCE_APPEND_INPUT="+input)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	c := benchCost{Wall: time.Since(start)}
	if err != nil {
		t.Fatalf("append child: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var n int
	var wall, cpu int64
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "APPEND "); i >= 0 {
			fmt.Sscanf(l[i:], "APPEND rows=%d wall=%d cpu=%d hwm=%d", &n, &wall, &cpu, &c.MaxRSS)
		}
	}
	if n != rows {
		t.Fatalf("append child appended %d rows, want %d:\n%s", n, rows, out)
	}
	c.WorkWall, c.WorkCPU = time.Duration(wall), time.Duration(cpu)
	return c
}

func runAppendNode(t *testing.T, in lancedb.Install, path, input string, rows int, before int64) benchCost {
	t.Helper()
	cmd := exec.Command(in.Node, filepath.Join("testdata", "bench_append.mjs"), filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".lance"), input)
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	c := benchCost{Wall: time.Since(start)}
	if err != nil {
		t.Fatalf("bench_append.mjs: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var r struct {
		Rows, Count                 int64
		MaxRssKb                    int64
		StartupWallMs, StartupCpuMs float64
		StartupRssKb                int64
		ParseWallMs, ParseCpuMs     float64
		AddWallMs, AddCpuMs         float64
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench_append.mjs: %q: %v", out, err)
	}
	if r.Rows != int64(rows) || r.Count != before+int64(rows) {
		t.Fatalf("LanceDB added %d rows, counts %d, want %d and %d", r.Rows, r.Count, rows, before+int64(rows))
	}
	c.WorkWall, c.WorkCPU, c.MaxRSS = ms(r.AddWallMs), ms(r.AddCpuMs), r.MaxRssKb<<10
	c.StartWall, c.StartCPU, c.StartRSS = ms(r.StartupWallMs), ms(r.StartupCpuMs), r.StartupRssKb<<10
	c.ParseWall, c.ParseCPU = ms(r.ParseWallMs), ms(r.ParseCpuMs)
	return c
}

// linkTable copies the table at src to dst, hard-linking its data files
// (written once, never changed by either side) and copying the rest.
func linkTable(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if filepath.Dir(rel) == "data" {
			return os.Link(p, target)
		}
		r, err := os.Open(p)
		if err != nil {
			return err
		}
		defer r.Close()
		w, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}
