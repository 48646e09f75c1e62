package index

import (
	"fmt"
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
	"github.com/compactord/compactord/internal/testing/peakrss"
)

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ftsBenchNode runs testdata/bench_fts.mjs and decodes its JSON line.
func ftsBenchNode(t *testing.T, in lancedb.Install, v any, args ...string) {
	t.Helper()
	in.RunJSON(t, filepath.Join("testdata", "bench_fts.mjs"), v, args...)
}

// ftsCatchUpChild is the measured process: one catch-up of the table at
// path, as `compactord index catchup` runs it.
func ftsCatchUpChild(t *testing.T, path string) {
	h := openHandle(t, path)
	if p := os.Getenv("LANCE_FTS_CPUPROFILE"); p != "" {
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
	res, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rebuilt {
		t.Fatalf("catch-up %+v: want one new partition", res)
	}
	fmt.Printf("FTSCATCHUP rows=%d secs=%g hwm=%d\n", res.Indices[0].Rows, time.Since(t0).Seconds(), peakrss.Self())
}

// TestBenchFullTextCatchUp (LANCE_BENCH=1) is docs/benchmarks.md's "Lance:
// full-text catch-up". LanceDB builds a table of LANCE_BENCH_FTS_BASE
// (default 1 Mi) docs of LANCE_BENCH_FTS_WORDS (default 50) words with a
// full-text index (simple, lower-cased, unstemmed; with
// LANCE_BENCH_FTS_TOKENIZER=default LanceDB's default index over English
// words), then appends
// LANCE_BENCH_FTS_NEW (default 100 000) docs; a copy is caught up by
// LanceDB's optimize() (its own process, timed around the call: with a
// base fragment of 1 Mi rows there is nothing to compact, so the call is
// the index step) and another by compactord's catch-up (this test binary
// re-run). Both must then count no unindexed row, and a rare word's top
// 10 must score the same (within 1e-4). Best wall and CPU of
// LANCE_BENCH_TRIALS (default 2) interleaved trials, largest peak RSS.
// LANCE_FTS_CPUPROFILE=FILE profiles compactord's side.
func TestBenchFullTextCatchUp(t *testing.T) {
	if p := os.Getenv("LANCE_FTS_CHILD"); p != "" {
		ftsCatchUpChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	base, extra, words := benchEnvInt("LANCE_BENCH_FTS_BASE", 1<<20), benchEnvInt("LANCE_BENCH_FTS_NEW", 100_000), benchEnvInt("LANCE_BENCH_FTS_WORDS", 50)
	trials := benchEnvInt("LANCE_BENCH_TRIALS", 2)
	db := t.TempDir()
	var built struct {
		BuildMs, IndexMs float64
		Count            int64
	}
	args := []string{"build", db, "src", strconv.Itoa(base), strconv.Itoa(extra), strconv.Itoa(words)}
	var vocab []string
	if tok := os.Getenv("LANCE_BENCH_FTS_TOKENIZER"); tok == "default" {
		// LanceDB's default index (English stemming, stop words, folding)
		// over English words.
		path := filepath.Join("fts", "testdata", "english_words.txt")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		vocab = strings.Fields(string(b))
		args = append(args, path)
	} else if tok != "" && tok != "plain" {
		t.Fatalf("LANCE_BENCH_FTS_TOKENIZER=%q: want plain or default", tok)
	}
	ftsBenchNode(t, in, &built, args...)
	t.Logf("LanceDB built %d docs of %d words (index over %d: %.1f s), %d appended", built.Count, words, base, built.IndexMs/1000, extra)
	type usage struct {
		wall, cpu time.Duration
		rss       int64
	}
	best := func(b *usage, u usage) {
		if b.wall == 0 || u.wall < b.wall {
			b.wall = u.wall
		}
		if b.cpu == 0 || u.cpu < b.cpu {
			b.cpu = u.cpu
		}
		b.rss = max(b.rss, u.rss)
	}
	var lance, ours usage
	for trial := range trials {
		lt, ct := fmt.Sprintf("l%d", trial), fmt.Sprintf("c%d", trial)
		for _, d := range []string{lt, ct} {
			if out, err := exec.Command("cp", "-a", filepath.Join(db, "src.lance"), filepath.Join(db, d+".lance")).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
		}
		lanceSide := func() {
			syscall.Sync()
			var opt struct {
				WallMs, CpuMs float64
				MaxRssKb      int64
				Unindexed     int64
			}
			ftsBenchNode(t, in, &opt, "optimize", db, lt)
			if opt.Unindexed != 0 {
				t.Fatalf("LanceDB's optimize() left %d rows unindexed", opt.Unindexed)
			}
			u := usage{wall: time.Duration(opt.WallMs * float64(time.Millisecond)), cpu: time.Duration(opt.CpuMs * float64(time.Millisecond)), rss: opt.MaxRssKb << 10}
			t.Logf("trial %d: LanceDB optimize(): wall %.2f s, CPU %.2f s, peak RSS %.0f MiB", trial, u.wall.Seconds(), u.cpu.Seconds(), float64(u.rss)/(1<<20))
			best(&lance, u)
		}
		oursSide := func() {
			syscall.Sync()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBenchFullTextCatchUp$", "-test.v")
			cmd.Env = append(os.Environ(), "LANCE_FTS_CHILD="+filepath.Join(db, ct+".lance"))
			start := time.Now()
			out, err := cmd.CombinedOutput()
			u := usage{wall: time.Since(start)}
			if err != nil {
				t.Fatalf("catch-up child: %v\n%s", err, out)
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
			var rows int
			var secs float64
			for _, l := range strings.Split(string(out), "\n") {
				if i := strings.Index(l, "FTSCATCHUP "); i >= 0 {
					fmt.Sscanf(l[i:], "FTSCATCHUP rows=%d secs=%g hwm=%d", &rows, &secs, &u.rss)
				}
			}
			if rows != extra {
				t.Fatalf("catch-up indexed %d docs, want %d:\n%s", rows, extra, out)
			}
			// The child's own time for the catch-up (not its start-up).
			u.wall = time.Duration(secs * float64(time.Second))
			t.Logf("trial %d: compactord catch-up: wall %.2f s, CPU %.2f s (the process's), peak RSS %.0f MiB", trial, u.wall.Seconds(), u.cpu.Seconds(), float64(u.rss)/(1<<20))
			best(&ours, u)
		}
		if trial%2 == 0 {
			lanceSide()
			oursSide()
		} else {
			oursSide()
			lanceSide()
		}
		if trial == 0 {
			// Both copies answer alike: LanceDB counts nothing unindexed
			// on ours, and a mid-frequency word's top 10 score the same.
			query := "w" + strconv.FormatInt(3000, 36)
			if vocab != nil {
				query = vocab[(3000*7919)%len(vocab)] // bench_fts.mjs's word of rank 3000
			}
			score := func(table string) []float64 {
				f := &lancedb.Fixture{URI: db, Table: table, Dir: filepath.Join(db, table+".lance")}
				out := f.Run(t, lancedb.Open(), lancedb.IndexStats("doc_idx"), lancedb.TextSearch(query, "doc", 10, []string{"id"}))
				if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 {
					t.Fatalf("%s: indexStats %+v (%v)", table, st, err)
				}
				rows, err := out.Rows(2)
				if err != nil || len(rows) != 10 {
					t.Fatalf("%s: %d rows for %s (%v)", table, len(rows), query, err)
				}
				var s []float64
				for _, r := range rows {
					v, _ := r.Float("_score")
					s = append(s, v)
				}
				return s
			}
			ls, cs := score(lt), score(ct)
			slicesSortDesc(ls)
			slicesSortDesc(cs)
			for i := range ls {
				if d := ls[i] - cs[i]; d > 1e-4 || d < -1e-4 {
					t.Fatalf("top-10 scores of %s: compactord's %v, LanceDB's %v", query, cs, ls)
				}
			}
		}
		os.RemoveAll(filepath.Join(db, lt+".lance"))
		os.RemoveAll(filepath.Join(db, ct+".lance"))
	}
	msg := fmt.Sprintf("full-text catch-up of %d docs (%d words) into a %d-doc index, best of %d: LanceDB optimize() wall %.2f s, CPU %.2f s, peak RSS %.0f MiB; compactord wall %.2f s, CPU %.2f s, peak RSS %.0f MiB; CPU ratio %.2fx, wall ratio %.2fx",
		extra, words, base, trials, lance.wall.Seconds(), lance.cpu.Seconds(), float64(lance.rss)/(1<<20), ours.wall.Seconds(), ours.cpu.Seconds(), float64(ours.rss)/(1<<20),
		lance.cpu.Seconds()/ours.cpu.Seconds(), lance.wall.Seconds()/ours.wall.Seconds())
	t.Log(msg)
	fmt.Println(msg)
}

func slicesSortDesc(s []float64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] > s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
