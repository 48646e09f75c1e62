package index_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/peakrss"
	"github.com/compactord/compactord/internal/testing/tables"
)

func vbEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// vbUsage is one side's cost of one operation, timed around the call
// inside the process that made it.
type vbUsage struct {
	Wall, CPU time.Duration
	HWM       int64 // the process's peak RSS (VmHWM), bytes
	// Private bounds compactord's anonymous memory from above (what Go's
	// runtime mapped, peakrss.GoMapped); HWM adds the binary's own pages.
	// 0 for LanceDB.
	Private int64
}

func (u vbUsage) String() string {
	return fmt.Sprintf("%.2f s / %.2f s / %.0f MiB", u.Wall.Seconds(), u.CPU.Seconds(), float64(u.HWM)/(1<<20))
}

// vbBest keeps the best wall and CPU of the trials and the largest peak.
func vbBest(first bool, b, u vbUsage) vbUsage {
	if first {
		return u
	}
	return vbUsage{min(b.Wall, u.Wall), min(b.CPU, u.CPU), max(b.HWM, u.HWM), max(b.Private, u.Private)}
}

type vbStats struct {
	NumIndices int
	Indexed    int64
	Unindexed  int64
	Type       string
}

type vbNodeOut struct {
	Ms, WallMs, CpuMs float64
	MaxRssKb          int64
	Count             int64
	Version           int64
	Stats             *vbStats
	Compaction        struct{ FragmentsRemoved, FragmentsAdded int }
	Before, After     struct {
		Stats   *vbStats
		Version int64
	}
}

func vbNode(t *testing.T, in lancedb.Install, args ...string) vbNodeOut {
	t.Helper()
	var o vbNodeOut
	in.RunJSON(t, filepath.Join("testdata", "bench_vector.mjs"), &o, args...)
	return o
}

// vbCopy copies the table src to dst: data files and index files, which
// neither side ever changes in place, hard-linked; the rest copied.
func vbCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		args := []string{"-a"}
		if e.Name() == "data" || e.Name() == "_indices" {
			args = []string{"-al"}
		}
		args = append(args, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		if out, err := exec.Command("cp", args...).CombinedOutput(); err != nil {
			t.Fatalf("cp %v: %v: %s", args, err, out)
		}
	}
}

func vbDirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// vbSegment describes one segment of vec_idx: what a caller needs to tell
// a delta from a merge and a retrain.
type vbSegment struct {
	UUID       string
	Rows       int
	Partitions int
	Frags      uint64
	Centroids  string // hash of the centroids
	Quantizer  string // hash of the PQ codebook or the SQ bounds
	IndexBytes int64  // the segment's files on disk
}

func (s vbSegment) String() string {
	return fmt.Sprintf("%s…: %d rows, %d partitions, %d fragments, centroids %s, quantizer %s, %.1f MiB",
		s.UUID[:8], s.Rows, s.Partitions, s.Frags, s.Centroids, s.Quantizer, float64(s.IndexBytes)/(1<<20))
}

func vbSegments(t *testing.T, dir string) []vbSegment {
	t.Helper()
	h := tables.Open(t, dir)
	read, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var out []vbSegment
	for _, m := range read.Indices {
		if m.GetName() != "vec_idx" {
			continue
		}
		seg, err := vector.ReadSegment(t.Context(), h.Bucket, m)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := seg.Index.Centroids()
		hc := sha256.New()
		for _, x := range c {
			hc.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
		}
		hq := sha256.New()
		if p := seg.Storage.PQ; p != nil {
			for _, x := range p.Codebook {
				hq.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
			}
		}
		if q := seg.Storage.SQ; q != nil {
			fmt.Fprintf(hq, "%v %v", q.Bounds.Start, q.Bounds.End)
		}
		u := meta.UUIDString(m.GetUuid())
		bm, _, _ := meta.FragmentBitmap(m)
		var frags uint64
		if bm != nil {
			frags = bm.GetCardinality()
		}
		out = append(out, vbSegment{UUID: u, Rows: len(seg.Storage.RowIDs), Partitions: seg.Storage.Partitions(), Frags: frags,
			Centroids: fmt.Sprintf("%x", hc.Sum(nil)[:4]), Quantizer: fmt.Sprintf("%x", hq.Sum(nil)[:4]),
			IndexBytes: vbDirBytes(t, filepath.Join(dir, "_indices", u))})
	}
	return out
}

