package merge

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// usage is one process's cost.
type usage struct {
	Wall   time.Duration
	CPU    time.Duration
	MaxRSS int64 // bytes
}

func (u usage) String() string {
	return fmt.Sprintf("wall %.2f s, CPU %.2f s, peak RSS %.0f MiB", u.Wall.Seconds(), u.CPU.Seconds(), float64(u.MaxRSS)/(1<<20))
}

func nodeJSON(t *testing.T, in lancedb.Install, v any, args ...string) {
	t.Helper()
	in.RunJSON(t, filepath.Join("testdata", "bench_memwal.mjs"), v, args...)
}

// mergeChild is the measured process: RunAll on the table at path, as
// `compactord merge URL` runs it, and one line with what landed.
func mergeChild(t *testing.T, path string) {
	h := openHandle(t, path)
	if p := os.Getenv("LANCE_MERGE_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	out, err := RunAll(t.Context(), h, Env{MaxGenerations: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	var gens, ins, sup int
	for _, r := range out.Landed {
		gens += len(r.Generations)
		ins += r.Inserted
		sup += r.Superseded
	}
	fmt.Printf("MERGE commits=%d generations=%d inserted=%d superseded=%d skipped=%d secs=%g\n",
		len(out.Landed), gens, ins, sup, len(out.Skipped), time.Since(t0).Seconds())
}

// TestBenchMemWALMerge (LANCE_BENCH=1; LANCE_BENCH_ROWS, default
// 10 000 000; LANCE_BENCH_UPSERTS, default 1 000 000) is docs/benchmarks.md's
// "Lance: MemWAL merge": LanceDB builds a table and an identical copy,
// writes the upserts to the first through its MemWAL and merge-inserts
// the same upserts into the copy on its plain path (timed, in a process of
// its own); then compactord merges the MemWAL generations into the first
// (timed, in a process of its own: this test binary re-run), best of
// LANCE_BENCH_TRIALS (default 3) interleaved trials on fresh copies. Both
// tables must then read the same rows in LanceDB. LANCE_MERGE_CPUPROFILE=FILE
// writes the merge's CPU profile; LANCE_BENCH_DIR puts the tables there
// instead of the test's temporary directory.
func TestBenchMemWALMerge(t *testing.T) {
	if p := os.Getenv("LANCE_MERGE_CHILD"); p != "" {
		mergeChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	rows := envInt("LANCE_BENCH_ROWS", 10_000_000)
	upserts := envInt("LANCE_BENCH_UPSERTS", 1_000_000)
	db := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		db = filepath.Join(d, fmt.Sprintf("memwal-merge-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(db) })
	}

	var built struct{ BaseMs, MemwalMs float64 }
	t0 := time.Now()
	nodeJSON(t, in, &built, "build", db, strconv.Itoa(rows), strconv.Itoa(upserts))
	t.Logf("LanceDB built %d rows and wrote %d upserts through its MemWAL in %.1f s (base %.1f s, MemWAL write %.1f s)",
		rows, upserts, time.Since(t0).Seconds(), built.BaseMs/1000, built.MemwalMs/1000)

	// Interleaved trials, each on fresh copies of both tables; the best
	// of each side counts (the machine may be shared).
	trials := envInt("LANCE_BENCH_TRIALS", 3)
	var lance, ours usage
	var gens int
	var secs float64
	for trial := range trials {
		lt, ct := "plain", "t"
		if trial < trials-1 {
			lt, ct = fmt.Sprintf("plain%d", trial), fmt.Sprintf("t%d", trial)
			for _, p := range [][2]string{{"plain", lt}, {"t", ct}} {
				if out, err := exec.Command("cp", "-a", filepath.Join(db, p[0]+".lance"), filepath.Join(db, p[1]+".lance")).CombinedOutput(); err != nil {
					t.Fatalf("copy: %v: %s", err, out)
				}
			}
		}
		var plain struct {
			WallMs, CpuMs     float64
			MaxRssKb          int64
			Inserted, Updated int64
		}
		nodeJSON(t, in, &plain, "plain", db, strconv.Itoa(rows), strconv.Itoa(upserts), lt)
		l := usage{Wall: time.Duration(plain.WallMs * float64(time.Millisecond)), CPU: time.Duration(plain.CpuMs * float64(time.Millisecond)), MaxRSS: plain.MaxRssKb << 10}
		if plain.Inserted+plain.Updated != int64(upserts) {
			t.Fatalf("LanceDB's mergeInsert: %d inserted + %d updated, want %d", plain.Inserted, plain.Updated, upserts)
		}

		cmd := exec.Command(os.Args[0], "-test.run=^TestBenchMemWALMerge$", "-test.v")
		cmd.Env = append(os.Environ(), "LANCE_MERGE_CHILD="+filepath.Join(db, ct+".lance"))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		o := usage{Wall: time.Since(start)}
		if err != nil {
			t.Fatalf("merge child: %v\n%s", err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			o.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			o.MaxRSS = ru.Maxrss << 10 // KiB on Linux
		}
		var commits, ins, sup, skipped int
		var s float64
		for _, l := range strings.Split(string(out), "\n") {
			if i := strings.Index(l, "MERGE "); i >= 0 {
				fmt.Sscanf(l[i:], "MERGE commits=%d generations=%d inserted=%d superseded=%d skipped=%d secs=%g", &commits, &gens, &ins, &sup, &skipped, &s)
			}
		}
		if commits == 0 || ins != upserts || sup != upserts*8/10 {
			t.Fatalf("compactord merged %d commits, %d generations, inserted %d, superseded %d (want %d, %d):\n%s", commits, gens, ins, sup, upserts, upserts*8/10, out)
		}
		t.Logf("trial %d: LanceDB %s; compactord %s", trial, l, o)
		if trial == 0 || l.Wall < lance.Wall {
			lance = l
		}
		if trial == 0 || o.Wall < ours.Wall {
			ours, secs = o, s
		}
		if trial < trials-1 {
			os.RemoveAll(filepath.Join(db, lt+".lance"))
			os.RemoveAll(filepath.Join(db, ct+".lance"))
		}
	}

	var a, b struct {
		Count       int64
		IDSum, Hash string
	}
	nodeJSON(t, in, &a, "digest", db, "t")
	nodeJSON(t, in, &b, "digest", db, "plain")
	if a != b || a.Count != int64(rows+upserts-upserts*8/10) {
		t.Fatalf("LanceDB reads the merged table as %+v, its own merge-insert as %+v (want %d rows)", a, b, rows+upserts-upserts*8/10)
	}

	t.Logf("merge %d upserts (%d generations) into %d rows, best of %d trials:", upserts, gens, rows, trials)
	t.Logf("  LanceDB mergeInsert (plain path): %s", lance)
	t.Logf("  compactord merge (MemWAL):        %s (merge itself %.2f s)", ours, secs)
	t.Logf("  speed-up %.2fx wall, %.2fx CPU", lance.Wall.Seconds()/ours.Wall.Seconds(), lance.CPU.Seconds()/ours.CPU.Seconds())
	if os.Getenv("LANCE_BENCH_ENFORCE") != "" {
		if lance.Wall.Seconds()/ours.Wall.Seconds() < 1.5 || ours.MaxRSS > 512<<20 {
			t.Errorf("goals missed: ≥ 1.5x LanceDB's wall time, ≤ 512 MiB peak RSS")
		}
	}
}

// TestBenchMergeGenerations (LANCE_BENCH=1; LANCE_BENCH_ROWS, default
// 1 000 000; LANCE_BENCH_UPSERTS, default 100 000, LanceDB's limit of one
// generation; LANCE_BENCH_GENERATIONS, default 1,16,64,256) is docs/benchmarks.md's
// "Lance: merge peak RSS by generations": for each count LanceDB builds the
// table and writes the same upserts through its MemWAL in that many
// generations; compactord merges them all in a process of its own (this
// test binary re-run), lowest peak RSS of LANCE_BENCH_TRIALS (default 3)
// runs on fresh copies, which should not grow with the count.
func TestBenchMergeGenerations(t *testing.T) {
	if p := os.Getenv("LANCE_MERGE_CHILD"); p != "" {
		mergeChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	rows := envInt("LANCE_BENCH_ROWS", 1_000_000)
	upserts := envInt("LANCE_BENCH_UPSERTS", 100_000)
	counts := []int{1, 16, 64, 256}
	if s := os.Getenv("LANCE_BENCH_GENERATIONS"); s != "" {
		counts = counts[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("LANCE_BENCH_GENERATIONS: %q", f)
			}
			counts = append(counts, n)
		}
	}
	root := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		root = filepath.Join(d, fmt.Sprintf("merge-generations-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(root) })
	}
	trials := envInt("LANCE_BENCH_TRIALS", 3)
	var first usage
	for i, n := range counts {
		db := filepath.Join(root, strconv.Itoa(n))
		var built struct{ MemwalMs float64 }
		nodeJSON(t, in, &built, "gens", db, strconv.Itoa(rows), strconv.Itoa(upserts), strconv.Itoa(n))
		// Trials on fresh copies; the lowest peak counts (a shared
		// machine starves the collector now and then, which inflates a
		// peak without saying anything about what the merge holds).
		var o usage
		var commits int
		for trial := range trials {
			path := filepath.Join(db, fmt.Sprintf("c%d.lance", trial))
			if out, err := exec.Command("cp", "-a", filepath.Join(db, "t.lance"), path).CombinedOutput(); err != nil {
				t.Fatalf("copy: %v: %s", err, out)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestBenchMergeGenerations$", "-test.v")
			cmd.Env = append(os.Environ(), "LANCE_MERGE_CHILD="+path)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			u := usage{Wall: time.Since(start)}
			if err != nil {
				t.Fatalf("merge child: %v\n%s", err, out)
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				u.MaxRSS = ru.Maxrss << 10 // KiB on Linux
			}
			var gens, ins, sup, skipped int
			var s float64
			for _, l := range strings.Split(string(out), "\n") {
				if i := strings.Index(l, "MERGE "); i >= 0 {
					fmt.Sscanf(l[i:], "MERGE commits=%d generations=%d inserted=%d superseded=%d skipped=%d secs=%g", &commits, &gens, &ins, &sup, &skipped, &s)
				}
			}
			if gens != n || ins != upserts || sup != upserts*8/10 {
				t.Fatalf("compactord merged %d generations (want %d), inserted %d, superseded %d (want %d, %d):\n%s", gens, n, ins, sup, upserts, upserts*8/10, out)
			}
			if trial == 0 || u.MaxRSS < o.MaxRSS {
				o = u
			}
			os.RemoveAll(path)
		}
		if i == 0 {
			first = o
		}
		t.Logf("%4d generations (LanceDB wrote them in %.1f s): compactord merge in %d commits: %s; peak RSS %.2fx the first row's",
			n, built.MemwalMs/1000, commits, o, float64(o.MaxRSS)/float64(first.MaxRSS))
		os.RemoveAll(db)
	}
}
