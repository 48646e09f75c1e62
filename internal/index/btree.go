package index

import (
	"fmt"
	"io"
	"strconv"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// File names and parameters of Lance's scalar index segments.
const (
	BTreeDataFile    = "page_data.lance"
	BTreeLookupFile  = "page_lookup.lance"
	BitmapLookupFile = "bitmap_page_lookup.lance"
	// BTreeBatchSize is the rows of page_data each page_lookup row covers.
	BTreeBatchSize = 4096
)

// maxBatchSize bounds a btree's batch_size read from a file.
const maxBatchSize = 1 << 24

// indexField is a top-level field of an index file: the logical type of
// the table's field (without its metadata or key), or t if tf is nil.
func indexField(tf *lancepb.Field, name string, id int32, logical string, nullable bool) *lancepb.Field {
	f := &lancepb.Field{Name: name, Id: id, ParentId: -1, LogicalType: logical, Nullable: nullable, Encoding: lancepb.Encoding_PLAIN}
	if tf != nil {
		f.LogicalType = tf.GetLogicalType()
		if tf.GetEncoding() != 0 {
			f.Encoding = tf.GetEncoding()
		}
	}
	if f.LogicalType == "string" || f.LogicalType == "large_string" || f.LogicalType == "binary" || f.LogicalType == "large_binary" {
		f.Encoding = lancepb.Encoding_VAR_BINARY
	}
	return f
}

func uint64Array(v []uint64) *file.Array {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = le.AppendUint64(b, x)
	}
	return &file.Array{Type: file.DataType{Kind: file.KindUint64}, Len: len(v), Values: b}
}

func uint32Array(v []uint32) *file.Array {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = le.AppendUint32(b, x)
	}
	return &file.Array{Type: file.DataType{Kind: file.KindUint32}, Len: len(v), Values: b}
}

func writeFile(w io.Writer, v file.Version, fields []*lancepb.Field, md map[string][]byte, cols []*file.Array) (int64, error) {
	return writeFileWith(w, v, nil, fields, md, cols)
}

func writeFileWith(w io.Writer, v file.Version, globals [][]byte, fields []*lancepb.Field, md map[string][]byte, cols []*file.Array) (int64, error) {
	fw, err := file.NewWriter(w, fields, file.WriterOptions{Version: v, Metadata: md, GlobalBuffers: globals})
	if err != nil {
		return 0, err
	}
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len
	}
	const chunk = 64 << 10
	for start := 0; start < n; start += chunk {
		end := min(n, start+chunk)
		b := &file.Batch{NumRows: end - start}
		for _, c := range cols {
			if start == 0 && end == n {
				b.Columns = append(b.Columns, c)
			} else {
				b.Columns = append(b.Columns, c.Slice(start, end))
			}
		}
		if err := fw.Write(b); err != nil {
			return 0, err
		}
	}
	if err := fw.Close(); err != nil {
		return 0, err
	}
	return int64(fw.Size()), nil
}

// WriteBTree writes a btree segment of the entries (sorted here) over a
// column of the table's field tf to data (page_data.lance) and lookup
// (page_lookup.lance), returning their sizes.
func WriteBTree(data, lookup io.Writer, tf *lancepb.Field, e *Entries) (dataSize, lookupSize int64, err error) {
	return WriteBTreeWith(data, lookup, tf, e, BTreeOptions{})
}

// BTreeOptions are a btree segment's file version and page size.
type BTreeOptions struct {
	// Version of both files (default 2.2, as LanceDB's index files).
	Version file.Version
	// BatchSize is the rows per page_lookup entry (default BTreeBatchSize).
	BatchSize int
}

// PKIndexOptions are those of a MemWAL generation's _pk_index, which
// LanceDB 0.39 writes in file format 2.0 with pages of 8192 rows.
var PKIndexOptions = BTreeOptions{Version: file.V2_0, BatchSize: 8192}

// WriteBTreeWith is WriteBTree with the file version and page size of o.
func WriteBTreeWith(data, lookup io.Writer, tf *lancepb.Field, e *Entries, o BTreeOptions) (dataSize, lookupSize int64, err error) {
	if o.Version == (file.Version{}) {
		o.Version = file.V2_2
	}
	batch := o.BatchSize
	if batch <= 0 {
		batch = BTreeBatchSize
	}
	if err := Indexable(e.Values.Type); err != nil {
		return 0, 0, err
	}
	s := e.Sorted()
	n := s.Len()
	dataSize, err = writeFile(data, o.Version, []*lancepb.Field{indexField(tf, "values", 0, "", true), indexField(nil, "ids", 1, "uint64", false)},
		nil, []*file.Array{s.Values, uint64Array(s.Addrs)})
	if err != nil {
		return 0, 0, fmt.Errorf("btree %s: %w", BTreeDataFile, err)
	}
	var firsts, lasts []int
	var nulls, pages []uint32
	for p, start := 0, 0; start < n; p, start = p+1, start+batch {
		end := min(n, start+batch)
		firsts, lasts = append(firsts, start), append(lasts, end-1)
		nc := uint32(0)
		for i := start; i < end; i++ {
			if !s.Values.IsValid(i) {
				nc++
			}
		}
		nulls, pages = append(nulls, nc), append(pages, uint32(p))
	}
	md := map[string][]byte{"batch_size": []byte(strconv.Itoa(batch)), "range_partitioned": []byte("false")}
	lookupSize, err = writeFile(lookup, o.Version, []*lancepb.Field{indexField(tf, "min", 0, "", true), indexField(tf, "max", 1, "", true),
		indexField(nil, "null_count", 2, "uint32", false), indexField(nil, "page_idx", 3, "uint32", false)},
		md, []*file.Array{s.Values.Take(firsts), s.Values.Take(lasts), uint32Array(nulls), uint32Array(pages)})
	if err != nil {
		return 0, 0, fmt.Errorf("btree %s: %w", BTreeLookupFile, err)
	}
	return dataSize, lookupSize, nil
}

