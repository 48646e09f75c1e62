package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// KeySet is the sorted set of primary keys (table.KeyOf encoding) a merge
// looks up. Keys are identified by their index in Keys().
type KeySet struct {
	sorted []string
	index  map[string]int // built on first use by Index
	// ints are the keys decoded as int64s when each is one encoded int64
	// (built on first use by intKeys; intsOK says whether they are).
	ints     []int64
	intsDone bool
	intsOK   bool
}

// intKeys returns the keys as int64s, ascending, when every key is a
// single encoded int64 (a one-column int64 or timestamp primary key).
// The encoding preserves order, so the ints ascend as the keys do.
func (ks *KeySet) intKeys() ([]int64, bool) {
	if !ks.intsDone {
		ks.intsDone, ks.intsOK = true, true
		ks.ints = make([]int64, len(ks.sorted))
		for i, k := range ks.sorted {
			if len(k) != 9 || k[0] != 1 {
				ks.ints, ks.intsOK = nil, false
				break
			}
			var u uint64
			for j := 1; j < 9; j++ {
				u = u<<8 | uint64(k[j])
			}
			ks.ints[i] = int64(u ^ (1 << 63))
		}
	}
	return ks.ints, ks.intsOK
}

// NewKeySet builds a set from keys, which must be strictly ascending.
func NewKeySet(sorted []string) (*KeySet, error) {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] <= sorted[i-1] {
			return nil, fmt.Errorf("key set: keys not strictly ascending at %d", i)
		}
	}
	return &KeySet{sorted: sorted}, nil
}

// Keys returns the keys in ascending order. Callers must not modify it.
func (ks *KeySet) Keys() []string { return ks.sorted }

// Len is the number of keys.
func (ks *KeySet) Len() int { return len(ks.sorted) }

// Index returns the position of key in Keys(), or -1.
func (ks *KeySet) Index(key string) int {
	if ks.index == nil {
		ks.index = make(map[string]int, len(ks.sorted))
		for i, k := range ks.sorted {
			ks.index[k] = i
		}
	}
	if i, ok := ks.index[key]; ok {
		return i
	}
	return -1
}

// Locator finds the live base rows of a set of keys.
type Locator interface {
	// Name says how rows are found, for logs and results.
	Name() string
	// Locate calls fn(fragment, offset, i) for every live row of m whose
	// primary key is keys.Keys()[i]. Deleted rows must not be reported.
	Locate(ctx context.Context, b storage.Bucket, m *pb.Manifest, keys *KeySet, fn func(frag, off uint32, i int) error) error
}

// PrimaryKeyIndex returns the name of a user index over exactly the
// primary-key fields, or "".
func PrimaryKeyIndex(m *pb.Manifest) string {
	for _, ix := range m.Indices {
		if !table.IsSystemIndex(ix) && slices.Equal(ix.FieldIds, m.Schema.GetPrimaryKey()) {
			return ix.Name
		}
	}
	return ""
}

// ScanLocator finds rows by reading only the key columns of every live
// fragment. A row group whose key statistics exclude every wanted key is
// skipped. Rows whose keys ascend (appends in key order, merge output) are
// matched by a merge-join against the sorted key set, which touches memory
// sequentially; a row group that is not sorted falls back to a hash lookup.
type ScanLocator struct{}

// Name returns "scan".
func (ScanLocator) Name() string { return "scan" }

// Locate scans the key columns of every fragment of m.
func (ScanLocator) Locate(ctx context.Context, b storage.Bucket, m *pb.Manifest, keys *KeySet, fn func(frag, off uint32, i int) error) error {
	if keys.Len() == 0 {
		return nil
	}
	for _, f := range m.Fragments {
		if err := scanFragmentKeys(ctx, b, m.Schema, f, keys, fn); err != nil {
			return err
		}
	}
	return nil
}

