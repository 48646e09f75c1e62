package file

import (
	"fmt"
	"io"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Version is the file format version to write: V2_0, V2_1 or V2_2 (the
	// zero value). A table writes its own data_storage_format version.
	Version Version
	// PageBytes is how many bytes of a column's values are buffered before
	// a page is cut (default 8 MiB, as LanceDB). Memory is bounded by about
	// one page per column.
	PageBytes int
	// WidePageBytes, when larger than PageBytes, is the page size of a
	// field of fixed-width rows of 256 bytes or more (a vector), whose
	// pages are full-zip: its rows are written as they are, so a larger
	// page costs no encoding work, only its buffer, and a small one costs
	// a page (metadata, a write, LanceDB's read scheduling) per few rows.
	WidePageBytes int
	// Metadata is the schema-level metadata of the file descriptor (Lance's
	// index files keep their parameters there, e.g. a btree's batch_size).
	Metadata map[string][]byte
	// GlobalBuffers are written after the file descriptor as global
	// buffers 1, 2, ...: Lance's index files name them by number in their
	// schema metadata (a vector index's IVF partitioning and quantizer
	// parameters, a label list's null rows).
	GlobalBuffers [][]byte
}

// DefaultPageBytes is the page size used when WriterOptions.PageBytes is 0.
const DefaultPageBytes = 8 << 20

// Writer writes a Lance data file: pages are written as they fill, column
// metadata, the file descriptor and the footer at Close.
type Writer struct {
	w      io.Writer
	pos    uint64
	opts   WriterOptions
	fields []*lancepb.Field
	schema *Schema
	cols   []*pb.ColumnMetadata
	// colRows counts each column's rows (2.0 list item columns count items).
	colRows []uint64
	pending []*pendingField
	rows    uint64
	copied  bool // whole pages were copied in (CopyColumns)
	err     error
	closed  bool
	sc      *encScratch // page encoding buffers (scratch)
}

type pendingField struct {
	first uint64 // the file row of the first buffered row
	arrs  []*Array
	build *colBuilder // rows appended by WriteRows (then also by Write)
	rows  int
	bytes int
}

// NewWriter starts a file with the given schema (Lance's pre-order field
// list, as a manifest or a file descriptor holds it).
func NewWriter(w io.Writer, fields []*lancepb.Field, opts WriterOptions) (*Writer, error) {
	if opts.Version == (Version{}) {
		opts.Version = V2_2
	}
	if opts.Version != V2_0 && opts.Version != V2_1 && opts.Version != V2_2 {
		return nil, fmt.Errorf("lance file: cannot write version %s", opts.Version)
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = DefaultPageBytes
	}
	s, err := newSchema(fields, opts.Version)
	if err != nil {
		return nil, err
	}
	n := s.countColumns()
	if err := s.bindColumns(n); err != nil {
		return nil, err
	}
	wr := &Writer{w: w, opts: opts, fields: fields, schema: s, colRows: make([]uint64, n)}
	wr.cols = make([]*pb.ColumnMetadata, n)
	for i := range wr.cols {
		wr.cols[i] = &pb.ColumnMetadata{}
	}
	wr.pending = make([]*pendingField, len(s.Fields))
	for i := range wr.pending {
		wr.pending[i] = &pendingField{}
	}
	return wr, nil
}

// countColumns is the number of columns the schema needs.
func (s *Schema) countColumns() int {
	n := 0
	var walk func(f *Field)
	walk = func(f *Field) {
		if s.version == V2_0 {
			n++
			if f.Type.Kind == KindFixedSizeList || f.Packed() {
				return
			}
			for _, c := range f.Children {
				walk(c)
			}
			return
		}
		if f.isLeaf() {
			n++
			return
		}
		for _, c := range f.Children {
			walk(c)
		}
	}
	for _, f := range s.Fields {
		walk(f)
	}
	return n
}

// Schema is the schema being written.
func (w *Writer) Schema() *Schema { return w.schema }

// Write adds a batch of rows. Its columns are the schema's top-level
// fields in order (Batch.Fields is not consulted).
func (w *Writer) Write(b *Batch) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("lance file: write after close")
	}
	if len(b.Columns) != len(w.schema.Fields) {
		return fmt.Errorf("lance file: batch has %d columns, schema %d", len(b.Columns), len(w.schema.Fields))
	}
	for i, a := range b.Columns {
		if a == nil {
			return fmt.Errorf("lance file: column %d is nil", i)
		}
		if a.Len != b.NumRows {
			return fmt.Errorf("lance file: column %q has %d rows, batch %d", w.schema.Fields[i].Name, a.Len, b.NumRows)
		}
		if err := checkArray(w.schema.Fields[i], a, 0); err != nil {
			return err
		}
	}
	if b.NumRows == 0 {
		return nil
	}
	for i, a := range b.Columns {
		p := w.pending[i]
		if len(p.arrs) == 0 {
			p.first = w.rows
		}
		a = a.expandFSST()
		if p.build != nil && p.build.n > 0 && (p.build.fsst != nil || !p.build.takes(a)) {
			// The builder's rows are FSST-compressed and a's are not, or
			// a's are a fixed-size list with null items.
			if err := w.flushField(i); err != nil {
				w.err = err
				return err
			}
			p.first = w.rows
		}
		if p.build != nil && p.build.n > 0 {
			p.bytes += p.build.appendRows(a, nil)
		} else {
			p.arrs = append(p.arrs, a)
			p.bytes += arrayBytes(a)
		}
		p.rows += a.Len
		if p.bytes >= w.fieldPageBytes(w.schema.Fields[i]) {
			if err := w.flushField(i); err != nil {
				w.err = err
				return err
			}
		}
	}
	w.rows += uint64(b.NumRows)
	return nil
}