// vbIndexBytes is the size of the files of vec_idx's segments in the
// table's latest version (not of index files no version references).
func vbIndexBytes(t *testing.T, dir string) int64 {
	t.Helper()
	h := tables.Open(t, dir)
	read, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range read.Indices {
		if m.GetName() == "vec_idx" {
			n += vbDirBytes(t, filepath.Join(dir, "_indices", meta.UUIDString(m.GetUuid())))
		}
	}
	return n
}

// vbChild is the measured compactord process: one operation on the table
// at path, timed around the call (as the LanceDB side is), printing its
// wall and CPU time and its own peak RSS.
func vbChild(t *testing.T, op, path string) {
	h := tables.Open(t, path)
	if p := os.Getenv("LANCE_VECTOR_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("LANCE_VECTOR_MEMPROFILE"); p != "" {
		stop := vbHeapAtPeak(t, p)
		defer stop()
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	var rows, segs int
	switch op {
	case "catchup":
		res, err := index.CatchUp(t.Context(), h, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ix := range res.Indices {
			if ix.Name == "vec_idx" {
				if ix.Rebuilt {
					t.Fatal("catch-up rebuilt vec_idx instead of adding a delta")
				}
				rows, segs = ix.Rows, 1
			}
		}
	case "compact", "compact-defer":
		o := compact.DefaultOptions()
		o.DeferRemap = op == "compact-defer"
		res, err := compact.Run(t.Context(), h, o, compact.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit == nil {
			t.Fatal("nothing compacted")
		}
		rows = int(res.Stats.RowsRewritten)
	case "remap":
		res, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ix := range res.Indices {
			if ix.Name == "vec_idx" {
				rows, segs = ix.Entries-ix.Dropped, len(ix.Segments)
			}
		}
	default:
		t.Fatalf("unknown op %q", op)
	}
	wall := time.Since(t0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	fmt.Printf("VECBENCH wall=%d cpu=%d hwm=%d rows=%d segs=%d file=%d private=%d\n", wall.Nanoseconds(), cpu.Nanoseconds(), peakrss.Self(), rows, segs, peakrss.File(), peakrss.GoMapped())
}

// vbHeapAtPeak writes a heap profile to path whenever the live heap
// reaches a new high (by 5 %), polled every 10 ms, so the file ends up
// holding what was live near the peak (inuse_space) and every allocation
// so far (alloc_space). stop ends the polling.
func vbHeapAtPeak(t *testing.T, path string) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		var high uint64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > high+high/20 {
				high = v
				f, err := os.Create(path)
				if err != nil {
					t.Error(err)
					return
				}
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
				fmt.Printf("VECBENCH heap %.0f MiB live\n", float64(v)/(1<<20))
			}
		}
	}()
	return func() { close(done); <-finished }
}

func vbRunChild(t *testing.T, op, path string) (vbUsage, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchVectorIndex$", "-test.v")
	cmd.Env = append(os.Environ(), "LANCE_VECTOR_CHILD="+op+":"+path)
	if op != os.Getenv("LANCE_VECTOR_PROFILE_OP") {
		cmd.Env = append(cmd.Env, "LANCE_VECTOR_CPUPROFILE=", "LANCE_VECTOR_MEMPROFILE=")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s child: %v\n%s", op, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "VECBENCH wall="); i >= 0 {
			var w, c, hwm, file, private int64
			var rows, segs int
			if _, err := fmt.Sscanf(l[i:], "VECBENCH wall=%d cpu=%d hwm=%d rows=%d segs=%d file=%d private=%d", &w, &c, &hwm, &rows, &segs, &file, &private); err != nil {
				t.Fatalf("%s child: %q: %v", op, l, err)
			}
			t.Logf("%s child: peak RSS %.0f MiB, of which the binary's own pages %.0f MiB at the end; Go's runtime mapped %.0f MiB", op, float64(hwm)/(1<<20), float64(file)/(1<<20), float64(private)/(1<<20))
			return vbUsage{time.Duration(w), time.Duration(c), hwm, private}, rows
		}
	}
	t.Fatalf("%s child printed no result:\n%s", op, out)
	return vbUsage{}, 0
}