func scanFragmentKeys(ctx context.Context, b storage.Bucket, s *pb.Schema, f *pb.Fragment, keys *KeySet, fn func(frag, off uint32, i int) error) error {
	del, err := table.ReadDeletionFile(ctx, b, f.DeletionFile)
	if err != nil {
		return err
	}
	path := f.GetDataFile().GetPath()
	pf, err := table.OpenParquet(ctx, b, path, int64(f.GetDataFile().GetSizeBytes()))
	if err != nil {
		return err
	}
	keyIdx := table.KeyIndexes(s)
	cols := make([]int, len(keyIdx))
	types := make([]pb.FieldType, len(keyIdx))
	required := true
	for i, fi := range keyIdx {
		fd := s.Fields[fi]
		leaf, ok := pf.Schema().Lookup(fd.Name)
		if !ok {
			return fmt.Errorf("data file %s: %w: no key column %q", path, table.ErrCorrupt, fd.Name)
		}
		cols[i], types[i] = leaf.ColumnIndex, fd.Type
		required = required && leaf.Node.Required()
	}
	if ints, ok := keys.intKeys(); ok && len(cols) == 1 && required && isIntKey(types[0]) {
		return scanIntKeys(ctx, f, path, pf, cols[0], types[0], ints, del, fn)
	}
	sorted := keys.Keys()
	kmin, kmax := sorted[0], sorted[len(sorted)-1]
	var enc rowKeys
	var base uint32 // offset of the row group's first row
	for _, rg := range pf.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(rg.NumRows())
		start := base
		base += uint32(n)
		if n == 0 || len(cols) == 1 && !mayHold(rg.ColumnChunks()[cols[0]], types[0], kmin, kmax) {
			continue
		}
		if err := enc.read(rg, cols, types, n); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		// Merge-join while the row group's keys ascend.
		c := sort.SearchStrings(sorted, string(enc.key(0)))
		ascending := true
		for r := 0; r < n; r++ {
			k := enc.key(r)
			i := -1
			if ascending && r > 0 && string(k) <= string(enc.key(r-1)) {
				ascending = false
			}
			if ascending {
				for c < len(sorted) && sorted[c] < string(k) {
					c++
				}
				if c < len(sorted) && sorted[c] == string(k) {
					i = c
				}
			} else {
				i = keys.Index(string(k))
			}
			if i < 0 || del.Contains(start+uint32(r)) {
				continue
			}
			if err := fn(f.Id, start+uint32(r), i); err != nil {
				return err
			}
		}
	}
	if uint64(base) != f.PhysicalRows {
		return fmt.Errorf("data file %s: %w: holds %d rows, manifest says %d", path, table.ErrCorrupt, base, f.PhysicalRows)
	}
	return nil
}

// rowKeys holds the encoded keys of one row group, back to back.
type rowKeys struct {
	buf  []byte
	ends []int
	vals [][]any
	pv   []parquet.Value
}

func (rk *rowKeys) key(r int) []byte {
	lo := 0
	if r > 0 {
		lo = rk.ends[r-1]
	}
	return rk.buf[lo:rk.ends[r]]
}

// read encodes the keys of the n rows of rg. A single integer key column
// is encoded straight from the Parquet values, without boxing each value.
func (rk *rowKeys) read(rg parquet.RowGroup, cols []int, types []pb.FieldType, n int) error {
	rk.buf, rk.ends = rk.buf[:0], rk.ends[:0]
	if len(cols) == 1 && (types[0] == pb.FieldType_FIELD_TYPE_INT64 || types[0] == pb.FieldType_FIELD_TYPE_TIMESTAMP) {
		err := readValues(rg.ColumnChunks()[cols[0]], &rk.pv, func(v parquet.Value) {
			rk.buf = appendInt64Key(rk.buf, v.Int64())
			rk.ends = append(rk.ends, len(rk.buf))
		})
		if err != nil {
			return err
		}
	} else {
		rk.vals = rk.vals[:0]
		for i, c := range cols {
			col := make([]any, 0, n)
			err := readValues(rg.ColumnChunks()[c], &rk.pv, func(v parquet.Value) {
				col = append(col, table.DecodeValue(types[i], v))
			})
			if err != nil {
				return err
			}
			if len(col) != n {
				return fmt.Errorf("%w: key column holds %d values for %d rows", table.ErrCorrupt, len(col), n)
			}
			rk.vals = append(rk.vals, col)
		}
		for r := 0; r < n; r++ {
			for i := range cols {
				rk.buf = table.AppendKey(rk.buf, rk.vals[i][r])
			}
			rk.ends = append(rk.ends, len(rk.buf))
		}
	}
	if len(rk.ends) != n {
		return fmt.Errorf("%w: key column holds %d values for %d rows", table.ErrCorrupt, len(rk.ends), n)
	}
	return nil
}

