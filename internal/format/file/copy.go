package file

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
	"google.golang.org/protobuf/proto"
)

// CopyFile appends every row of src to the file being written without
// decoding: each page's buffers are copied as they are and only their
// offsets in the column metadata are rewritten, as Lance's binary copy
// does. src must have the writer's version and schema (the same field
// ids, names and types). Rows written before (Write) stay first; rows
// written after follow src's.
//
// A schema with an Arrow dictionary field is the exception: its rows are
// decoded and written again (see rewriteFile).
func (w *Writer) CopyFile(src *File) error {
	if hasDictField(w.schema.Fields) {
		return w.rewriteFile(src)
	}
	cols := make([]int, len(src.Columns))
	for i := range cols {
		cols[i] = i
	}
	if err := w.copyColumns(src, cols); err != nil {
		return err
	}
	w.rows += src.NumRows()
	return nil
}

func (w *Writer) copyColumns(src *File, columns []int) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("lance file: copy after close")
	}
	if src.Version() != w.opts.Version {
		return fmt.Errorf("lance file: cannot copy pages of a %s file into a %s file", src.Version(), w.opts.Version)
	}
	if err := sameSchema(w.fields, src.Desc.GetSchema().GetFields()); err != nil {
		return err
	}
	if len(src.Columns) != len(w.cols) {
		return fmt.Errorf("lance file: source has %d columns, the file %d", len(src.Columns), len(w.cols))
	}
	// Buffered rows go first.
	for i := range w.pending {
		if err := w.flushField(i); err != nil {
			w.err = err
			return err
		}
	}
	structs := map[int]bool{}
	if w.opts.Version == V2_0 {
		var walk func(f *Field)
		walk = func(f *Field) {
			if f.Packed() {
				return
			}
			if f.Type.Kind == KindStruct {
				structs[f.Column] = true
			}
			if f.Type.Kind != KindFixedSizeList {
				for _, c := range f.Children {
					walk(c)
				}
			}
		}
		for _, f := range w.schema.Fields {
			walk(f)
		}
	}
	seen := map[int]bool{}
	for _, c := range columns {
		if c < 0 || c >= len(src.Columns) || seen[c] {
			return fmt.Errorf("lance file: column %d of %d (or named twice)", c, len(src.Columns))
		}
		seen[c] = true
		if len(src.Columns[c].GetBufferOffsets()) > 0 {
			return fmt.Errorf("lance file: column %d has column buffers; copying them is not supported", c)
		}
	}
	if lo, hi, ok := denseSpan(src, columns, structs); ok {
		return w.copySpan(src, columns, structs, lo, hi)
	}
	for _, c := range columns {
		cm := src.Columns[c]
		base := w.colRows[c]
		for _, p := range cm.GetPages() {
			if structs[c] {
				// 2.0 struct pages hold no data; Close writes one.
				w.colRows[c] += p.GetLength()
				continue
			}
			np := &pb.ColumnMetadata_Page{Length: p.GetLength(), Encoding: proto.Clone(p.GetEncoding()).(*pb.Encoding), Priority: p.GetPriority() + base}
			for k := range p.GetBufferOffsets() {
				b, err := src.readRange(Buffer{p.BufferOffsets[k], p.BufferSizes[k]})
				if err != nil {
					return err
				}
				off, err := w.writeBuffer(b)
				if err != nil {
					return err
				}
				np.BufferOffsets = append(np.BufferOffsets, off)
				np.BufferSizes = append(np.BufferSizes, uint64(len(b)))
			}
			w.cols[c].Pages = append(w.cols[c].Pages, np)
			w.colRows[c] += p.GetLength()
		}
	}
	w.copied = true
	return nil
}

// hasDictField reports whether any field (at any depth) is an Arrow
// dictionary.
func hasDictField(fields []*Field) bool {
	for _, f := range fields {
		if f.Type.DictIndex != KindNull || hasDictField(f.Children) {
			return true
		}
	}
	return false
}

// rewriteBatchRows is how many rows rewriteFile decodes at a time.
const rewriteBatchRows = 8192

// rewriteFile is CopyFile for a schema with a dictionary field: src's rows
// are decoded and written, so they share pages (and a page's dictionary)
// with the rows around them. Copied whole, each source file's pages keep
// their own dictionaries, and LanceDB fails to read a batch spanning
// pages whose dictionaries together fill the key's range ("Dictionary
// key bigger than the key type"; seen with three files each using all
// 128 int8 keys), though it read each source file.
func (w *Writer) rewriteFile(src *File) error {
	if w.err != nil {
		return w.err
	}
	if src.Version() != w.opts.Version {
		return fmt.Errorf("lance file: cannot copy rows of a %s file into a %s file", src.Version(), w.opts.Version)
	}
	if err := sameSchema(w.fields, src.Desc.GetSchema().GetFields()); err != nil {
		return err
	}
	s, err := src.Stream(nil, rewriteBatchRows)
	if err != nil {
		return err
	}
	for {
		b, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.Write(b); err != nil {
			return err
		}
	}
}

// copyChunk is the size of the reads and writes of a span copy.
const copyChunk = 4 << 20