func vbLance(o vbNodeOut) vbUsage {
	return vbUsage{time.Duration(o.WallMs * float64(time.Millisecond)), time.Duration(o.CpuMs * float64(time.Millisecond)), o.MaxRssKb << 10, 0}
}

// vbTables builds, once per size into cache (reused when its markers
// exist), the benchmark's tables for the index kinds asked for ("pq",
// "hnsw"): base (rows vectors, one fragment, no index), shared by the
// kinds; per kind k, k (base with an IVF_PQ or IVF_HNSW_SQ index of parts
// partitions over it, then newRows more vectors appended unindexed, one
// fragment) and kdel (the indexed base with id % 9 = 3 deleted); for pq
// also nodel (pqdel with its index dropped: compaction without a remap,
// LanceDB's baseline). Each kind is built only when a chosen step needs it:
// at 1 M rows LanceDB's index build alone takes most of an hour.
func vbTables(t *testing.T, in lancedb.Install, cache string, rows, newRows, parts int, kinds []string) {
	t.Helper()
	// "built" is the marker of a cache that holds every kind.
	done := func(k string) bool {
		for _, m := range []string{"built", "built-" + k} {
			if _, err := os.Stat(filepath.Join(cache, m)); err == nil {
				return true
			}
		}
		return false
	}
	mark := func(k string) {
		if err := os.WriteFile(filepath.Join(cache, "built-"+k), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tb := func(n string) string { return filepath.Join(cache, n+".lance") }
	if !done("base") {
		if err := os.RemoveAll(cache); err != nil {
			t.Fatal(err)
		}
		o := vbNode(t, in, "gen", cache, "base", "0", strconv.Itoa(rows))
		t.Logf("LanceDB wrote %d vectors in %.1f s", o.Count, o.Ms/1000)
		mark("base")
	}
	typ := map[string]string{"pq": "ivf_pq", "hnsw": "ivf_hnsw_sq"}
	for _, k := range kinds {
		if done(k) {
			t.Logf("reusing the %s tables in %s", k, cache)
			continue
		}
		for _, n := range []string{k, k + "del", "nodel"} {
			if n != "nodel" || k == "pq" {
				if err := os.RemoveAll(tb(n)); err != nil {
					t.Fatal(err)
				}
			}
		}
		vbCopy(t, tb("base"), tb(k))
		o := vbNode(t, in, "index", cache, k, typ[k], strconv.Itoa(parts))
		t.Logf("LanceDB built %s over %d rows in %.1f s", typ[k], o.Stats.Indexed, o.Ms/1000)
		vbCopy(t, tb(k), tb(k+"del"))
		o = vbNode(t, in, "delete", cache, k+"del", "id % 9 = 3")
		t.Logf("%sdel: %d rows left", k, o.Count)
		if k == "pq" {
			vbCopy(t, tb("pqdel"), tb("nodel"))
			vbNode(t, in, "dropindex", cache, "nodel")
		}
		o = vbNode(t, in, "add", cache, k, strconv.Itoa(rows), strconv.Itoa(rows+newRows))
		t.Logf("%s: %d rows after the add", k, o.Count)
		mark(k)
	}
}

// vbBandwidth is one core's sequential read bandwidth, bytes/s: the best
// of a few sums over 256 MiB of float32, far beyond any cache.
func vbBandwidth() float64 {
	xs := make([]float32, 64<<20)
	for i := range xs {
		xs[i] = float32(i & 1023)
	}
	best := 0.0
	var sink float32
	for range 5 {
		t0 := time.Now()
		sink += vbSum8(xs)
		best = max(best, float64(4*len(xs))/time.Since(t0).Seconds())
	}
	if sink == 42 {
		fmt.Print("")
	}
	return best
}

// vbSum8 sums xs in eight independent sums (in a function of its own, so
// that they stay in registers).
func vbSum8(xs []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for i := 0; i+8 <= len(xs); i += 8 {
		x := xs[i : i+8 : i+8]
		s0 += x[0]
		s1 += x[1]
		s2 += x[2]
		s3 += x[3]
		s4 += x[4]
		s5 += x[5]
		s6 += x[6]
		s7 += x[7]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// TestBenchVectorIndex (LANCE_BENCH=1) is docs/benchmarks.md's "Lance:
// vector indexes". On LANCE_BENCH_ROWS (250 000) 768-d float32 vectors
// with an IVF_PQ and an IVF_HNSW_SQ index built by LanceDB with its
// defaults (LANCE_BENCH_PARTITIONS sets the partitions; LanceDB's own
// choice, rows / 8192 for IVF_PQ and rows / 2^20 for HNSW, keeps its
// optimize() from joining or splitting partitions):
//
//   - catch-up of LANCE_BENCH_NEW (100 000) appended vectors: compactord's
//     `index catchup` (a delta segment) against LanceDB's optimize() (the
//     test logs what optimize() did to the index: segments, partitions,
//     whether the centroids and codebook changed);
//   - remap after 11 % of the rows were deleted: compactord's compaction
//     with the remap inline, and its deferred compaction then `index
//     remap`, against LanceDB's optimize() (compaction and remap), and
//     LanceDB's optimize() of the same table without the index (so the
//     remap's share of LanceDB's time is the difference).
//
// Each side runs in a process of its own, timed around the call (wall,
// the process's CPU, its own peak RSS); best wall and CPU of
// LANCE_BENCH_TRIALS (2) interleaved trials on fresh copies. The tables
// are built once into LANCE_BENCH_DIR (a temporary directory without it)
// and reused by later runs of the same size. LanceDB's indexStats must
// count no unindexed row after either side's catch-up, and the same rows
// after either side's compaction. LANCE_VECTOR_CPUPROFILE=FILE with
// LANCE_VECTOR_PROFILE_OP=catchup|compact|compact-defer|remap profiles
// that compactord child (LANCE_VECTOR_MEMPROFILE=FILE: its heap near the
// peak); LANCE_BENCH_VECTOR_STEPS=catchup-pq,catchup-hnsw,
// remap-pq,remap-hnsw runs some steps only (and builds only the tables
// they need); LANCE_BENCH_BUILD_ONLY=1 builds the tables and stops.
// LANCE_VECTOR_DESCRIBE=TABLE_DIR only logs the segments of TABLE_DIR's
// vec_idx.
func TestBenchVectorIndex(t *testing.T) {
	if c := os.Getenv("LANCE_VECTOR_CHILD"); c != "" {
		op, path, _ := strings.Cut(c, ":")
		vbChild(t, op, path)
		return
	}
	if p := os.Getenv("LANCE_VECTOR_DESCRIBE"); p != "" {
		for _, s := range vbSegments(t, p) {
			t.Logf("%s: %s", p, s)
		}
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	rows := vbEnvInt("LANCE_BENCH_ROWS", 250000)
	newRows := vbEnvInt("LANCE_BENCH_NEW", 100000)
	parts := vbEnvInt("LANCE_BENCH_PARTITIONS", 0)
	trials := vbEnvInt("LANCE_BENCH_TRIALS", 2)
	// LANCE_BENCH_VECTOR_STEPS picks steps: catchup-pq, catchup-hnsw,
	// remap-pq, remap-hnsw (all by default).
	steps := os.Getenv("LANCE_BENCH_VECTOR_STEPS")
	want := func(step string) bool {
		return steps == "" || slices.Contains(strings.Split(steps, ","), step)
	}
	root := os.Getenv("LANCE_BENCH_DIR")
	if root == "" {
		root = t.TempDir()
	}
	cache := filepath.Join(root, fmt.Sprintf("vector-%d-%d-%d", rows, newRows, parts))
	var kinds []string
	for _, k := range []string{"pq", "hnsw"} {
		if want("catchup-"+k) || want("remap-"+k) {
			kinds = append(kinds, k)
		}
	}
	vbTables(t, in, cache, rows, newRows, parts, kinds)
	if os.Getenv("LANCE_BENCH_BUILD_ONLY") != "" {
		return
	}
	work := filepath.Join(root, fmt.Sprintf("vector-work-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.RemoveAll(work) })
	tb := func(dir, n string) string { return filepath.Join(dir, n+".lance") }

	bw := vbBandwidth()
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f %f %f", &load[0], &load[1], &load[2])
	}
	t.Logf("%d vectors of 768 float32 + %d new, %d partitions, GOMAXPROCS %d, load average %.2f; one core's sequential read bandwidth %.1f GB/s",
		rows, newRows, parts, runtime.GOMAXPROCS(0), load[0], bw/1e9)
	for _, n := range kinds {
		for _, s := range vbSegments(t, tb(cache, n)) {
			t.Logf("%s before: %s", n, s)
		}
	}

	type row struct {
		what                  string
		lance, ours           vbUsage
		lanceIndex, oursIndex int64
	}
	res := map[string]*row{}
	add := func(key, what string, first bool, lance, ours *vbUsage, lidx, idx int64) {
		r := res[key]
		if r == nil {
			r = &row{what: what}
			res[key] = r
		}
		if lance != nil {
			r.lance = vbBest(first, r.lance, *lance)
		}
		if ours != nil {
			r.ours = vbBest(first, r.ours, *ours)
		}
		r.lanceIndex, r.oursIndex = max(r.lanceIndex, lidx), max(r.oursIndex, idx)
	}
	for trial := range trials {
		dir := filepath.Join(work, strconv.Itoa(trial))
		first := trial == 0
		// Sides take turns going first (the second one runs on caches
		// the first warmed and after its CPU burst).
		lanceFirst := trial%2 == 0
		for _, n := range []string{"pq", "hnsw"} {
			if !want("catchup-" + n) {
				continue
			}
			l, c := tb(dir, "l"+n), tb(dir, "c"+n)
			vbCopy(t, tb(cache, n), l)
			vbCopy(t, tb(cache, n), c)
			var lo vbNodeOut
			var ou vbUsage
			var got int
			lside := func() { syscall.Sync(); lo = vbNode(t, in, "optimize", dir, "l"+n) }
			cside := func() { syscall.Sync(); ou, got = vbRunChild(t, "catchup", c) }
			if lanceFirst {
				lside()
				cside()
			} else {
				cside()
				lside()
			}
			if got != newRows {
				t.Fatalf("%s: compactord's catch-up indexed %d rows, want %d", n, got, newRows)
			}
			st := vbNode(t, in, "stats", dir, "c"+n)
			if st.Stats == nil || st.Stats.Unindexed != 0 || st.Stats.NumIndices != 2 {
				t.Fatalf("%s: LanceDB's indexStats after compactord's catch-up: %+v", n, st.Stats)
			}
			if lo.After.Stats == nil || lo.After.Stats.Unindexed != 0 {
				t.Fatalf("%s: LanceDB's indexStats after its optimize(): %+v", n, lo.After.Stats)
			}
			if first {
				t.Logf("%s: LanceDB optimize(): versions %d → %d, compaction %+v, vec_idx %+v → %+v", n, lo.Before.Version, lo.After.Version, lo.Compaction, *lo.Before.Stats, *lo.After.Stats)
				for _, s := range vbSegments(t, l) {
					t.Logf("%s after LanceDB's optimize(): %s", n, s)
				}
				for _, s := range vbSegments(t, c) {
					t.Logf("%s after compactord's catch-up: %s", n, s)
				}
			}
			lu := vbLance(lo)
			add("catchup-"+n, map[string]string{"pq": "IVF_PQ", "hnsw": "IVF_HNSW_SQ"}[n]+" catch-up", first, &lu, &ou, vbIndexBytes(t, l), vbIndexBytes(t, c))
			t.Logf("trial %d, %s catch-up: LanceDB %s, compactord %s", trial, n, lu, ou)
		}
		for _, n := range []string{"pq", "hnsw"} {
			if !want("remap-" + n) {
				continue
			}
			src := tb(cache, n+"del")
			l, c, d := tb(dir, "l"+n+"del"), tb(dir, "c"+n+"del"), tb(dir, "d"+n+"del")
			vbCopy(t, src, l)
			vbCopy(t, src, c)
			var lo vbNodeOut
			var inl, def, rem vbUsage
			lside := func() { syscall.Sync(); lo = vbNode(t, in, "optimize", dir, "l"+n+"del") }
			cside := func() {
				syscall.Sync()
				inl, _ = vbRunChild(t, "compact", c)
				if n == "pq" {
					// HNSW indexes are left out of a deferred compaction.
					vbCopy(t, src, d)
					syscall.Sync()
					def, _ = vbRunChild(t, "compact-defer", d)
					syscall.Sync()
					rem, _ = vbRunChild(t, "remap", d)
				}
			}
			if lanceFirst {
				lside()
				cside()
			} else {
				cside()
				lside()
			}
			want := lo.Count
			for _, x := range []string{c, d} {
				if n != "pq" && x == d {
					continue
				}
				st := vbNode(t, in, "stats", dir, strings.TrimSuffix(filepath.Base(x), ".lance"))
				if st.Count != want || st.Stats == nil || st.Stats.Unindexed != 0 || st.Stats.Indexed != want {
					t.Fatalf("%s: LanceDB reads %d rows (LanceDB's own compaction: %d) and indexStats %+v", x, st.Count, want, st.Stats)
				}
			}
			if first {
				t.Logf("%sdel: LanceDB optimize(): versions %d → %d, compaction %+v, vec_idx %+v → %+v", n, lo.Before.Version, lo.After.Version, lo.Compaction, *lo.Before.Stats, *lo.After.Stats)
			}
			lu := vbLance(lo)
			name := map[string]string{"pq": "IVF_PQ", "hnsw": "IVF_HNSW_SQ"}[n]
			add("compact-"+n, name+": compaction with inline remap", first, &lu, &inl, vbIndexBytes(t, l), vbIndexBytes(t, c))
			if n == "pq" {
				add("defer-"+n, name+": deferred compaction (no remap)", first, nil, &def, 0, 0)
				add("remap-"+n, name+": `index remap` after it", first, nil, &rem, 0, vbIndexBytes(t, d))
			}
			t.Logf("trial %d, %sdel: LanceDB optimize %s; compactord inline %s, deferred %s + remap %s", trial, n, lu, inl, def, rem)
		}
		if !want("remap-pq") {
			os.RemoveAll(dir)
			continue
		}
		// LanceDB's compaction of the same table without the index: its
		// remap's share is the difference.
		nl := tb(dir, "lnodel")
		vbCopy(t, tb(cache, "nodel"), nl)
		syscall.Sync()
		lu := vbLance(vbNode(t, in, "optimize", dir, "lnodel"))
		add("compact-noindex", "compaction without the index", first, &lu, nil, 0, 0)
		t.Logf("trial %d, no index: LanceDB optimize %s", trial, lu)
		os.RemoveAll(dir)
	}

	t.Logf("summary: %d + %d vectors, %d partitions, best wall and CPU of %d trials, largest peak RSS, load average %.2f at the start (LanceDB %s)",
		rows, newRows, parts, trials, load[0], lancedb.Version)
	t.Logf("| operation | LanceDB wall / CPU / peak RSS | compactord wall / CPU / peak RSS | wall × | CPU × | index MiB (LanceDB, compactord) | peak RSS MiB per GiB of index (LanceDB, compactord) | compactord's anonymous memory, at most: MiB, per GiB of index |")
	for _, k := range []string{"catchup-pq", "catchup-hnsw", "compact-pq", "defer-pq", "remap-pq", "compact-hnsw", "compact-noindex"} {
		r := res[k]
		if r == nil {
			continue
		}
		ratio := func(a, b time.Duration) string {
			if a == 0 || b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", a.Seconds()/b.Seconds())
		}
		perGiB := func(u vbUsage, idx int64) string {
			if idx == 0 || u.HWM == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f", float64(u.HWM)/(1<<20)/(float64(idx)/(1<<30)))
		}
		t.Logf("| %s | %s | %s | %s | %s | %.1f, %.1f | %s, %s | %.0f, %s |", r.what, r.lance, r.ours, ratio(r.lance.Wall, r.ours.Wall), ratio(r.lance.CPU, r.ours.CPU),
			float64(r.lanceIndex)/(1<<20), float64(r.oursIndex)/(1<<20), perGiB(r.lance, r.lanceIndex), perGiB(r.ours, r.oursIndex),
			float64(r.ours.Private)/(1<<20), perGiB(vbUsage{HWM: r.ours.Private}, r.oursIndex))
	}
	if c, n, r := res["compact-pq"], res["compact-noindex"], res["remap-pq"]; c != nil && n != nil && r != nil {
		lw, lc := c.lance.Wall-n.lance.Wall, c.lance.CPU-n.lance.CPU
		t.Logf("IVF_PQ remap alone: LanceDB's optimize() with the index minus without it: %.2f s wall / %.2f s CPU; compactord's `index remap`: %s (wall %.2f×, CPU %.2f×)",
			lw.Seconds(), lc.Seconds(), r.ours, lw.Seconds()/r.ours.Wall.Seconds(), lc.Seconds()/r.ours.CPU.Seconds())
	}
}
