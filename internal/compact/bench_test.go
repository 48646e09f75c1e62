package compact

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/peakrss"
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

func benchNode(t *testing.T, in lancedb.Install, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(in.Node, append([]string{filepath.Join("testdata", "bench_compact.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench_compact.mjs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("bench_compact.mjs %s: %q: %v", args[0], out, err)
	}
}

// compactChild is the measured process: one Run with Lance's default
// options on the table at path, as `compactord compact URL` runs it.
func compactChild(t *testing.T, path string) {
	h := openHandle(t, path)
	if p := os.Getenv("LANCE_COMPACT_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("LANCE_COMPACT_MEMPROFILE"); p != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(p)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	if p := os.Getenv("LANCE_COMPACT_HEAPPROFILE"); p != "" {
		stop := heapAtPeak(t, p)
		defer stop()
	}
	t0 := time.Now()
	res, err := Run(t.Context(), h, DefaultOptions(), Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil {
		t.Fatal("nothing compacted")
	}
	s := res.Stats
	// The child's own peak: its ru_maxrss, as the parent sees it, would
	// carry the parent test's peak (see package peakrss).
	fmt.Printf("COMPACT groups=%d in=%d out=%d copied=%d rewritten=%d dropped=%d read=%d written=%d secs=%g hwm=%d\n",
		s.Groups, s.FragmentsIn, s.FragmentsOut, s.FragmentsCopied, s.RowsRewritten, s.RowsDropped, s.BytesRead, s.BytesWritten, time.Since(t0).Seconds(), peakrss.Self())
}

// heapAtPeak samples the live heap after every GC cycle and writes the
// heap profile of the largest one seen to path when stopped: what the
// compaction holds at its peak.
func heapAtPeak(t *testing.T, path string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	done := make(chan struct{})
	finished := make(chan struct{})
	var best uint64
	var prof []byte
	go func() {
		defer close(finished)
		var last uint32
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.NumGC == last {
				continue
			}
			last = ms.NumGC
			// HeapAlloc right after a cycle is about the live heap; the
			// profile shows the allocations live as of the last cycle.
			if ms.HeapAlloc > best {
				var b strings.Builder
				if err := pprof.Lookup("heap").WriteTo(&b, 0); err == nil {
					best, prof = ms.HeapAlloc, []byte(b.String())
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		if err := os.WriteFile(path, prof, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func runCompactChild(t *testing.T, table string) (usage, Stats) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchCompaction$", "-test.v")
	cmd.Env = append(os.Environ(), "LANCE_COMPACT_CHILD="+table)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	u := usage{Wall: time.Since(start)}
	if err != nil {
		t.Fatalf("compact child: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var s Stats
	var secs float64
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "COMPACT "); i >= 0 {
			fmt.Sscanf(l[i:], "COMPACT groups=%d in=%d out=%d copied=%d rewritten=%d dropped=%d read=%d written=%d secs=%g hwm=%d",
				&s.Groups, &s.FragmentsIn, &s.FragmentsOut, &s.FragmentsCopied, &s.RowsRewritten, &s.RowsDropped, &s.BytesRead, &s.BytesWritten, &secs, &u.MaxRSS)
		}
	}
	if s.Groups == 0 {
		t.Fatalf("compact child printed no result:\n%s", out)
	}
	return u, s
}

func dataBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := os.ReadDir(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func cpTree(t *testing.T, src, dst string) time.Duration {
	t.Helper()
	t0 := time.Now()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return time.Since(t0)
}

// best keeps the best wall time and CPU time of a side's trials and the
// largest peak RSS; trial 0 starts it.
func best(trial int, b, u usage) usage {
	if trial == 0 {
		return u
	}
	b.Wall, b.CPU, b.MaxRSS = min(b.Wall, u.Wall), min(b.CPU, u.CPU), max(b.MaxRSS, u.MaxRSS)
	return b
}

// syncTree fsyncs every file of dir (coreutils sync FILE...).
func syncTree(t *testing.T, dir string) time.Duration {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{}
	for _, e := range ents {
		args = append(args, filepath.Join(dir, e.Name()))
	}
	t0 := time.Now()
	if out, err := exec.Command("sync", args...).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v: %s", err, out)
	}
	return time.Since(t0)
}

// TestBenchCompaction (LANCE_BENCH=1; LANCE_BENCH_ROWS, default 4 Mi rows
// in LANCE_BENCH_FRAG_ROWS, default 256 Ki, rows per fragment) is
// docs/benchmarks.md's "Lance: compaction". Two tables LanceDB builds:
//
//   - deletes: 1 row in 10 deleted (id % 10 = 3) in every fragment; a copy
//     is compacted by LanceDB's optimize() (its own process, timed) and
//     another by compactord (this test binary re-run, timed); both must
//     then read the same rows in LanceDB.
//   - plain: no deletions; compactord's compaction (pages copied without
//     decoding) against cp -a of the table's data files.
//
// Best of LANCE_BENCH_TRIALS (default 3) interleaved trials on fresh
// copies. LANCE_COMPACT_CPUPROFILE=FILE profiles the compaction's CPU,
// LANCE_COMPACT_MEMPROFILE=FILE its allocations (pprof -sample_index=alloc_space),
// LANCE_COMPACT_HEAPPROFILE=FILE what is live at the largest heap seen;
// LANCE_BENCH_DIR puts the tables there.
func TestBenchCompaction(t *testing.T) {
	if p := os.Getenv("LANCE_COMPACT_CHILD"); p != "" {
		compactChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	rows := envInt("LANCE_BENCH_ROWS", 4<<20)
	fragRows := envInt("LANCE_BENCH_FRAG_ROWS", 256<<10)
	trials := envInt("LANCE_BENCH_TRIALS", 3)
	db := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		db = filepath.Join(d, fmt.Sprintf("compact-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(db) })
	}
	var built struct {
		BuildMs float64
		Count   int64
	}
	benchNode(t, in, &built, "build", db, "del", strconv.Itoa(rows), strconv.Itoa(fragRows), "10")
	live := built.Count
	benchNode(t, in, &built, "build", db, "plain", strconv.Itoa(rows), strconv.Itoa(fragRows), "0")
	delDir, plainDir := filepath.Join(db, "del.lance"), filepath.Join(db, "plain.lance")
	delBytes, plainBytes := dataBytes(t, delDir), dataBytes(t, plainDir)
	t.Logf("LanceDB built %d rows in fragments of %d: %d live after deletes (%.0f MiB of data files), %.0f MiB without deletes",
		rows, fragRows, live, float64(delBytes)/(1<<20), float64(plainBytes)/(1<<20))

	var lance, ours, copied usage
	var cpWall, cpSyncWall time.Duration
	var st, cst Stats
	for trial := range trials {
		lt, ct, pt := filepath.Join(db, fmt.Sprintf("l%d.lance", trial)), filepath.Join(db, fmt.Sprintf("c%d.lance", trial)), filepath.Join(db, fmt.Sprintf("p%d.lance", trial))
		cpTree(t, delDir, lt)
		cpTree(t, delDir, ct)
		var opt struct {
			WallMs, CpuMs float64
			MaxRssKb      int64
			Count         int64
		}
		// Each timed side starts with no dirty pages: the copies above,
		// and LanceDB's optimize (which does not fsync its files), would
		// otherwise be written back during the next side's run. The sides
		// take turns going first: a side run right after the other's
		// seconds of work on both cores measured 1.6-2.4x the CPU time
		// for the same work (user and system alike) on this VM.
		var l, o usage
		var s Stats
		lanceSide := func() {
			syscall.Sync()
			benchNode(t, in, &opt, "optimize", db, strings.TrimSuffix(filepath.Base(lt), ".lance"))
			l = usage{Wall: time.Duration(opt.WallMs * float64(time.Millisecond)), CPU: time.Duration(opt.CpuMs * float64(time.Millisecond)), MaxRSS: opt.MaxRssKb << 10}
			if opt.Count != live {
				t.Fatalf("LanceDB's optimize left %d rows, want %d", opt.Count, live)
			}
		}
		oursSide := func() {
			syscall.Sync()
			o, s = runCompactChild(t, ct)
		}
		if trial%2 == 0 {
			lanceSide()
			oursSide()
		} else {
			oursSide()
			lanceSide()
		}

		// Without deletions: compactord against cp of the same bytes, and
		// against cp then sync of the copies (compactord's writes are
		// fsynced before the commit names them).
		syscall.Sync()
		cpData := cpTree(t, filepath.Join(plainDir, "data"), pt+"-data")
		cpSync := cpData + syncTree(t, pt+"-data")
		os.RemoveAll(pt + "-data")
		cpTree(t, plainDir, pt)
		syscall.Sync()
		p, ps := runCompactChild(t, pt)
		if ps.FragmentsCopied != ps.FragmentsIn {
			t.Fatalf("plain table: %d of %d fragments copied", ps.FragmentsCopied, ps.FragmentsIn)
		}
		t.Logf("trial %d: deletes: LanceDB optimize %s; compactord %s; plain: compactord %s, cp of the data files %.2f s (with sync %.2f s)", trial, l, o, p, cpData.Seconds(), cpSync.Seconds())
		if trial == trials-1 {
			var a, b struct {
				Count       int64
				IDSum, Hash string
			}
			benchNode(t, in, &a, "digest", db, strings.TrimSuffix(filepath.Base(lt), ".lance"))
			benchNode(t, in, &b, "digest", db, strings.TrimSuffix(filepath.Base(ct), ".lance"))
			if a != b || a.Count != live {
				t.Fatalf("LanceDB reads its compaction as %+v, compactord's as %+v (want %d rows)", a, b, live)
			}
		}
		// Per side, the best wall and CPU time of the trials (perhaps of
		// different trials) and the largest peak RSS.
		lance, ours, copied = best(trial, lance, l), best(trial, ours, o), best(trial, copied, p)
		st, cst = s, ps
		if trial == 0 || cpData < cpWall {
			cpWall = cpData
		}
		if trial == 0 || cpSync < cpSyncWall {
			cpSyncWall = cpSync
		}
		for _, d := range []string{lt, ct, pt} {
			os.RemoveAll(d)
		}
	}
	gib := float64(delBytes) / (1 << 30)
	t.Logf("compaction of %d rows (%d fragments, 10%% deleted, %.0f MiB), best wall and CPU of %d trials, largest peak RSS:", rows, st.FragmentsIn, float64(delBytes)/(1<<20), trials)
	t.Logf("  LanceDB optimize(): %s", lance)
	t.Logf("  compactord compact: %s (%d groups, %d fragments out, %d rows dropped)", ours, st.Groups, st.FragmentsOut, st.RowsDropped)
	t.Logf("  speed-up %.2fx wall, %.2fx CPU; %.0f MB per CPU-s (LanceDB %.0f); peak RSS %.0f MiB per GiB of input",
		lance.Wall.Seconds()/ours.Wall.Seconds(), lance.CPU.Seconds()/ours.CPU.Seconds(),
		float64(delBytes)/1e6/ours.CPU.Seconds(), float64(delBytes)/1e6/lance.CPU.Seconds(), float64(ours.MaxRSS)/(1<<20)/gib)
	t.Logf("compaction without deletions (%.0f MiB, %d fragments copied): compactord %s; cp -a of the data files %.2f s (%.2fx cp's speed), cp then sync %.2f s (%.2fx); peak RSS %.0f MiB per GiB",
		float64(plainBytes)/(1<<20), cst.FragmentsCopied, copied, cpWall.Seconds(), cpWall.Seconds()/copied.Wall.Seconds(),
		cpSyncWall.Seconds(), cpSyncWall.Seconds()/copied.Wall.Seconds(), float64(copied.MaxRSS)/(1<<20)/(float64(plainBytes)/(1<<30)))
}