// BTreePage is one row of page_lookup.lance.
type BTreePage struct {
	Index     uint32
	NullCount uint32
	// Min and Max are one-value arrays (null when the page's first or last
	// value is).
	Min, Max *file.Array
}

// BTree is a decoded btree segment.
type BTree struct {
	BatchSize uint64
	Pages     []BTreePage
	// Entries are page_data's rows in file order.
	Entries *Entries
}

// Reader is a file to decode: a reader and its size.
type Reader struct {
	R    io.ReaderAt
	Size int64
}

func openFile(r Reader, name string) (*file.File, error) {
	if r.R == nil {
		return nil, fmt.Errorf("%s: no file", name)
	}
	f, err := file.Open(r.R, r.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func fieldOf(f *file.File, name string, idx int, check func(file.DataType) bool) (*file.Field, error) {
	fs := f.Schema.Fields
	if idx >= len(fs) || fs[idx].Name != name {
		return nil, formatErr("column %d is not %q", idx, name)
	}
	if len(fs[idx].Children) != 0 || !check(fs[idx].Type) {
		return nil, formatErr("column %q has type %s", name, fs[idx].Type)
	}
	return fs[idx], nil
}

func isKind(k file.Kind) func(file.DataType) bool {
	return func(t file.DataType) bool { return t.Kind == k }
}

func indexable(t file.DataType) bool { return Indexable(t) == nil }

// readColumns reads every row of the file, checking the decoded columns'
// lengths.
func readColumns(f *file.File, name string) (*file.Batch, error) {
	b, err := f.ReadAll(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, c := range b.Columns {
		if c == nil || c.Len != int(f.NumRows()) {
			return nil, formatErr("%s: column %d does not hold %d rows", name, i, f.NumRows())
		}
	}
	return b, nil
}

// ReadBTree decodes a btree segment from its two files.
func ReadBTree(data, lookup Reader) (*BTree, error) {
	lf, err := openFile(lookup, BTreeLookupFile)
	if err != nil {
		return nil, err
	}
	if len(lf.Schema.Fields) != 4 {
		return nil, formatErr("%s has %d columns, want 4", BTreeLookupFile, len(lf.Schema.Fields))
	}
	minF, err := fieldOf(lf, "min", 0, indexable)
	if err != nil {
		return nil, err
	}
	if _, err := fieldOf(lf, "max", 1, func(t file.DataType) bool { return t == minF.Type }); err != nil {
		return nil, err
	}
	for i, n := range []string{"null_count", "page_idx"} {
		if _, err := fieldOf(lf, n, 2+i, isKind(file.KindUint32)); err != nil {
			return nil, err
		}
	}
	bt := &BTree{BatchSize: BTreeBatchSize}
	if v, ok := lf.Desc.GetSchema().GetMetadata()["batch_size"]; ok {
		bs, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil || bs == 0 || bs > maxBatchSize {
			return nil, formatErr("%s: batch_size %q", BTreeLookupFile, v)
		}
		bt.BatchSize = bs
	}
	lb, err := readColumns(lf, BTreeLookupFile)
	if err != nil {
		return nil, err
	}
	df, err := openFile(data, BTreeDataFile)
	if err != nil {
		return nil, err
	}
	if len(df.Schema.Fields) != 2 {
		return nil, formatErr("%s has %d columns, want 2", BTreeDataFile, len(df.Schema.Fields))
	}
	if _, err := fieldOf(df, "values", 0, func(t file.DataType) bool { return t == minF.Type }); err != nil {
		return nil, err
	}
	if _, err := fieldOf(df, "ids", 1, isKind(file.KindUint64)); err != nil {
		return nil, err
	}
	db, err := readColumns(df, BTreeDataFile)
	if err != nil {
		return nil, err
	}
	rows := df.NumRows()
	nc, pi := lb.Columns[2], lb.Columns[3]
	for i := 0; i < lb.NumRows; i++ {
		p := BTreePage{NullCount: le.Uint32(nc.Values[4*i:]), Index: le.Uint32(pi.Values[4*i:]),
			Min: lb.Columns[0].Slice(i, i+1), Max: lb.Columns[1].Slice(i, i+1)}
		if uint64(p.Index)*bt.BatchSize >= rows {
			return nil, formatErr("%s: page %d starts past the %d rows of %s", BTreeLookupFile, p.Index, rows, BTreeDataFile)
		}
		bt.Pages = append(bt.Pages, p)
	}
	ids := db.Columns[1]
	if ids.Valid != nil && ids.NullCount() > 0 {
		return nil, formatErr("%s: null row ids", BTreeDataFile)
	}
	addrs := make([]uint64, ids.Len)
	for i := range addrs {
		addrs[i] = le.Uint64(ids.Values[8*i:])
	}
	bt.Entries = &Entries{Values: db.Columns[0], Addrs: addrs}
	return bt, nil
}
