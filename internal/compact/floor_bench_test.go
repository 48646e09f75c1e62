package compact

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/format/file"
)

func cpuNow(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchCodecFloor (LANCE_BENCH_FLOOR=TABLE_DIR) is the floor under
// the compaction benchmark's re-encode path: every data file of the table
// decoded in the compaction's windows (read only), then decoded and
// re-encoded with every row kept (WriteRows of whole windows into a
// writer with the compaction's page size, output discarded), one file
// after another. No deletion vector, FRI, commit or fsync: what the codecs
// and the reads alone cost on this input.
func TestBenchCodecFloor(t *testing.T) {
	dir := os.Getenv("LANCE_BENCH_FLOOR")
	if dir == "" {
		t.Skip("set LANCE_BENCH_FLOOR=TABLE_DIR")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no data files under %s (%v)", dir, err)
	}
	var size int64
	open := func(p string) (*file.File, int64, func()) {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := fh.Stat()
		if err != nil {
			t.Fatal(err)
		}
		f, err := file.Open(fh, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		return f, st.Size(), func() { fh.Close() }
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	pass := func(name string, encode bool) {
		c0, w0 := cpuNow(t), time.Now()
		var rows int
		for _, p := range paths {
			f, fsize, done := open(p)
			var names []string
			for _, fl := range f.Schema.Fields {
				names = append(names, fl.Name)
			}
			// The compaction's windows: 32 Ki rows of a 768-d vector
			// would be 96 MiB, not the 12 MiB it reads at once.
			st, err := f.Stream(names, windowRows(fsize, f.NumRows()))
			if err != nil {
				t.Fatal(err)
			}
			var w *file.Writer
			if encode {
				if w, err = file.NewWriter(bufio.NewWriterSize(io.Discard, 1<<20), f.Desc.GetSchema().GetFields(), file.WriterOptions{Version: f.Version(), PageBytes: pageBytes, WidePageBytes: widePageBytes}); err != nil {
					t.Fatal(err)
				}
			}
			for {
				b, err := st.NextView()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				rows += b.NumRows
				if w != nil {
					if err := w.WriteRows(b, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if w != nil {
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			done()
		}
		cpu := cpuNow(t) - c0
		t.Logf("%s: %d files, %d rows, %.0f MiB: CPU %.2f s (wall %.2f s), %.0f MB per CPU-second",
			name, len(paths), rows, float64(size)/(1<<20), cpu.Seconds(), time.Since(w0).Seconds(), float64(size)/1e6/cpu.Seconds())
	}
	pass("decode", false)
	pass("decode+encode", true)
}