// copyBufs hold the chunk buffers of span copies, reused across files
// (a fresh buffer per file is a 4 MiB allocation zeroed each time).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// denseSpan finds the byte range [lo, hi) holding every page buffer of
// the columns, when those buffers fill it but for alignment padding (at
// most 63 bytes before each buffer), as a writer lays pages out one after
// another. Such a span is copied with a few large reads and writes.
func denseSpan(src *File, columns []int, structs map[int]bool) (lo, hi uint64, ok bool) {
	type ext struct{ off, end uint64 }
	var exts []ext
	for _, c := range columns {
		if structs[c] {
			continue
		}
		for _, p := range src.Columns[c].GetPages() {
			if len(p.GetBufferOffsets()) != len(p.GetBufferSizes()) {
				return 0, 0, false
			}
			for k, off := range p.GetBufferOffsets() {
				n := p.GetBufferSizes()[k]
				if off > src.size || n > src.size-off {
					return 0, 0, false
				}
				if n > 0 {
					exts = append(exts, ext{off, off + n})
				}
			}
		}
	}
	if len(exts) == 0 {
		return 0, 0, false
	}
	slices.SortFunc(exts, func(a, b ext) int { return cmp.Compare(a.off, b.off) })
	lo, hi = exts[0].off, exts[0].end
	for _, e := range exts[1:] {
		if e.off < hi || e.off-hi >= 64 {
			return 0, 0, false // overlapping, or something else lies between
		}
		hi = e.end
	}
	return lo, hi, true
}

// copySpan copies src's bytes [lo, hi), which hold every page buffer of
// the columns, in chunks through one buffer, and records the pages at
// their offsets shifted by one delta. The span starts at the same offset
// modulo 64 in both files, so every buffer keeps its alignment.
func (w *Writer) copySpan(src *File, columns []int, structs map[int]bool, lo, hi uint64) error {
	if pad := (lo%64 + 64 - w.pos%64) % 64; pad > 0 {
		if err := w.raw(zeros64[:pad]); err != nil {
			return err
		}
	}
	start := w.pos
	if ok, err := w.copyLocalSpan(src, lo, hi); err != nil {
		return err
	} else if !ok {
		if err := w.streamSpan(src, lo, hi); err != nil {
			return err
		}
	}
	for _, c := range columns {
		base := w.colRows[c]
		for _, p := range src.Columns[c].GetPages() {
			if structs[c] {
				w.colRows[c] += p.GetLength()
				continue
			}
			np := &pb.ColumnMetadata_Page{Length: p.GetLength(), Encoding: proto.Clone(p.GetEncoding()).(*pb.Encoding), Priority: p.GetPriority() + base}
			for k, off := range p.GetBufferOffsets() {
				n := p.GetBufferSizes()[k]
				if n > 0 {
					off = off - lo + start
				} else {
					off = start
				}
				np.BufferOffsets = append(np.BufferOffsets, off)
				np.BufferSizes = append(np.BufferSizes, n)
			}
			w.cols[c].Pages = append(w.cols[c].Pages, np)
			w.colRows[c] += p.GetLength()
		}
	}
	w.copied = true
	return nil
}

// streamSpan copies src's bytes [lo, hi) in chunks through one pooled
// buffer.
func (w *Writer) streamSpan(src *File, lo, hi uint64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for off := lo; off < hi; {
		n := min(hi-off, uint64(len(buf)))
		if _, err := src.r.ReadAt(buf[:n], int64(off)); err != nil && !(errors.Is(err, io.EOF) && off+n == src.size) {
			return err
		}
		if err := w.raw(buf[:n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// LocalFile is implemented by a source io.ReaderAt (storage.ReaderAt on a
// file:// bucket) whose bytes are a plain local file, which the span
// copy may open and hand to its destination itself.
type LocalFile interface {
	LocalPath() (string, bool)
}

// copyLocalSpan copies src's bytes [lo, hi) without passing them through
// this process when both ends are local files: the source's file, limited
// to the span, goes to the destination's ReadFrom, which for an *os.File
// (and the storage layer's file writer, which forwards to one) is
// copy_file_range(2) on Linux, the copy cp(1) makes. It reports false,
// having written nothing, when the source or the destination is not a
// local file or the source cannot be opened; the caller then streams the
// span. bufio.Writer's ReadFrom reaches its destination's once flushed.
func (w *Writer) copyLocalSpan(src *File, lo, hi uint64) (bool, error) {
	lf, ok := src.r.(LocalFile)
	if !ok {
		return false, nil
	}
	rf, ok := w.w.(io.ReaderFrom)
	if !ok {
		return false, nil
	}
	path, ok := lf.LocalPath()
	if !ok {
		return false, nil
	}
	// A descriptor of its own: the copy reads from the file's offset,
	// which the source's ReaderAt (pread) must not share.
	f, err := os.Open(path)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || uint64(fi.Size()) < hi {
		return false, nil // not the file the ReaderAt reads: stream through it
	}
	if _, err := f.Seek(int64(lo), io.SeekStart); err != nil {
		return false, nil
	}
	if fl, ok := w.w.(interface{ Flush() error }); ok {
		if err := fl.Flush(); err != nil {
			w.err = err
			return false, err
		}
	}
	want := int64(hi - lo)
	n, err := rf.ReadFrom(&io.LimitedReader{R: f, N: want})
	w.pos += uint64(n)
	if err == nil && n != want {
		err = fmt.Errorf("lance file: copied %d of the %d bytes of the page span: %w", n, want, io.ErrUnexpectedEOF)
	}
	if err != nil {
		w.err = err
		return true, err
	}
	return true, nil
}

// sameSchema checks that two field lists describe the same columns.
func sameSchema(a, b []*lancepb.Field) error {
	if len(a) != len(b) {
		return fmt.Errorf("lance file: source schema has %d fields, the file %d", len(b), len(a))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.GetId() != y.GetId() || x.GetParentId() != y.GetParentId() || x.GetName() != y.GetName() || x.GetLogicalType() != y.GetLogicalType() {
			return fmt.Errorf("lance file: source field %q (%d, %s) differs from the file's %q (%d, %s)",
				y.GetName(), y.GetId(), y.GetLogicalType(), x.GetName(), x.GetId(), x.GetLogicalType())
		}
	}
	return nil
}
