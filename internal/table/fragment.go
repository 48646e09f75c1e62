package table

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
)

// DefaultRowGroupRows bounds the rows of one Parquet row group, which bounds
// the memory a reader needs per column chunk.
const DefaultRowGroupRows = 64 * 1024

// ParquetSchema builds the Parquet schema of a table schema. Every field is
// optional except the primary key. Parquet groups order columns by name, so
// callers map fields to columns with ColumnIndexes.
func ParquetSchema(s *pb.Schema) *parquet.Schema {
	g := parquet.Group{}
	for _, f := range s.Fields {
		var n parquet.Node
		switch f.Type {
		case pb.FieldType_FIELD_TYPE_INT64:
			n = parquet.Int(64)
		case pb.FieldType_FIELD_TYPE_FLOAT64:
			n = parquet.Leaf(parquet.DoubleType)
		case pb.FieldType_FIELD_TYPE_STRING:
			n = parquet.String()
		case pb.FieldType_FIELD_TYPE_BOOL:
			n = parquet.Leaf(parquet.BooleanType)
		case pb.FieldType_FIELD_TYPE_BYTES:
			n = parquet.Leaf(parquet.ByteArrayType)
		case pb.FieldType_FIELD_TYPE_TIMESTAMP:
			n = parquet.Timestamp(parquet.Microsecond)
		}
		n = parquet.Compressed(n, &snappy.Codec{})
		if f.Nullable {
			n = parquet.Optional(n)
		}
		g[f.Name] = n
	}
	return parquet.NewSchema("compactord", g)
}

// ColumnIndexes maps schema positions to leaf column indexes of ps.
func ColumnIndexes(s *pb.Schema, ps *parquet.Schema, file string) ([]int, error) {
	out := make([]int, len(s.Fields))
	for i, f := range s.Fields {
		leaf, ok := ps.Lookup(f.Name)
		if !ok {
			return nil, fmt.Errorf("data file %s: %w: no column %q", file, ErrCorrupt, f.Name)
		}
		out[i] = leaf.ColumnIndex
	}
	return out, nil
}