// arrayBytes estimates an array's in-memory size.
func arrayBytes(a *Array) int {
	n := len(a.Values) + 8*len(a.Offsets) + len(a.Valid)
	for _, c := range a.Children {
		n += arrayBytes(c)
	}
	return n
}

// checkArray verifies that an array has the shape of its field, so the
// encoders can index it without further checks.
func checkArray(f *Field, a *Array, depth int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("lance file: column %q: "+format, append([]any{f.Name}, args...)...)
	}
	if depth > 64 {
		return bad("nested too deep")
	}
	if a.Type.Kind != f.Type.Kind || (f.Type.Kind == KindFixedSizeList || f.Type.Kind == KindFixedSizeBinary) && a.Type.Size != f.Type.Size {
		return bad("array of %s for a field of %s", a.Type, f.Type)
	}
	if a.Len < 0 {
		return bad("negative length")
	}
	if a.Valid != nil && len(a.Valid) < bitmapLen(a.Len) {
		return bad("validity of %d bytes for %d rows", len(a.Valid), a.Len)
	}
	if !f.Nullable && a.NullCount() > 0 && depth == 0 {
		return bad("nulls in a non-nullable field")
	}
	t := f.Type
	switch {
	case t.Kind == KindNull:
	case t.Kind == KindBool:
		if len(a.Values) < bitmapLen(a.Len) {
			return bad("%d value bytes for %d bools", len(a.Values), a.Len)
		}
	case t.IsVariable() || isList(t.Kind):
		if len(a.Offsets) != a.Len+1 {
			return bad("%d offsets for %d rows", len(a.Offsets), a.Len)
		}
		for i := 0; i < a.Len; i++ {
			if a.Offsets[i+1] < a.Offsets[i] || a.Offsets[i] < 0 {
				return bad("offsets decrease at row %d", i)
			}
		}
		if t.IsVariable() {
			if a.Offsets[a.Len] > int64(len(a.Values)) {
				return bad("offsets run past the %d value bytes", len(a.Values))
			}
			if t.Kind == KindUtf8 || t.Kind == KindBinary {
				if a.Offsets[a.Len]-a.Offsets[0] > 1<<31-1 {
					return bad("more than 2 GiB of values in one array")
				}
			}
			break
		}
		if len(a.Children) != 1 || len(f.Children) != 1 {
			return bad("list without its child")
		}
		if int64(a.Children[0].Len) < a.Offsets[a.Len] {
			return bad("offsets run past the %d items", a.Children[0].Len)
		}
		return checkArray(f.Children[0], a.Children[0], depth+1)
	case t.Kind == KindFixedSizeList:
		if len(a.Children) != 1 || len(f.Children) != 1 {
			return bad("fixed-size list without its child")
		}
		if a.Children[0].Len != a.Len*t.Size {
			return bad("%d items for %d lists of %d", a.Children[0].Len, a.Len, t.Size)
		}
		it := f.Children[0]
		if it.Type.Kind == KindStruct || isList(it.Type.Kind) || it.Type.IsVariable() || it.Type.Kind == KindFixedSizeList {
			return bad("fixed-size lists of %s are not supported", it.Type)
		}
		return checkArray(it, a.Children[0], depth+1)
	case t.Kind == KindStruct:
		if len(a.Children) != len(f.Children) {
			return bad("struct array with %d children for %d fields", len(a.Children), len(f.Children))
		}
		for i, c := range f.Children {
			if a.Children[i].Len != a.Len {
				return bad("child %q has %d rows, struct %d", c.Name, a.Children[i].Len, a.Len)
			}
			if err := checkArray(c, a.Children[i], depth+1); err != nil {
				return err
			}
		}
	default:
		w := t.ByteWidth()
		if w == 0 {
			return bad("type %s cannot be written", t)
		}
		if len(a.Values) < a.Len*w {
			return bad("%d value bytes for %d values of %d", len(a.Values), a.Len, w)
		}
	}
	return nil
}

