package verify

import (
	"context"
	"encoding/json"
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

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/peakrss"
)

// TestBenchVerifyHistory (LANCE_BENCH=1) is docs/benchmarks.md's "Lance:
// verify over a long history": an append-only history where version v
// holds v-1 fragments (each its own data file), for each count in
// LANCE_BENCH_VERIFY_VERSIONS (default 100,1000,3000,10000); verify runs in
// a process of its own (this test binary re-run) and reports wall, CPU and
// peak RSS (the child's own VmHWM: see package peakrss). Its peer is LanceDB 0.39 reading the same history
// (testdata/bench_history.mjs: checkout and countRows of every version, in
// a Node process of its own), which LanceDB has instead of a verify; it
// runs for counts up to LANCE_BENCH_LANCEDB_VERSIONS (default 3000). It is
// not the same check: verify also lists every object and checks each
// version against them. LANCE_BENCH_DIR puts the tables there instead of
// the test's temporary directory; LANCE_VERIFY_CPUPROFILE=FILE writes
// verify's CPU profile.
//
//	LANCE_BENCH=1 go test ./internal/verify -run TestBenchVerifyHistory -v -timeout 60m
func TestBenchVerifyHistory(t *testing.T) {
	if p := os.Getenv("LANCE_VERIFY_CHILD"); p != "" {
		verifyChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	peerMax := 3000
	if v, err := strconv.Atoi(os.Getenv("LANCE_BENCH_LANCEDB_VERSIONS")); err == nil && v >= 0 {
		peerMax = v
	}
	counts := []int{100, 1000, 3000, 10_000}
	if s := os.Getenv("LANCE_BENCH_VERIFY_VERSIONS"); s != "" {
		counts = counts[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 2 {
				t.Fatalf("LANCE_BENCH_VERIFY_VERSIONS: %q", f)
			}
			counts = append(counts, n)
		}
	}
	root := t.TempDir()
	if d := os.Getenv("LANCE_BENCH_DIR"); d != "" {
		root = filepath.Join(d, fmt.Sprintf("verify-history-%d", time.Now().UnixNano()))
		t.Cleanup(func() { os.RemoveAll(root) })
	}
	for _, n := range counts {
		dir := filepath.Join(root, fmt.Sprintf("h%d.lance", n))
		t0 := time.Now()
		bytes := buildAppendHistory(t, dir, n)
		built := time.Since(t0)

		cmd := exec.Command(os.Args[0], "-test.run=^TestBenchVerifyHistory$", "-test.v")
		cmd.Env = append(os.Environ(), "LANCE_VERIFY_CHILD="+dir)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			t.Fatalf("verify child: %v\n%s", err, out)
		}
		var cpu time.Duration
		var rss int64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		var versions, objects, violations int
		for _, l := range strings.Split(string(out), "\n") {
			if i := strings.Index(l, "VERIFY "); i >= 0 {
				fmt.Sscanf(l[i:], "VERIFY versions=%d objects=%d violations=%d hwm=%d", &versions, &objects, &violations, &rss)
			}
		}
		if versions != n || violations != 0 {
			t.Fatalf("verify checked %d versions (want %d) with %d violations:\n%s", versions, n, violations, out)
		}
		t.Logf("%6d versions (%5.0f MiB of manifests, built in %4.1f s): verify wall %6.2f s, CPU %6.2f s, peak RSS %4.0f MiB, %d objects",
			n, float64(bytes)/(1<<20), built.Seconds(), wall.Seconds(), cpu.Seconds(), float64(rss)/(1<<20), objects)
		if n <= peerMax {
			l := walkHistoryNode(t, in, dir, n)
			t.Logf("%6d versions: LanceDB checkout+countRows of every version: walk wall %6.2f s, CPU %6.2f s; process wall %6.2f s, CPU %6.2f s, peak RSS %4.0f MiB (Node start-up wall %.2f s, CPU %.2f s, RSS %.0f MiB)",
				n, l.walkWall.Seconds(), l.walkCPU.Seconds(), l.wall.Seconds(), l.cpu.Seconds(), float64(l.rss)/(1<<20),
				l.startWall.Seconds(), l.startCPU.Seconds(), float64(l.startRSS)/(1<<20))
			t.Logf("%6d versions: compactord verify / LanceDB walk: CPU %.2fx (against the walk's whole process %.2fx), wall %.2fx, peak RSS %.2fx",
				n, cpu.Seconds()/l.walkCPU.Seconds(), cpu.Seconds()/l.cpu.Seconds(), wall.Seconds()/l.walkWall.Seconds(), float64(rss)/float64(l.rss))
		}
		os.RemoveAll(dir)
	}
}