// FragmentWriter streams rows into one Parquet data file. The file stays
// invisible to readers until a commit names it.
type FragmentWriter struct {
	schema *pb.Schema
	key    string
	w      io.WriteCloser
	cw     *countingWriter
	pw     *parquet.Writer
	cols   []int
	nullOK []bool
	rows   uint64
	buf    []parquet.Row
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewFragmentWriter starts a new data file.
func NewFragmentWriter(ctx context.Context, b storage.Bucket, s *pb.Schema) (*FragmentWriter, error) {
	key := DataKey(uuid.NewString())
	w, err := b.NewWriter(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	ps := ParquetSchema(s)
	cols, err := ColumnIndexes(s, ps, key)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: w}
	fw := &FragmentWriter{
		schema: s, key: key, w: w, cw: cw, cols: cols,
		pw: parquet.NewWriter(cw, ps, parquet.MaxRowsPerRowGroup(DefaultRowGroupRows)),
	}
	for _, f := range s.Fields {
		fw.nullOK = append(fw.nullOK, f.Nullable)
	}
	return fw, nil
}

// Key is the data file's key.
func (w *FragmentWriter) Key() string { return w.key }

// Rows is the number of rows written so far.
func (w *FragmentWriter) Rows() uint64 { return w.rows }

// Write appends rows.
func (w *FragmentWriter) Write(rows []Row) error {
	w.buf = w.buf[:0]
	for _, r := range rows {
		pr, err := EncodeRow(w.schema, w.cols, w.nullOK, r)
		if err != nil {
			return err
		}
		w.buf = append(w.buf, pr)
	}
	if _, err := w.pw.WriteRows(w.buf); err != nil {
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	w.rows += uint64(len(rows))
	return nil
}

// WriteParquetRows appends already-encoded rows (the compaction path).
func (w *FragmentWriter) WriteParquetRows(rows []parquet.Row) error {
	if _, err := w.pw.WriteRows(rows); err != nil {
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	w.rows += uint64(len(rows))
	return nil
}

// ParquetWriter exposes the underlying writer for row-group copies.
func (w *FragmentWriter) ParquetWriter() *parquet.Writer { return w.pw }

// AddRows records rows written directly through ParquetWriter.
func (w *FragmentWriter) AddRows(n uint64) { w.rows += n }

// Close finishes the file and returns its fragment (id unassigned).
func (w *FragmentWriter) Close() (*pb.Fragment, error) {
	if err := w.pw.Close(); err != nil {
		_ = w.w.Close()
		return nil, fmt.Errorf("finish %s: %w", w.key, err)
	}
	if err := w.w.Close(); err != nil {
		return nil, fmt.Errorf("upload %s: %w", w.key, err)
	}
	return &pb.Fragment{
		DataFile:     &pb.DataFile{Path: w.key, SizeBytes: uint64(w.cw.n)},
		PhysicalRows: w.rows,
	}, nil
}

// EncodeRow converts a row to a Parquet row with the given column mapping.
func EncodeRow(s *pb.Schema, cols []int, nullOK []bool, r Row) (parquet.Row, error) {
	if len(r) != len(s.Fields) {
		return nil, fmt.Errorf("row has %d values, schema has %d fields", len(r), len(s.Fields))
	}
	out := make(parquet.Row, len(cols))
	for i, f := range s.Fields {
		v := r[i]
		var pv parquet.Value
		def := 0
		if nullOK[i] {
			def = 1
		}
		switch x := v.(type) {
		case nil:
			if !nullOK[i] {
				return nil, fmt.Errorf("field %q: null not allowed", f.Name)
			}
			out[cols[i]] = parquet.NullValue().Level(0, 0, cols[i])
			continue
		case int64:
			pv = parquet.Int64Value(x)
		case Timestamp:
			pv = parquet.Int64Value(int64(x))
		case float64:
			pv = parquet.DoubleValue(x)
		case string:
			pv = parquet.ByteArrayValue([]byte(x))
		case []byte:
			pv = parquet.ByteArrayValue(x)
		case bool:
			pv = parquet.BooleanValue(x)
		default:
			return nil, fmt.Errorf("field %q: unsupported Go value %T", f.Name, v)
		}
		out[cols[i]] = pv.Level(0, def, cols[i])
	}
	return out, nil
}

// DecodeValue converts a Parquet value of field type t.
func DecodeValue(t pb.FieldType, v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch t {
	case pb.FieldType_FIELD_TYPE_INT64:
		return v.Int64()
	case pb.FieldType_FIELD_TYPE_TIMESTAMP:
		return Timestamp(v.Int64())
	case pb.FieldType_FIELD_TYPE_FLOAT64:
		return v.Double()
	case pb.FieldType_FIELD_TYPE_STRING:
		return string(v.ByteArray())
	case pb.FieldType_FIELD_TYPE_BYTES:
		return append([]byte(nil), v.ByteArray()...)
	case pb.FieldType_FIELD_TYPE_BOOL:
		return v.Boolean()
	}
	return nil
}

// OpenParquet opens a Parquet object for reading.
func OpenParquet(ctx context.Context, b storage.Bucket, key string, size int64) (*parquet.File, error) {
	if size <= 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			if storage.IsNotFound(err) {
				return nil, fmt.Errorf("data file %s is missing: %w", key, err)
			}
			return nil, fmt.Errorf("stat %s: %w", key, err)
		}
		size = a.Size
	}
	ra := &ioErrorReaderAt{r: storage.NewReaderAt(ctx, b, key, size)}
	f, err := parquet.OpenFile(ra, size)
	if err != nil {
		switch {
		case storage.IsNotFound(err):
			return nil, fmt.Errorf("data file %s is missing: %w", key, err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("open data file %s: %w", key, context.Cause(ctx))
		case ra.err != nil:
			// The bytes never arrived: an I/O failure, not a damaged file.
			return nil, fmt.Errorf("read data file %s: %w", key, ra.err)
		}
		return nil, fmt.Errorf("data file %s: %w: %v", key, ErrCorrupt, err)
	}
	return f, nil
}

// ScanBatch is how many rows a scan decodes at a time.
const ScanBatch = 1024

// ScanParquet calls fn for every row of a data file, with its physical
// offset, skipping offsets for which skip returns true. Memory is bounded by
// ScanBatch rows, never a whole row group.
func ScanParquet(ctx context.Context, b storage.Bucket, s *pb.Schema, key string, size int64, skip func(uint32) bool, fn func(offset uint32, r Row) error) error {
	f, err := OpenParquet(ctx, b, key, size)
	if err != nil {
		return err
	}
	cols, err := ColumnIndexes(s, f.Schema(), key)
	if err != nil {
		return err
	}
	buf := make([]parquet.Row, ScanBatch)
	var offset uint32
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			if err := ctx.Err(); err != nil {
				_ = rows.Close()
				return err
			}
			n, rerr := rows.ReadRows(buf)
			for _, pr := range buf[:n] {
				off := offset
				offset++
				if skip != nil && skip(off) {
					continue
				}
				r := make(Row, len(s.Fields))
				for i, f := range s.Fields {
					r[i] = DecodeValue(f.Type, pr[cols[i]])
				}
				if err := fn(off, r); err != nil {
					_ = rows.Close()
					return err
				}
			}
			if rerr != nil {
				_ = rows.Close()
				if errors.Is(rerr, io.EOF) {
					break
				}
				return fmt.Errorf("read %s: %w", key, rerr)
			}
		}
	}
	return nil
}

// ioErrorReaderAt remembers the first I/O error of the underlying reader, so
// that a failed open can tell "could not read" from "read garbage". Only a
// short read at the end of the object (io.EOF) is the file's fault.
type ioErrorReaderAt struct {
	r   io.ReaderAt
	err error
}

func (r *ioErrorReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return n, err
}