// flushField encodes the buffered rows of a top-level field as pages.
func (w *Writer) flushField(i int) error {
	p := w.pending[i]
	if p.rows == 0 {
		return nil
	}
	var all *Array
	// Pages of a fixed-width builder's rows are views of its buffers, not
	// copies: they are encoded before it is reset.
	views := false
	switch {
	case p.build != nil && p.build.n > 0:
		// The page's encoding is written before flushField returns, so
		// the builder's buffers are free again then.
		all = p.build.array()
		views = p.build.item != nil || !p.build.t.IsVariable() && p.build.t.Kind != KindBool
		defer p.build.reset()
	case len(p.arrs) == 1:
		all = p.arrs[0]
	default:
		all = concatArrays(p.arrs)
	}
	first := p.first
	p.arrs, p.rows, p.bytes = nil, 0, 0
	f := w.schema.Fields[i]
	// Cut pages of about PageBytes: as many as the bytes round to, so the
	// batch that crossed PageBytes does not leave a page of a few rows
	// behind (nor a copy of the rest).
	total := max(arrayBytes(all), 1)
	pageBytes := w.fieldPageBytes(f)
	pages := max(1, (total+pageBytes/2)/pageBytes)
	per := max(1, (all.Len+pages-1)/pages)
	for lo := 0; lo < all.Len; lo += per {
		hi := min(all.Len, lo+per)
		part := all
		switch {
		case lo == 0 && hi == all.Len:
		case views:
			part = all.view(lo, hi)
		default:
			part = sliceKeepFSST(all, lo, hi)
		}
		if err := w.writeRows(f, part, first+uint64(lo)); err != nil {
			return err
		}
	}
	return nil
}

// writeRows writes one page per column of the field's rows.
func (w *Writer) writeRows(f *Field, a *Array, prio uint64) error {
	if w.opts.Version == V2_0 || len(a.fsst) > 1 {
		// Only a 2.1+ page of one symbol table takes compressed values.
		a = a.expandFSST()
	}
	if w.opts.Version == V2_0 {
		return w.writeField20(f, a, prio)
	}
	for _, path := range leafPaths(f) {
		s, err := shredPath(path, a)
		if err != nil {
			return err
		}
		leaf := path[len(path)-1]
		if s.rep != nil && fullZipBound(leaf, s) {
			if s, err = shredPathLayers(path, a, true); err != nil {
				return err
			}
		}
		bufs, layout, err := w.encodePage21(leaf, s)
		if err != nil {
			return fmt.Errorf("lance file: column %q: %w", leaf.Name, err)
		}
		enc, err := wrapEncoding(layout)
		if err != nil {
			return err
		}
		if err := w.addPage(leaf.Column, bufs, uint64(s.rows), enc, prio); err != nil {
			return err
		}
	}
	return nil
}

// sliceKeepFSST is a.Slice(lo, hi) that keeps a single-table array's
// values compressed.
func sliceKeepFSST(a *Array, lo, hi int) *Array {
	if len(a.fsst) != 1 {
		return a.Slice(lo, hi)
	}
	plain := *a
	plain.fsst = nil
	out := plain.Slice(lo, hi)
	out.fsst = []fsstSeg{{tab: a.fsst[0].tab, t: a.fsst[0].t}}
	return out
}

// addPage writes a page's buffers and records it in its column.
func (w *Writer) addPage(col int, bufs [][]byte, rows uint64, enc *pb.Encoding, priority uint64) error {
	pg := &pb.ColumnMetadata_Page{Length: rows, Encoding: enc, Priority: priority}
	for _, b := range bufs {
		off, err := w.writeBuffer(b)
		if err != nil {
			return err
		}
		pg.BufferOffsets = append(pg.BufferOffsets, off)
		pg.BufferSizes = append(pg.BufferSizes, uint64(len(b)))
	}
	w.cols[col].Pages = append(w.cols[col].Pages, pg)
	w.colRows[col] += rows
	return nil
}

var zeros64 [64]byte

// writeBuffer writes b at the next 64-byte boundary and returns its offset.
func (w *Writer) writeBuffer(b []byte) (uint64, error) {
	if pad := (64 - w.pos%64) % 64; pad > 0 {
		if err := w.raw(zeros64[:pad]); err != nil {
			return 0, err
		}
	}
	off := w.pos
	return off, w.raw(b)
}

func (w *Writer) raw(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := w.w.Write(b)
	w.pos += uint64(n)
	if err != nil {
		w.err = err
	}
	return err
}

