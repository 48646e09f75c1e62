package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testutil/lancedb"
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
			if want := int((hi - lo + copyChunk - 1) / copyChunk); ok && cr.reads != want {
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