// nodeWalk is one LanceDB history walk: the whole Node process as its
// parent sees it, and the walk alone (connect, open, every version) as the
// process measures it after its start-up (to LanceDB's module loaded).
type nodeWalk struct {
	wall, cpu, walkWall, walkCPU, startWall, startCPU time.Duration
	rss, startRSS                                     int64
}

func walkHistoryNode(t *testing.T, in lancedb.Install, dir string, n int) nodeWalk {
	t.Helper()
	cmd := exec.Command(in.Node, filepath.Join("testdata", "bench_history.mjs"), filepath.Dir(dir), strings.TrimSuffix(filepath.Base(dir), ".lance"))
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	w := nodeWalk{wall: time.Since(start)}
	if err != nil {
		t.Fatalf("bench_history.mjs: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		w.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var r struct {
		Versions, Rows              int64
		MaxRssKb                    int64
		StartupWallMs, StartupCpuMs float64
		StartupRssKb                int64
		WalkWallMs, WalkCpuMs       float64
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench_history.mjs: %q: %v", out, err)
	}
	// Version v holds v-1 fragments of 100 rows.
	if want := int64(100) * int64(n) * int64(n-1) / 2; r.Versions != int64(n) || r.Rows != want {
		t.Fatalf("LanceDB walked %d versions of %d rows in all, want %d and %d", r.Versions, r.Rows, n, want)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	w.walkWall, w.walkCPU, w.rss = ms(r.WalkWallMs), ms(r.WalkCpuMs), r.MaxRssKb<<10
	w.startWall, w.startCPU, w.startRSS = ms(r.StartupWallMs), ms(r.StartupCpuMs), r.StartupRssKb<<10
	return w
}

func verifyChild(t *testing.T, dir string) {
	b, err := storage.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if p := os.Getenv("LANCE_VERIFY_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := Run(t.Context(), b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Log(v)
	}
	fmt.Printf("VERIFY versions=%d objects=%d violations=%d hwm=%d\n", len(rep.Versions), rep.Objects, len(rep.Violations), peakrss.Self())
}

// buildAppendHistory writes an n-version table at dir with compactord's own
// Lance code: table.Create, then one append of one fragment per version,
// each a data file, a transaction file and the manifest commit.BuildManifest
// makes, put as the commit loop puts it (without the loop's head search: the
// benchmark is the only writer). It returns the manifests' total size.
func buildAppendHistory(tb testing.TB, dir string, n int) int64 {
	tb.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	fields := []*pb.Field{{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"}}
	head, err := table.Create(ctx, b, fields, "", time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	data := make([]byte, 64)
	for v := uint64(2); v <= uint64(n); v++ {
		_, id := meta.NewUUID()
		path := id + ".lance"
		if err := b.Put(ctx, meta.DataKey(path), data); err != nil {
			tb.Fatal(err)
		}
		txn := commit.NewTransaction(v - 1)
		txn.Operation = &pb.Transaction_Append_{Append: &pb.Transaction_Append{Fragments: []*pb.DataFragment{{PhysicalRows: 100,
			Files: []*pb.DataFile{{Path: path, Fields: []int32{0}, ColumnIndices: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 2, FileSizeBytes: uint64(len(data))}}}}}}
		raw, err := meta.EncodeTransaction(txn)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.Put(ctx, meta.TransactionKey(meta.TransactionName(v-1, txn.GetUuid())), raw); err != nil {
			tb.Fatal(err)
		}
		next, err := commit.BuildManifest(head, txn, head, time.Now())
		if err != nil {
			tb.Fatal(err)
		}
		mf, err := meta.EncodeManifestFile(next)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.PutIfAbsent(ctx, meta.ManifestKey(meta.NamingV2, v), mf); err != nil {
			tb.Fatal(err)
		}
		total += int64(len(mf))
		head = next
	}
	if err := meta.WriteHint(ctx, b, uint64(n)); err != nil {
		tb.Fatal(err)
	}
	return total
}
