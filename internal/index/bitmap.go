package index

import (
	"fmt"
	"io"
	stdmaps "maps"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// Bitmap is a decoded bitmap segment: key i's rows are Maps[i].
type Bitmap struct {
	Keys *file.Array
	Maps []*RowAddrMap
}

// WriteBitmap writes a bitmap segment of the entries over a column of the
// table's field tf to w (bitmap_page_lookup.lance), returning its size.
// Keys are written in ascending order, the null key (if any) first.
func WriteBitmap(w io.Writer, tf *lancepb.Field, e *Entries) (int64, error) {
	return writeBitmapFile(w, tf, e, nil, nil)
}

// writeBitmapFile writes bitmap_page_lookup.lance with extra schema
// metadata and global buffers (a label list's null rows).
func writeBitmapFile(w io.Writer, tf *lancepb.Field, e *Entries, extra map[string][]byte, globals [][]byte) (int64, error) {
	if err := Indexable(e.Values.Type); err != nil {
		return 0, err
	}
	s := e.Sorted()
	var firsts []int
	var maps []*RowAddrMap
	for i := 0; i < s.Len(); i++ {
		if i == 0 || compareAt(s.Values, i-1, i) != 0 {
			firsts = append(firsts, i)
			maps = append(maps, NewRowAddrMap())
		}
		maps[len(maps)-1].Add(s.Addrs[i])
	}
	bm := &file.Array{Type: file.DataType{Kind: file.KindBinary}, Len: len(maps), Offsets: make([]int64, 1, len(maps)+1)}
	for _, m := range maps {
		b, err := m.MarshalBinary()
		if err != nil {
			return 0, err
		}
		bm.Values = append(bm.Values, b...)
		bm.Offsets = append(bm.Offsets, int64(len(bm.Values)))
	}
	md := map[string][]byte{"lance:index_stats": fmt.Appendf(nil, `{"num_bitmaps":%d}`, len(maps))}
	stdmaps.Copy(md, extra)
	n, err := writeFileWith(w, file.V2_2, globals, []*lancepb.Field{indexField(tf, "keys", 0, "", true), indexField(nil, "bitmaps", 1, "binary", true)},
		md, []*file.Array{s.Values.Take(firsts), bm})
	if err != nil {
		return 0, fmt.Errorf("bitmap %s: %w", BitmapLookupFile, err)
	}
	return n, nil
}

// ReadBitmap decodes a bitmap segment.
func ReadBitmap(r Reader) (*Bitmap, error) {
	f, err := openFile(r, BitmapLookupFile)
	if err != nil {
		return nil, err
	}
	return readBitmapFile(f)
}

func readBitmapFile(f *file.File) (*Bitmap, error) {
	if len(f.Schema.Fields) != 2 {
		return nil, formatErr("%s has %d columns, want 2", BitmapLookupFile, len(f.Schema.Fields))
	}
	if _, err := fieldOf(f, "keys", 0, indexable); err != nil {
		return nil, err
	}
	if _, err := fieldOf(f, "bitmaps", 1, func(t file.DataType) bool { return t.Kind == file.KindBinary || t.Kind == file.KindLargeBinary }); err != nil {
		return nil, err
	}
	b, err := readColumns(f, BitmapLookupFile)
	if err != nil {
		return nil, err
	}
	out := &Bitmap{Keys: b.Columns[0]}
	nulls := 0
	for i := 0; i < b.NumRows; i++ {
		if !out.Keys.IsValid(i) {
			if nulls++; nulls > 1 {
				return nil, formatErr("%s: two null keys", BitmapLookupFile)
			}
		}
		if !b.Columns[1].IsValid(i) {
			return nil, formatErr("%s: key %d has a null bitmap", BitmapLookupFile, i)
		}
		m, err := DecodeRowAddrMap(b.Columns[1].Bytes(i))
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", BitmapLookupFile, i, err)
		}
		out.Maps = append(out.Maps, m)
	}
	return out, nil
}

// Entries expands the segment into (value, row address) pairs in btree
// order. full gives the row count of a fragment a bitmap holds whole.
func (b *Bitmap) Entries(full func(frag uint32) (uint64, bool)) (*Entries, error) {
	var rows []int
	var addrs []uint64
	for i, m := range b.Maps {
		as, err := m.Addrs(full)
		if err != nil {
			return nil, err
		}
		for range as {
			rows = append(rows, i)
		}
		addrs = append(addrs, as...)
	}
	e := &Entries{Values: b.Keys.Take(rows), Addrs: addrs}
	return e.Sorted(), nil
}
