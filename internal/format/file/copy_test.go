package file

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// copyConcat writes rows [0, k) of src decoded, then src's pages copied
// whole, then rows [k, n) decoded again.
func copyConcat(t testing.TB, src *File, k int) []byte {
	t.Helper()
	b, err := src.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	part := func(lo, hi int) *Batch {
		p := &Batch{NumRows: hi - lo}
		for _, c := range b.Columns {
			p.Columns = append(p.Columns, c.Slice(lo, hi))
		}
		return p
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: src.Version()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(part(0, k)); err != nil {
		t.Fatal(err)
	}
	if err := w.CopyFile(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(part(k, b.NumRows)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// concatOracle is what reading copyConcat's output must give.
func concatOracle(t testing.TB, o *oracle, k int) *oracle {
	out := &oracle{Rows: 2 * o.Rows, Columns: map[string]json.RawMessage{}}
	for c, raw := range o.Columns {
		var vs []any
		if err := json.Unmarshal(raw, &vs); err != nil {
			t.Fatal(err)
		}
		all := append(append(append([]any{}, vs[:k]...), vs...), vs[k:]...)
		out.Columns[c], _ = json.Marshal(all)
	}
	return out
}

// TestCopyFile: a file made of decoded rows, a whole file's pages copied
// without decoding, and more decoded rows reads back as those rows.
func TestCopyFile(t *testing.T) {
	for _, p := range oracleFiles(t, "testdata") {
		t.Run(filepath.Base(p[0]), func(t *testing.T) {
			src := openFile(t, p[0])
			k := int(src.NumRows() / 3)
			out := copyConcat(t, src, k)
			got, err := Open(bytes.NewReader(out), int64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			want := concatOracle(t, loadOracle(t, p[1]), k)
			for _, fl := range got.Schema.Fields {
				b, err := got.ReadAll([]string{fl.Name})
				if err != nil {
					t.Fatalf("%s: %v", fl.Name, err)
				}
				var w []any
				_ = json.Unmarshal(want.Columns[fl.Name], &w)
				if g := canonAny(b.Columns[0]); !reflect.DeepEqual(g, w) {
					t.Errorf("%s: %s", fl.Name, firstDiff(g, w))
				}
			}
		})
	}
}

// TestCopyColumns assembles a file from the columns of two files: half the
// columns copied from one, half from the other (the same rows), and checks
// that a schema mismatch is refused.
func TestCopyColumns(t *testing.T) {
	src := openFile(t, "testdata/all_v22.lance")
	var buf bytes.Buffer
	w, err := NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: V2_2})
	if err != nil {
		t.Fatal(err)
	}
	var even, odd []int
	for i := range src.Columns {
		if i%2 == 0 {
			even = append(even, i)
		} else {
			odd = append(odd, i)
		}
	}
	if err := w.CopyColumns(src, even); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close with half the columns copied succeeded")
	}
	buf.Reset()
	w, _ = NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: V2_2})
	if err := w.CopyColumns(src, even); err != nil {
		t.Fatal(err)
	}
	if err := w.CopyColumns(src, odd); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, src, got)
	other := openFile(t, "testdata/all_v21.lance")
	w, _ = NewWriter(&bytes.Buffer{}, src.Desc.GetSchema().GetFields(), WriterOptions{Version: V2_2})
	if err := w.CopyFile(other); err == nil {
		t.Error("copying a 2.1 file into a 2.2 file succeeded")
	}
	w, _ = NewWriter(&bytes.Buffer{}, other.Desc.GetSchema().GetFields()[:3], WriterOptions{Version: V2_1})
	if err := w.CopyFile(other); err == nil {
		t.Error("copying into a different schema succeeded")
	}
}

