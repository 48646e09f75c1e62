package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/compactord/compactord/gen/lancefilepb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// FooterSize is the size of the fixed trailer of every 2.x file.
const FooterSize = 40

var magic = [4]byte{'L', 'A', 'N', 'C'}

// Footer is the fixed trailer. Offsets are absolute file positions.
type Footer struct {
	ColumnMetaStart  uint64
	ColumnMetaTable  uint64 // position of the (offset, size) table of column metadata
	GlobalBuffTable  uint64 // position of the (offset, size) table of global buffers
	NumGlobalBuffers uint32
	NumColumns       uint32
	Major, Minor     uint16
}

// Version is the file format version as Lance names it: 2.0 files carry
// 0.3 in the footer.
func (f Footer) Version() Version {
	if f.Major == 0 && f.Minor == 3 {
		return V2_0
	}
	return Version{f.Major, f.Minor}
}

// Version is a file format version.
type Version struct{ Major, Minor uint16 }

// The versions this package reads.
var (
	V2_0 = Version{2, 0}
	V2_1 = Version{2, 1}
	V2_2 = Version{2, 2}
)

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || (v.Major == o.Major && v.Minor < o.Minor)
}

// ErrFormat is wrapped by every error that blames the file's contents.
var ErrFormat = errors.New("lance file")

// ErrVersion is wrapped (with ErrFormat) by the error of a well-formed
// footer naming a file version this package does not read: a newer
// writer's file, or a legacy 0.1/0.2 one, rather than necessarily damage.
var ErrVersion = errors.New("unsupported file version")

func errf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// ParseFooter decodes the 40-byte trailer.
func ParseFooter(b []byte) (Footer, error) {
	if len(b) != FooterSize {
		return Footer{}, errf("footer is %d bytes, want %d", len(b), FooterSize)
	}
	if [4]byte(b[36:40]) != magic {
		return Footer{}, errf("no LANC magic at the end of the file")
	}
	le := binary.LittleEndian
	f := Footer{
		ColumnMetaStart:  le.Uint64(b[0:]),
		ColumnMetaTable:  le.Uint64(b[8:]),
		GlobalBuffTable:  le.Uint64(b[16:]),
		NumGlobalBuffers: le.Uint32(b[24:]),
		NumColumns:       le.Uint32(b[28:]),
		Major:            le.Uint16(b[32:]),
		Minor:            le.Uint16(b[34:]),
	}
	v := f.Version()
	if v != V2_0 && v != V2_1 && v != V2_2 {
		return Footer{}, fmt.Errorf("%w: %w %d.%d", ErrFormat, ErrVersion, f.Major, f.Minor)
	}
	return f, nil
}

// Buffer is a byte range of the file.
type Buffer struct{ Offset, Size uint64 }

// File is an open Lance data file: its metadata, parsed and checked.
type File struct {
	r       io.ReaderAt
	size    uint64
	Footer  Footer
	Columns []*lancefilepb.ColumnMetadata
	Globals []Buffer
	// Desc is global buffer 0: the schema and the row count.
	Desc   *lancefilepb.FileDescriptor
	Schema *Schema
}

// NumRows is the number of rows in the file.
func (f *File) NumRows() uint64 { return f.Desc.GetLength() }

// Version is the file format version.
func (f *File) Version() Version { return f.Footer.Version() }

// Open reads and checks the metadata of the file of the given size.
func Open(r io.ReaderAt, size int64) (*File, error) {
	if size < FooterSize {
		return nil, errf("file is %d bytes, shorter than the footer", size)
	}
	fb := make([]byte, FooterSize)
	if _, err := r.ReadAt(fb, size-FooterSize); err != nil {
		return nil, fmt.Errorf("lance file: reading footer: %w", err)
	}
	ft, err := ParseFooter(fb)
	if err != nil {
		return nil, err
	}
	f := &File{r: r, size: uint64(size), Footer: ft}
	end := f.size - FooterSize
	// The metadata region: column metadata, then the two tables, then the footer.
	if ft.ColumnMetaStart > end || ft.ColumnMetaTable > end || ft.GlobalBuffTable > end {
		return nil, errf("footer offsets beyond the file")
	}
	cmoLen := uint64(ft.NumColumns) * 16
	gboLen := uint64(ft.NumGlobalBuffers) * 16
	if cmoLen > end-ft.ColumnMetaTable || gboLen > end-ft.GlobalBuffTable {
		return nil, errf("metadata tables run past the footer (%d columns, %d global buffers)", ft.NumColumns, ft.NumGlobalBuffers)
	}
	lo := min(ft.ColumnMetaStart, ft.ColumnMetaTable, ft.GlobalBuffTable)
	meta := make([]byte, end-lo)
	if _, err := r.ReadAt(meta, int64(lo)); err != nil {
		return nil, fmt.Errorf("lance file: reading metadata: %w", err)
	}
	sub := func(b Buffer) ([]byte, error) {
		if b.Offset < lo || b.Offset > end || b.Size > end-b.Offset {
			return nil, errf("metadata range %d+%d outside the metadata region", b.Offset, b.Size)
		}
		return meta[b.Offset-lo : b.Offset-lo+b.Size], nil
	}
	table := func(at uint64, n uint32) ([]Buffer, error) {
		raw, err := sub(Buffer{at, uint64(n) * 16})
		if err != nil {
			return nil, err
		}
		out := make([]Buffer, n)
		for i := range out {
			out[i] = Buffer{binary.LittleEndian.Uint64(raw[i*16:]), binary.LittleEndian.Uint64(raw[i*16+8:])}
			if out[i].Offset > f.size || out[i].Size > f.size-out[i].Offset {
				return nil, errf("buffer %d+%d beyond the file", out[i].Offset, out[i].Size)
			}
		}
		return out, nil
	}
	cmos, err := table(ft.ColumnMetaTable, ft.NumColumns)
	if err != nil {
		return nil, err
	}
	if f.Globals, err = table(ft.GlobalBuffTable, ft.NumGlobalBuffers); err != nil {
		return nil, err
	}
	f.Columns = make([]*lancefilepb.ColumnMetadata, len(cmos))
	for i, b := range cmos {
		raw, err := sub(b)
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", i, err)
		}
		cm := &lancefilepb.ColumnMetadata{}
		if err := proto.Unmarshal(raw, cm); err != nil {
			return nil, errf("column %d metadata: %v", i, err)
		}
		if err := f.checkColumn(i, cm); err != nil {
			return nil, err
		}
		f.Columns[i] = cm
	}
	if len(f.Globals) == 0 {
		return nil, errf("no global buffers (the file descriptor is buffer 0)")
	}
	gb, err := f.readRange(f.Globals[0])
	if err != nil {
		return nil, fmt.Errorf("lance file: reading the file descriptor: %w", err)
	}
	f.Desc = &lancefilepb.FileDescriptor{}
	if err := proto.Unmarshal(gb, f.Desc); err != nil {
		return nil, errf("file descriptor: %v", err)
	}
	if f.NumRows() > maxRows(f.size) {
		return nil, errf("file claims %d rows in %d bytes", f.NumRows(), f.size)
	}
	if f.Version() != V2_0 {
		// In 2.1+ every column is a leaf with one entry per row; 2.0 list
		// item columns have their own counts.
		for i, c := range f.Columns {
			var rows uint64
			for _, p := range c.GetPages() {
				rows += p.GetLength()
			}
			if rows != f.NumRows() {
				return nil, errf("column %d has %d rows, the file %d", i, rows, f.NumRows())
			}
		}
	}
	if f.Schema, err = newSchema(f.Desc.GetSchema().GetFields(), f.Version()); err != nil {
		return nil, err
	}
	if err := f.Schema.bindColumns(len(f.Columns)); err != nil {
		return nil, err
	}
	return f, nil
}

