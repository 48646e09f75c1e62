package scan_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/peakrss"
)

// TestBenchLanceDB (LANCE_BENCH=1, LANCE_BENCH_ROWS, LANCE_BENCH_TRIALS)
// compares the Go reader and writer with LanceDB on the same files, one
// column type per table: each trial runs testdata/bench.mjs (LanceDB
// writes the rows, then reads them to Arrow) and then times Go decoding
// the file LanceDB just wrote and encoding the decoded rows into a new
// file, both from and to disk. Best of the trials per side; the table it
// logs is docs/benchmarks.md's "Lance file format".
func TestBenchLanceDB(t *testing.T) {
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	in := lancedb.Require(t)
	rows := envInt("LANCE_BENCH_ROWS", 500_000)
	trials := envInt("LANCE_BENCH_TRIALS", 3)
	dir := t.TempDir()
	type result struct {
		lanceRead, lanceWrite, goRead, goWrite time.Duration
		lanceSize, goSize                      int64
		decoded                                int64
		order                                  int
	}
	best := map[string]*result{}
	keep := func(d *time.Duration, v time.Duration) {
		if *d == 0 || v < *d {
			*d = v
		}
	}
	for trial := 0; trial < trials; trial++ {
		cmd := exec.Command(in.Node, filepath.Join("testdata", "bench.mjs"), filepath.Join(dir, "db"), strconv.Itoa(rows))
		cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bench.mjs: %v\n%s", err, out)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var l struct {
				Type            string
				WriteMs, ReadMs float64
				File            string
				Size            int64
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("bench.mjs line %s: %v", sc.Bytes(), err)
			}
			r := best[l.Type]
			if r == nil {
				r = &result{order: len(best)}
				best[l.Type] = r
			}
			keep(&r.lanceWrite, time.Duration(l.WriteMs*float64(time.Millisecond)))
			keep(&r.lanceRead, time.Duration(l.ReadMs*float64(time.Millisecond)))
			r.lanceSize = l.Size
			// Go on the same file, right after LanceDB.
			runtime.GC()
			t0 := time.Now()
			fh, err := os.Open(l.File)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := fh.Stat()
			f, err := file.Open(fh, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			b, err := f.ReadAll(nil)
			if err != nil {
				t.Fatal(err)
			}
			keep(&r.goRead, time.Since(t0))
			fh.Close()
			r.decoded = decodedSize(b.Columns[0])
			runtime.GC()
			outPath := filepath.Join(dir, l.Type+".go.lance")
			t0 = time.Now()
			size := writeFile(t, outPath, f.Desc.GetSchema().GetFields(), b)
			keep(&r.goWrite, time.Since(t0))
			r.goSize = size
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d rows per type, best of %d interleaved trials\n\n", rows, trials)
	sb.WriteString("| type | decoded MB | LanceDB read ms | Go read ms | read speed-up | LanceDB write ms | Go write ms | write speed-up | LanceDB bytes | Go bytes | size ratio |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	names := make([]string, len(best))
	for k, r := range best {
		names[r.order] = k
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }
	for _, k := range names {
		r := best[k]
		fmt.Fprintf(&sb, "| %s | %.1f | %s | %s | %.2f× | %s | %s | %.2f× | %d | %d | %.2f |\n", k, float64(r.decoded)/1e6,
			ms(r.lanceRead), ms(r.goRead), float64(r.lanceRead)/float64(r.goRead),
			ms(r.lanceWrite), ms(r.goWrite), float64(r.lanceWrite)/float64(r.goWrite),
			r.lanceSize, r.goSize, float64(r.goSize)/float64(r.lanceSize))
	}
	t.Log(sb.String())
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func decodedSize(a *file.Array) int64 {
	n := int64(len(a.Values)+len(a.Valid)) + 8*int64(len(a.Offsets))
	for _, c := range a.Children {
		n += decodedSize(c)
	}
	return n
}

func writeFile(t testing.TB, p string, fields []*lancepb.Field, b *file.Batch) int64 {
	t.Helper()
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	bw := bufio.NewWriterSize(fh, 1<<20)
	w, err := file.NewWriter(bw, fields, file.WriterOptions{Version: file.V2_2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return int64(w.Size())
}

// TestStreamRSS (LANCE_BENCH=1; LANCE_RSS_MB, default 1024) writes a file
// of that size with the Go writer (int64, 100-byte strings, 8-float
// vectors), then streams it through the reader in a child process (this
// test binary re-run) and reports the child's peak RSS (VmHWM).
func TestStreamRSS(t *testing.T) {
	if p := os.Getenv("LANCE_RSS_CHILD"); p != "" {
		streamChild(t, p)
		return
	}
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1")
	}
	target := int64(envInt("LANCE_RSS_MB", 1024)) << 20
	p := filepath.Join(t.TempDir(), "big.lance")
	fields := []*lancepb.Field{
		{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"},
		{Name: "s", Id: 1, ParentId: -1, LogicalType: "string", Nullable: true},
		{Name: "v", Id: 2, ParentId: -1, LogicalType: "fixed_size_list:float:8", Nullable: true},
	}
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(fh, 1<<20)
	w, err := file.NewWriter(bw, fields, file.WriterOptions{Version: file.V2_2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 65536
	var rowsOut int64
	for batch := int64(0); int64(w.Size()) < target; batch++ {
		if err := w.Write(bigBatch(batch, n)); err != nil {
			t.Fatal(err)
		}
		rowsOut += n
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	st, _ := os.Stat(p)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamRSS$", "-test.v")
	cmd.Env = append(os.Environ(), "LANCE_RSS_CHILD="+p)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rows, hwm int64
	var secs float64
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "STREAM "); i >= 0 {
			fmt.Sscanf(l[i:], "STREAM rows=%d hwm_kb=%d secs=%g", &rows, &hwm, &secs)
		}
	}
	if rows != rowsOut {
		t.Fatalf("child streamed %d rows, wrote %d:\n%s", rows, rowsOut, out)
	}
	t.Logf("streamed %d rows of a %.0f MiB file in %.1f s (%.0f MB/s of file); child peak RSS (VmHWM) %.0f MiB",
		rows, float64(st.Size())/(1<<20), secs, float64(st.Size())/1e6/secs, float64(hwm)/1024)
}

func bigBatch(k int64, n int) *file.Batch {
	ids := make([]byte, 8*n)
	var sv []byte
	offs := make([]int64, n+1)
	vec := make([]byte, 4*8*n)
	for i := 0; i < n; i++ {
		id := k*int64(n) + int64(i)
		x := uint64(id)*0x9E3779B97F4A7C15 + 1
		for b := 0; b < 8; b++ {
			ids[8*i+b] = byte(x >> (8 * b))
		}
		s := fmt.Sprintf("%016x-%d-", x, id)
		for len(s) < 100 {
			s += strconv.FormatUint(x%977, 36)
			x = x*6364136223846793005 + 1442695040888963407
		}
		sv = append(sv, s[:100]...)
		offs[i+1] = int64(len(sv))
		for j := 0; j < 8; j++ {
			x = x*6364136223846793005 + 1442695040888963407
			v := uint32(x >> 41) // a float32 in [0,1) has fewer bits; any bits do
			vec[32*i+4*j], vec[32*i+4*j+1], vec[32*i+4*j+2], vec[32*i+4*j+3] = byte(v), byte(v>>8), byte(v>>16), 0x3f
		}
	}
	return &file.Batch{NumRows: n, Columns: []*file.Array{
		{Type: file.DataType{Kind: file.KindInt64}, Name: "id", Len: n, Values: ids},
		{Type: file.DataType{Kind: file.KindUtf8}, Name: "s", Len: n, Values: sv, Offsets: offs},
		{Type: file.DataType{Kind: file.KindFixedSizeList, Size: 8}, Name: "v", Len: n, Children: []*file.Array{
			{Type: file.DataType{Kind: file.KindFloat32}, Name: "item", Len: 8 * n, Values: vec}}},
	}}
}

func streamChild(t *testing.T, p string) {
	t0 := time.Now()
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	f, err := file.Open(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Stream(nil, 8192)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for {
		b, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows += int64(b.NumRows)
	}
	fmt.Printf("STREAM rows=%d hwm_kb=%d secs=%g\n", rows, peakrss.Self()>>10, time.Since(t0).Seconds())
}