// TestLanceDBReadsCopies has LanceDB read copyConcat's output for every
// corpus file.
func TestLanceDBReadsCopies(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	var cases []lancedbCase
	for _, p := range oracleFiles(t, "testdata") {
		src := openFile(t, p[0])
		k := int(src.NumRows() / 3)
		out := copyConcat(t, src, k)
		got, err := Open(bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("copy_%s", strings.TrimSuffix(filepath.Base(p[0]), ".lance"))
		w := &Writer{schema: got.Schema}
		f, c := w.DataFileFields()
		writeTable(t, dir, name, src.Desc.GetSchema().GetFields(), out, src.Version(), f, c, got.NumRows())
		cases = append(cases, lancedbCase{name: name, want: concatOracle(t, loadOracle(t, p[1]), k)})
	}
	lancedbRead(t, dir, cases)
}

// countingReader counts the reads of a file.
type countingReader struct {
	r     *bytes.Reader
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// TestCopyFileReadsOneSpan: the pages of a file laid out one after
// another (every corpus file, LanceDB's and ours) are copied with one
// read per copyChunk of their span, not one per page buffer, and the
// copy still reads back as the rows copied after decoded ones
// (TestCopyFile) and alone.
func TestCopyFileReadsOneSpan(t *testing.T) {
	for _, p := range oracleFiles(t, "testdata") {
		t.Run(filepath.Base(p[0]), func(t *testing.T) {
			all, err := os.ReadFile(p[0])
			if err != nil {
				t.Fatal(err)
			}
			cr := &countingReader{r: bytes.NewReader(all)}
			src, err := Open(cr, int64(len(all)))
			if err != nil {
				t.Fatal(err)
			}
			var bufs int
			for _, c := range src.Columns {
				for _, pg := range c.GetPages() {
					bufs += len(pg.GetBufferOffsets())
				}
			}
			lo, hi, ok := denseSpan(src, allColumns(src), nil)
			if src.Version() != V2_0 && !ok {
				t.Fatalf("pages of %d buffers are not one span", bufs)
			}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: src.Version()})
			if err != nil {
				t.Fatal(err)
			}
			cr.reads = 0
			if err := w.CopyFile(src); err != nil {
				t.Fatal(err)
			}
			// A dictionary schema's rows are rewritten, not copied
			// (TestCopyFileRewritesDictionaries).
			if want := int((hi - lo + copyChunk - 1) / copyChunk); ok && !hasDictField(w.Schema().Fields) && cr.reads != want {
				t.Errorf("copy of %d page buffers (%d bytes) made %d reads, want %d", bufs, hi-lo, cr.reads, want)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, src, got)
		})
	}
}

func allColumns(f *File) []int {
	cols := make([]int, len(f.Columns))
	for i := range cols {
		cols[i] = i
	}
	return cols
}