// checkColumn verifies that every buffer of the column lies inside the file
// and that pages have as many offsets as sizes, so decoders can trust them.
func (f *File) checkColumn(i int, cm *lancefilepb.ColumnMetadata) error {
	check := func(offs, sizes []uint64, what string) error {
		if len(offs) != len(sizes) {
			return errf("column %d %s: %d buffer offsets but %d sizes", i, what, len(offs), len(sizes))
		}
		for k := range offs {
			if offs[k] > f.size || sizes[k] > f.size-offs[k] {
				return errf("column %d %s: buffer %d+%d beyond the file", i, what, offs[k], sizes[k])
			}
		}
		return nil
	}
	if err := check(cm.GetBufferOffsets(), cm.GetBufferSizes(), "column buffers"); err != nil {
		return err
	}
	var rows uint64
	for p, pg := range cm.GetPages() {
		if err := check(pg.GetBufferOffsets(), pg.GetBufferSizes(), fmt.Sprintf("page %d", p)); err != nil {
			return err
		}
		if pg.GetLength() > maxRows(f.size) {
			return errf("column %d page %d claims %d rows", i, p, pg.GetLength())
		}
		rows += pg.GetLength()
	}
	if rows > maxRows(f.size) {
		return errf("column %d claims %d rows", i, rows)
	}
	return nil
}

// GlobalBuffer reads global buffer i (0 is the file descriptor).
func (f *File) GlobalBuffer(i int) ([]byte, error) {
	if i < 0 || i >= len(f.Globals) {
		return nil, errf("no global buffer %d (the file has %d)", i, len(f.Globals))
	}
	return f.readRange(f.Globals[i])
}

// readRange reads a byte range already checked to lie inside the file.
func (f *File) readRange(b Buffer) ([]byte, error) {
	return f.readRangeInto(b, nil)
}

// readRangeInto is readRange into dst when it has room (its contents are
// overwritten), else into a fresh buffer.
func (f *File) readRangeInto(b Buffer, dst []byte) ([]byte, error) {
	if b.Offset > f.size || b.Size > f.size-b.Offset {
		return nil, errf("range %d+%d beyond the file", b.Offset, b.Size)
	}
	var out []byte
	if uint64(cap(dst)) >= b.Size {
		out = dst[:b.Size]
	} else {
		out = make([]byte, b.Size)
	}
	if n, err := f.r.ReadAt(out, int64(b.Offset)); err != nil {
		if !(errors.Is(err, io.EOF) && b.Offset+b.Size == f.size) {
			return nil, err
		}
		clear(out[n:]) // a reused buffer must read as a fresh one
	}
	return out, nil
}

// unwrapEncoding unwraps the Any of a page (or column) encoding into msg,
// checking that its type URL ends with the expected message name.
func unwrapEncoding(e *lancefilepb.Encoding, want string, msg proto.Message) error {
	d := e.GetDirect()
	if d == nil {
		if e.GetIndirect() != nil {
			return errf("deferred encodings are not supported")
		}
		return errf("page has no encoding")
	}
	a := &anypb.Any{}
	if err := proto.Unmarshal(d.GetEncoding(), a); err != nil {
		return errf("encoding: %v", err)
	}
	u := a.GetTypeUrl()
	if len(u) < len(want) || u[len(u)-len(want):] != want {
		return errf("encoding is %q, want %s", u, want)
	}
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return errf("encoding %s: %v", want, err)
	}
	return nil
}

// maxRows is the most rows a file of this size may claim: generous enough
// for constant and all-null pages (a few bytes for many rows), small enough
// that a forged count cannot make the reader allocate without bound.
func maxRows(size uint64) uint64 { return size*1024 + 1<<16 }
