package memwal

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// OpColumn is the SSTable column that tells upserts ("upsert") from
// tombstones ("delete"). Table fields cannot start with '_', so it never
// collides with one.
const OpColumn = "_op"

// sstSchema is the table's Parquet schema plus the required string column
// "_op". Everything else is exactly a fragment's layout, so any Parquet
// reader can read an SSTable.
func sstSchema(s *pb.Schema) *parquet.Schema {
	g := parquet.Group{}
	for _, f := range table.ParquetSchema(s).Fields() {
		g[f.Name()] = f
	}
	g[OpColumn] = parquet.String()
	return parquet.NewSchema("compactord_sstable", g)
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

// sstEncoder maps table rows onto SSTable rows.
type sstEncoder struct {
	schema    *pb.Schema
	ps        *parquet.Schema
	tableCols []int // leaf columns of table.ParquetSchema, by field
	sstCols   []int // leaf columns of the SSTable schema, by field
	opCol     int
	nullOK    []bool
}

func newSSTEncoder(s *pb.Schema) (*sstEncoder, error) {
	e := &sstEncoder{schema: s, ps: sstSchema(s)}
	var err error
	if e.tableCols, err = table.ColumnIndexes(s, table.ParquetSchema(s), "table schema"); err != nil {
		return nil, err
	}
	if e.sstCols, err = table.ColumnIndexes(s, e.ps, "sstable schema"); err != nil {
		return nil, err
	}
	leaf, ok := e.ps.Lookup(OpColumn)
	if !ok {
		return nil, fmt.Errorf("sstable schema has no %s column", OpColumn)
	}
	e.opCol = leaf.ColumnIndex
	for _, f := range s.Fields {
		e.nullOK = append(e.nullOK, f.Nullable)
	}
	return e, nil
}

func (e *sstEncoder) encode(r Record) (parquet.Row, error) {
	pr, err := table.EncodeRow(e.schema, e.tableCols, e.nullOK, r.Row)
	if err != nil {
		return nil, err
	}
	out := make(parquet.Row, len(e.sstCols)+1)
	for i := range e.schema.Fields {
		v := pr[e.tableCols[i]]
		out[e.sstCols[i]] = v.Level(v.RepetitionLevel(), v.DefinitionLevel(), e.sstCols[i])
	}
	out[e.opCol] = parquet.ByteArrayValue([]byte(r.Op.String())).Level(0, 0, e.opCol)
	return out, nil
}

// NewSSTableKey names a new SSTable file of generation gen.
func NewSSTableKey(shard string, gen uint64) string { return SSTableKey(shard, gen, uuid.NewString()) }

// WriteSSTable writes records, sorted by key (keys[i] is recs[i]'s
// table.KeyOf), to the object key as generation gen. The file stays
// unreferenced until a shard manifest names it. The WAL positions are left
// for the caller to fill in.
func WriteSSTable(ctx context.Context, b storage.Bucket, s *pb.Schema, key string, gen uint64, keys []string, recs []Record) (*pb.SSTable, error) {
	if len(keys) != len(recs) || len(recs) == 0 {
		return nil, fmt.Errorf("write sstable: %d keys for %d records", len(keys), len(recs))
	}
	enc, err := newSSTEncoder(s)
	if err != nil {
		return nil, err
	}
	w, err := b.NewWriter(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	cw := &countingWriter{w: w}
	pw := parquet.NewWriter(cw, enc.ps, parquet.MaxRowsPerRowGroup(table.DefaultRowGroupRows))
	abort := func(err error) (*pb.SSTable, error) {
		_ = w.Close()
		return nil, err
	}
	buf := make([]parquet.Row, 0, table.ScanBatch)
	for i, r := range recs {
		if i > 0 && keys[i] <= keys[i-1] {
			return abort(fmt.Errorf("write %s: keys not strictly ascending at row %d", key, i))
		}
		pr, err := enc.encode(r)
		if err != nil {
			return abort(fmt.Errorf("write %s: row %d: %w", key, i, err))
		}
		buf = append(buf, pr)
		if len(buf) == cap(buf) || i == len(recs)-1 {
			if _, err := pw.WriteRows(buf); err != nil {
				return abort(fmt.Errorf("write %s: %w", key, err))
			}
			buf = buf[:0]
		}
	}
	if err := pw.Close(); err != nil {
		return abort(fmt.Errorf("finish %s: %w", key, err))
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	return &pb.SSTable{
		Generation: gen, Path: key, Rows: uint64(len(recs)), Bytes: uint64(cw.n),
		MinKey: []byte(keys[0]), MaxKey: []byte(keys[len(keys)-1]),
	}, nil
}

// ScanSSTable calls fn for every record of an SSTable in key order, with
// the record's table.KeyOf key. Keys must be strictly ascending and the
// row count must match the shard manifest; anything else is corruption.
func ScanSSTable(ctx context.Context, b storage.Bucket, s *pb.Schema, sst *pb.SSTable, fn func(key string, r Record) error) error {
	f, err := table.OpenParquet(ctx, b, sst.Path, int64(sst.Bytes))
	if err != nil {
		return err
	}
	cols, err := table.ColumnIndexes(s, f.Schema(), sst.Path)
	if err != nil {
		return err
	}
	leaf, ok := f.Schema().Lookup(OpColumn)
	if !ok {
		return fmt.Errorf("sstable %s: %w: no %s column", sst.Path, table.ErrCorrupt, OpColumn)
	}
	opCol := leaf.ColumnIndex
	buf := make([]parquet.Row, table.ScanBatch)
	var n uint64
	var prev string
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			if err := ctx.Err(); err != nil {
				_ = rows.Close()
				return err
			}
			cnt, rerr := rows.ReadRows(buf)
			for _, pr := range buf[:cnt] {
				var r Record
				switch op := string(pr[opCol].ByteArray()); op {
				case "upsert":
					r.Op = Upsert
				case "delete":
					r.Op = Delete
				default:
					_ = rows.Close()
					return fmt.Errorf("sstable %s: %w: row %d has %s %q", sst.Path, table.ErrCorrupt, n, OpColumn, op)
				}
				r.Row = make(table.Row, len(s.Fields))
				for i, fd := range s.Fields {
					r.Row[i] = table.DecodeValue(fd.Type, pr[cols[i]])
				}
				k := table.KeyOf(s, r.Row)
				if n > 0 && k <= prev {
					_ = rows.Close()
					return fmt.Errorf("sstable %s: %w: keys not strictly ascending at row %d", sst.Path, table.ErrCorrupt, n)
				}
				prev = k
				n++
				if err := fn(k, r); err != nil {
					_ = rows.Close()
					return err
				}
			}
			if rerr != nil {
				_ = rows.Close()
				if errors.Is(rerr, io.EOF) {
					break
				}
				return fmt.Errorf("read %s: %w", sst.Path, rerr)
			}
		}
	}
	if n != sst.Rows {
		return fmt.Errorf("sstable %s: %w: holds %d rows, shard manifest says %d", sst.Path, table.ErrCorrupt, n, sst.Rows)
	}
	return nil
}