// floatFile writes a file of n random float64 rows (pages that do not
// compress: 8n bytes) at path, and returns its fields and values.
func floatFile(t *testing.T, path string, n int) ([]*lancepb.Field, []byte) {
	t.Helper()
	fields := []*lancepb.Field{{Name: "f", Id: 0, ParentId: -1, LogicalType: "double"}}
	vals := make([]byte, 8*n)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range n {
		binary.LittleEndian.PutUint64(vals[8*i:], math.Float64bits(rng.NormFloat64()))
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, WriterOptions{Version: V2_1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Batch{NumRows: n, Columns: []*Array{{Type: DataType{Kind: KindFloat64}, Len: n, Values: vals}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return fields, vals
}

// readSyscalls is the process's count of read-like system calls so far
// (/proc/self/io's syscr: read, pread and copy_file_range count one each,
// whatever their size).
func readSyscalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io to count system calls: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscr in /proc/self/io: %q", b)
	return 0
}

// copyThrough copies the file at key of b into a new object out of b as
// a compaction does (storage.ReaderAt in, the bucket's streamed writer
// behind a bufio.Writer out), and returns the new object's bytes and the
// read system calls CopyFile made.
func copyThrough(t *testing.T, b storage.Bucket, key, out string, fields []*lancepb.Field) ([]byte, int) {
	t.Helper()
	ctx := t.Context()
	a, err := b.Attributes(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ra := storage.NewReaderAt(ctx, b, key, a.Size)
	defer ra.(io.Closer).Close()
	src, err := Open(ra, a.Size)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := b.NewWriter(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(wc, 1<<20)
	w, err := NewWriter(bw, fields, WriterOptions{Version: src.Version()})
	if err != nil {
		t.Fatal(err)
	}
	before := readSyscalls(t)
	if err := w.CopyFile(src); err != nil {
		t.Fatal(err)
	}
	reads := readSyscalls(t) - before
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := b.Get(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	return data, reads
}

// TestCopyFileInKernel: on a file:// bucket (with and without the metrics
// wrapper) the page span goes from file to file in the kernel
// (copy_file_range: one read-like system call where streaming 48 MiB
// takes a pread per 4 MiB chunk), and the output is byte for byte what
// the streaming copy writes through a bucket without local files.
func TestCopyFileInKernel(t *testing.T) {
	dir := t.TempDir()
	fields, vals := floatFile(t, filepath.Join(dir, "src.lance"), 6<<20)
	fb, err := storage.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	streamed, sreads := copyThrough(t, faults.NewFaulty(fb), "src.lance", "streamed.lance", fields)
	if want := 48 << 20 / copyChunk; sreads < want {
		t.Fatalf("the streaming copy made %d reads, want at least %d (is the count working?)", sreads, want)
	}
	for name, b := range map[string]storage.Bucket{"file": fb, "metrics": storage.WithMetrics(fb, storage.NewMetrics(prometheus.NewRegistry()))} {
		got, reads := copyThrough(t, b, "src.lance", name+".lance", fields)
		if reads > 4 {
			t.Errorf("%s: the copy made %d read system calls (streaming %d), want the kernel's copy", name, reads, sreads)
		}
		if !bytes.Equal(got, streamed) {
			t.Errorf("%s: the kernel's copy (%d bytes) differs from the streamed one (%d bytes)", name, len(got), len(streamed))
		}
	}
	f, err := Open(bytes.NewReader(streamed), int64(len(streamed)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Columns[0].Values, vals) {
		t.Fatal("the copy does not read back as the rows written")
	}
}

// localAt is a source claiming a local file, which may not be the one it
// reads.
type localAt struct {
	io.ReaderAt
	path string
}

func (l localAt) LocalPath() (string, bool) { return l.path, true }

// TestCopyFileLocalFallback: the span is streamed through the source's
// ReaderAt, with the same output, when the local file cannot be opened or
// is shorter than the span, or the destination cannot take a ReadFrom;
// the copy after decoded rows keeps its alignment either way.
func TestCopyFileLocalFallback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.lance")
	floatFile(t, path, 100_000)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "short.lance"), data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	copyOf := func(ra io.ReaderAt, wrap func(io.Writer) io.Writer) []byte {
		src, err := Open(ra, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w, err := NewWriter(wrap(&buf), src.Desc.GetSchema().GetFields(), WriterOptions{Version: src.Version()})
		if err != nil {
			t.Fatal(err)
		}
		b, err := src.ReadAll(nil)
		if err != nil {
			t.Fatal(err)
		}
		head := &Batch{NumRows: 3}
		for _, c := range b.Columns {
			head.Columns = append(head.Columns, c.Slice(0, 3))
		}
		if err := w.Write(head); err != nil { // so the copy starts unaligned
			t.Fatal(err)
		}
		if err := w.CopyFile(src); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	plain := func(w io.Writer) io.Writer { return w }
	writerOnly := func(w io.Writer) io.Writer { return struct{ io.Writer }{w} }
	want := copyOf(bytes.NewReader(data), plain)
	for name, c := range map[string]struct {
		ra   io.ReaderAt
		wrap func(io.Writer) io.Writer
	}{
		"local":                   {localAt{bytes.NewReader(data), path}, plain},
		"missing local file":      {localAt{bytes.NewReader(data), filepath.Join(dir, "gone.lance")}, plain},
		"short local file":        {localAt{bytes.NewReader(data), filepath.Join(dir, "short.lance")}, plain},
		"local directory":         {localAt{bytes.NewReader(data), dir}, plain},
		"destination no ReadFrom": {localAt{bytes.NewReader(data), path}, writerOnly},
	} {
		if got := copyOf(c.ra, c.wrap); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the streamed copy's %d", name, len(got), len(want))
		}
	}
	got, err := Open(bytes.NewReader(want), int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if got.NumRows() != 100_003 {
		t.Fatalf("%d rows, want 100003", got.NumRows())
	}
}

// TestCopyFileRewritesDictionaries: CopyFile of files with a dictionary
// field writes their rows again, so two files that each use all 128 int8
// keys become one page with one dictionary (copied pages would keep a
// dictionary each, and LanceDB fails to read a batch across them), and
// the rows read back as the two files' in order.
func TestCopyFileRewritesDictionaries(t *testing.T) {
	vals := make([][]byte, 128)
	for i := range vals {
		vals[i] = leBytes(uint64(i)*7, 8)
	}
	never := func(int) bool { return false }
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		var srcs []*File
		for k := 0; k < 2; k++ {
			b, err := numDictFile(t, v, "dict:double:int8:false", vals[k:], 300, never)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, f)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, srcs[0].Desc.GetSchema().GetFields(), WriterOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range srcs {
			if err := w.CopyFile(f); err != nil {
				t.Fatalf("%s: %v", v, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Columns[0].Pages); n != 1 || got.NumRows() != 600 {
			t.Fatalf("%s: %d pages, %d rows, want 1 page of 600 rows", v, n, got.NumRows())
		}
		r, err := got.ReadAll(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 600; i++ {
			k, j := i/300, i%300
			if want := vals[k:][j%(128-k)]; !bytes.Equal(r.Columns[0].Values[8*i:8*i+8], want) {
				t.Fatalf("%s: row %d is % x, want % x", v, i, r.Columns[0].Values[8*i:8*i+8], want)
			}
		}
	}
}