// appendInt64Key is table.AppendKey for an int64, without boxing.
// INVARIANT: byte-identical to table.AppendKey(b, x) (tested).
func appendInt64Key(b []byte, x int64) []byte {
	u := uint64(x) ^ (1 << 63)
	return append(b, 1, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// readValues calls fn for every value of a column chunk. Values must be
// used before fn returns: their bytes belong to a page that is released.
func readValues(cc parquet.ColumnChunk, buf *[]parquet.Value, fn func(parquet.Value)) error {
	if *buf == nil {
		*buf = make([]parquet.Value, 1024)
	}
	return table.ReadColumnValues(cc, *buf, func(vs []parquet.Value) error {
		for _, v := range vs {
			fn(v)
		}
		return nil
	}, nil)
}

// mayHold reports whether a column chunk's statistics admit a key in
// [kmin, kmax]. Missing statistics admit everything.
func mayHold(cc parquet.ColumnChunk, t pb.FieldType, kmin, kmax string) bool {
	fc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return true
	}
	// Only exact statistics are pruned on: string and bytes statistics may
	// be truncated prefixes, and a truncated max would exclude wrongly.
	switch t {
	case pb.FieldType_FIELD_TYPE_INT64, pb.FieldType_FIELD_TYPE_TIMESTAMP, pb.FieldType_FIELD_TYPE_BOOL:
	default:
		return true
	}
	lo, hi, ok := fc.Bounds()
	if !ok || lo.IsNull() || hi.IsNull() {
		return true
	}
	// The key encoding preserves order, so encoded bounds compare.
	clo := string(table.AppendKey(nil, table.DecodeValue(t, lo)))
	chi := string(table.AppendKey(nil, table.DecodeValue(t, hi)))
	return !(chi < kmin || clo > kmax)
}

func isIntKey(t pb.FieldType) bool {
	return t == pb.FieldType_FIELD_TYPE_INT64 || t == pb.FieldType_FIELD_TYPE_TIMESTAMP
}

// scanIntKeys is scanFragmentKeys for a required one-column int64 key:
// values are read as int64s straight from the pages and matched against
// the decoded key set, with no key encoding or byte comparison (two
// thirds of a 10 M-row locate went to encoding and comparing keys).
func scanIntKeys(ctx context.Context, f *pb.Fragment, path string, pf *parquet.File, col int, typ pb.FieldType, ints []int64, del *roaring.Bitmap, fn func(frag, off uint32, i int) error) error {
	kmin, kmax := ints[0], ints[len(ints)-1]
	var vals []int64
	var base uint32
	for _, rg := range pf.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(rg.NumRows())
		start := base
		base += uint32(n)
		if n == 0 || !mayHoldInt(rg.ColumnChunks()[col], kmin, kmax) {
			continue
		}
		var err error
		if vals, err = readInt64s(rg.ColumnChunks()[col], vals[:0]); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if len(vals) != n {
			return fmt.Errorf("read %s: %w: key column holds %d values for %d rows", path, table.ErrCorrupt, len(vals), n)
		}
		// Merge-join while the row group's keys ascend, then binary
		// search.
		c, _ := slices.BinarySearch(ints, vals[0])
		ascending := true
		for r, v := range vals {
			i := -1
			if ascending && r > 0 && v <= vals[r-1] {
				ascending = false
			}
			if ascending {
				for c < len(ints) && ints[c] < v {
					c++
				}
				if c < len(ints) && ints[c] == v {
					i = c
				}
			} else if j, ok := slices.BinarySearch(ints, v); ok {
				i = j
			}
			if i < 0 || del.Contains(start+uint32(r)) {
				continue
			}
			if err := fn(f.Id, start+uint32(r), i); err != nil {
				return err
			}
		}
	}
	if uint64(base) != f.PhysicalRows {
		return fmt.Errorf("data file %s: %w: holds %d rows, manifest says %d", path, table.ErrCorrupt, base, f.PhysicalRows)
	}
	return nil
}

// mayHoldInt is mayHold for int64 statistics.
func mayHoldInt(cc parquet.ColumnChunk, kmin, kmax int64) bool {
	fc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return true
	}
	lo, hi, ok := fc.Bounds()
	if !ok || lo.IsNull() || hi.IsNull() || lo.Kind() != parquet.Int64 || hi.Kind() != parquet.Int64 {
		return true
	}
	return !(hi.Int64() < kmin || lo.Int64() > kmax)
}

// readInt64s appends the values of an int64 column chunk to out, through
// the pages' typed readers where they have one.
func readInt64s(cc parquet.ColumnChunk, out []int64) ([]int64, error) {
	pages := cc.Pages()
	defer pages.Close()
	var vbuf []parquet.Value
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		vr := p.Values()
		if ir, ok := vr.(parquet.Int64Reader); ok {
			for {
				if len(out) == cap(out) {
					out = slices.Grow(out, max(1024, cap(out)))
				}
				k, err := ir.ReadInt64s(out[len(out):cap(out)])
				out = out[:len(out)+k]
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					parquet.Release(p)
					return out, err
				}
				if k == 0 {
					parquet.Release(p)
					return out, io.ErrNoProgress
				}
			}
		} else {
			if vbuf == nil {
				vbuf = make([]parquet.Value, 1024)
			}
			for {
				k, err := vr.ReadValues(vbuf)
				for _, v := range vbuf[:k] {
					out = append(out, v.Int64())
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					parquet.Release(p)
					return out, err
				}
				if k == 0 {
					parquet.Release(p)
					return out, io.ErrNoProgress
				}
			}
		}
		parquet.Release(p)
	}
}
