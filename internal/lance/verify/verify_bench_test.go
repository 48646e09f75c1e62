package verify

import (
	"context"
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
	"github.com/compactord/compactord/internal/lance/commit"
	"github.com/compactord/compactord/internal/lance/meta"
	"github.com/compactord/compactord/internal/lance/table"
	"github.com/compactord/compactord/internal/storage"
)

// TestBenchVerifyHistory (LANCE_BENCH=1) is docs/benchmarks.md's "Lance:
// verify over a long history": an append-only history where version v
// holds v-1 fragments (each its own data file), for each count in
// LANCE_BENCH_VERIFY_VERSIONS (default 100,1000,3000,10000); verify runs in
// a process of its own (this test binary re-run) and reports wall, CPU and
// peak RSS. LANCE_BENCH_DIR puts the tables there instead of the test's
// temporary directory; LANCE_VERIFY_CPUPROFILE=FILE writes verify's CPU
// profile.
//
//	LANCE_BENCH=1 go test ./internal/lance/verify -run TestBenchVerifyHistory -v -timeout 60m
func TestBenchVerifyHistory(t *testing.T) {
	if p := os.Getenv("LANCE_VERIFY_CHILD"); p != "" {
		verifyChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
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
			rss = ru.Maxrss << 10 // KiB on Linux
		}
		var versions, objects, violations int
		for _, l := range strings.Split(string(out), "\n") {
			if i := strings.Index(l, "VERIFY "); i >= 0 {
				fmt.Sscanf(l[i:], "VERIFY versions=%d objects=%d violations=%d", &versions, &objects, &violations)
			}
		}
		if versions != n || violations != 0 {
			t.Fatalf("verify checked %d versions (want %d) with %d violations:\n%s", versions, n, violations, out)
		}
		t.Logf("%6d versions (%5.0f MiB of manifests, built in %4.1f s): verify wall %6.2f s, CPU %6.2f s, peak RSS %4.0f MiB, %d objects",
			n, float64(bytes)/(1<<20), built.Seconds(), wall.Seconds(), cpu.Seconds(), float64(rss)/(1<<20), objects)
		os.RemoveAll(dir)
	}
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
	fmt.Printf("VERIFY versions=%d objects=%d violations=%d\n", len(rep.Versions), rep.Objects, len(rep.Violations))
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