func wrapEncoding(m proto.Message) (*pb.Encoding, error) {
	a, err := anypb.New(m)
	if err != nil {
		return nil, err
	}
	// Lance names the message without the type.googleapis.com host.
	a.TypeUrl = "/" + string(m.ProtoReflect().Descriptor().FullName())
	raw, err := proto.Marshal(a)
	if err != nil {
		return nil, err
	}
	return &pb.Encoding{Location: &pb.Encoding_Direct{Direct: &pb.DirectEncoding{Encoding: raw}}}, nil
}

// Close flushes the buffered rows and writes the metadata and footer. It
// does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.releaseScratch()
	for i, p := range w.pending {
		if err := w.flushField(i); err != nil {
			w.err = err
			return err
		}
		if p.build != nil {
			p.build.release()
		}
	}
	if w.opts.Version == V2_0 {
		if err := w.finishStructs20(); err != nil {
			w.err = err
			return err
		}
	}
	if err := w.checkRows(); err != nil {
		w.err = err
		return err
	}
	desc := &pb.FileDescriptor{Schema: &pb.Schema{Fields: w.fields, Metadata: w.opts.Metadata}, Length: w.rows}
	raw, err := proto.Marshal(desc)
	if err != nil {
		return err
	}
	gbOff, err := w.writeBuffer(raw)
	if err != nil {
		return err
	}
	globals := []Buffer{{gbOff, uint64(len(raw))}}
	for _, gb := range w.opts.GlobalBuffers {
		off, err := w.writeBuffer(gb)
		if err != nil {
			return err
		}
		globals = append(globals, Buffer{off, uint64(len(gb))})
	}
	colEnc, err := wrapEncoding(&pb.ColumnEncoding{ColumnEncoding: &pb.ColumnEncoding_Values{Values: &emptypb.Empty{}}})
	if err != nil {
		return err
	}
	metaStart := w.pos
	cmos := make([]Buffer, len(w.cols))
	for i, c := range w.cols {
		if c.Encoding == nil {
			c.Encoding = colEnc
		}
		b, err := proto.Marshal(c)
		if err != nil {
			return err
		}
		cmos[i] = Buffer{w.pos, uint64(len(b))}
		if err := w.raw(b); err != nil {
			return err
		}
	}
	cmoTable := w.pos
	tbl := make([]byte, 0, 16*len(cmos))
	for _, b := range cmos {
		tbl = le.AppendUint64(le.AppendUint64(tbl, b.Offset), b.Size)
	}
	if err := w.raw(tbl); err != nil {
		return err
	}
	gboTable := w.pos
	g := make([]byte, 0, 16*len(globals))
	for _, b := range globals {
		g = le.AppendUint64(le.AppendUint64(g, b.Offset), b.Size)
	}
	if err := w.raw(g); err != nil {
		return err
	}
	major, minor := w.opts.Version.Major, w.opts.Version.Minor
	if w.opts.Version == V2_0 {
		major, minor = 0, 3
	}
	ft := make([]byte, 0, FooterSize)
	ft = le.AppendUint64(ft, metaStart)
	ft = le.AppendUint64(ft, cmoTable)
	ft = le.AppendUint64(ft, gboTable)
	ft = le.AppendUint32(ft, uint32(len(globals)))
	ft = le.AppendUint32(ft, uint32(len(w.cols)))
	ft = le.AppendUint16(ft, major)
	ft = le.AppendUint16(ft, minor)
	ft = append(ft, magic[:]...)
	return w.raw(ft)
}

// checkRows verifies that every column holds the file's rows.
func (w *Writer) checkRows() error {
	if w.opts.Version == V2_0 {
		for _, f := range w.schema.Fields {
			if got := w.colRows[f.Column]; got != w.rows {
				return fmt.Errorf("lance file: column %q has %d rows, the file %d", f.Name, got, w.rows)
			}
		}
		return nil
	}
	for i, r := range w.colRows {
		if r != w.rows {
			return fmt.Errorf("lance file: column %d has %d rows, the file %d", i, r, w.rows)
		}
	}
	return nil
}

// Size is the number of bytes written so far.
func (w *Writer) Size() uint64 { return w.pos }

// DataFileFields returns what a manifest's DataFile records for this
// file: the field ids that have columns (2.1+: the leaves; 2.0: every
// node) and the column index of each.
func (w *Writer) DataFileFields() (fields, columns []int32) {
	var walk func(f *Field)
	walk = func(f *Field) {
		if f.Column >= 0 && f.ID >= 0 {
			fields = append(fields, f.ID)
			columns = append(columns, int32(f.Column))
		}
		for _, c := range f.Children {
			walk(c)
		}
	}
	for _, f := range w.schema.Fields {
		walk(f)
	}
	return fields, columns
}
