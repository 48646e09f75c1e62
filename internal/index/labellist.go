package index

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// A label-list segment (index_version 1) is a bitmap segment over the
// elements of a list column: bitmap_page_lookup.lance with keys of the
// list's item type (a null key for null elements) and one RowAddrTreeMap
// per key, plus the rows whose list itself is null in a global buffer that
// schema metadata lance:label_list_nulls numbers. LanceDB answers
// array_has_any / array_has_all from the keys and marks the null lists
// null (so NOT array_has_any(...) does not return them): a segment that
// lost its null rows would change those answers, so they are carried
// through every remap, catch-up and rebuild.
const (
	// TypeURLLabelList is the label-list index's details type.
	TypeURLLabelList = "/lance.table.LabelListIndexDetails"
	// labelListNullsKey names the global buffer of the null lists.
	labelListNullsKey = "lance:label_list_nulls"
	// labelListVersion is the index version LanceDB 0.39 writes.
	labelListVersion = 1
)

// LabelList is a decoded label-list segment.
type LabelList struct {
	Bitmap
	// Nulls are the rows whose list is null; HasNulls is false for a
	// segment without the buffer (index version 0 did not record them).
	Nulls    *RowAddrMap
	HasNulls bool
	// KeyField is the file's keys field (the list's item type).
	KeyField *pb.Field
}

// ReadLabelList decodes a label-list segment.
func ReadLabelList(r Reader) (*LabelList, error) {
	f, err := openFile(r, BitmapLookupFile)
	if err != nil {
		return nil, err
	}
	bm, err := readBitmapFile(f)
	if err != nil {
		return nil, err
	}
	out := &LabelList{Bitmap: *bm, Nulls: NewRowAddrMap()}
	if fs := f.Desc.GetSchema().GetFields(); len(fs) > 0 {
		out.KeyField = proto.Clone(fs[0]).(*pb.Field)
	}
	if s, ok := f.Desc.GetSchema().GetMetadata()[labelListNullsKey]; ok {
		out.HasNulls = true
		i, err := strconv.Atoi(string(s))
		if err != nil || i < 1 {
			return nil, formatErr("%s: %s=%q is not a global buffer number", BitmapLookupFile, labelListNullsKey, s)
		}
		b, err := f.GlobalBuffer(i)
		if err != nil {
			return nil, formatErr("%s: null lists: %v", BitmapLookupFile, err)
		}
		if out.Nulls, err = DecodeRowAddrMap(b); err != nil {
			return nil, fmt.Errorf("%s: null lists: %w", BitmapLookupFile, err)
		}
	}
	return out, nil
}

// Entries expands the segment into (element, row address) pairs in btree
// order, the null lists' rows in ListNulls, ascending.
func (l *LabelList) Entries(full func(frag uint32) (uint64, bool)) (*Entries, error) {
	e, err := l.Bitmap.Entries(full)
	if err != nil {
		return nil, err
	}
	if e.ListNulls, err = l.Nulls.Addrs(full); err != nil {
		return nil, fmt.Errorf("null lists: %w", err)
	}
	e.Keys = l.KeyField
	return e, nil
}

// WriteLabelList writes a label-list segment of the entries to w
// (bitmap_page_lookup.lance), returning its size: the keys typed as
// e.Keys, one bitmap per distinct element (null first, then ascending)
// and e.ListNulls in global buffer 1, as LanceDB writes one.
func WriteLabelList(w io.Writer, e *Entries) (int64, error) {
	if e.Keys == nil {
		return 0, fmt.Errorf("label list: no keys field (the list's item type)")
	}
	nulls := NewRowAddrMap()
	for _, a := range e.ListNulls {
		nulls.Add(a)
	}
	nb, err := nulls.MarshalBinary()
	if err != nil {
		return 0, err
	}
	return writeBitmapFile(w, e.Keys, e, map[string][]byte{labelListNullsKey: []byte("1")}, [][]byte{nb})
}

// listItemField is the item field of the top-level list field f.
func listItemField(fields []*pb.Field, f *pb.Field) (*pb.Field, error) {
	if f.GetLogicalType() != "list" && f.GetLogicalType() != "large_list" {
		return nil, fmt.Errorf("column %q is a %s, not a list", f.GetName(), f.GetLogicalType())
	}
	for _, c := range fields {
		if c.GetParentId() == f.GetId() {
			if _, err := fieldType(c); err != nil {
				return nil, fmt.Errorf("column %q: items: %w", f.GetName(), err)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("column %q: the schema has no item field", f.GetName())
}

// CollectLabels reads the label-list content of the given fragments of a
// version: one entry per element of each live row's list (null elements
// as null values), in fragment, offset, element order, and the live rows
// whose list is null.
func CollectLabels(ctx context.Context, b storage.Bucket, version uint64, field *pb.Field, frags *roaring.Bitmap) (*Entries, error) {
	tbl, err := scan.Open(ctx, b, scan.Options{Version: version, Columns: []string{field.GetName()}})
	if err != nil {
		return nil, err
	}
	if tbl.Columns[0].Field.GetId() != field.GetId() {
		return nil, fmt.Errorf("column %q of version %d is field %d, the index's %d", field.GetName(), version, tbl.Columns[0].Field.GetId(), field.GetId())
	}
	item, err := listItemField(tbl.Manifest.GetFields(), tbl.Columns[0].Field)
	if err != nil {
		return nil, err
	}
	it, _ := fieldType(item)
	m := proto.Clone(tbl.Manifest).(*pb.Manifest)
	m.Fragments = slices.DeleteFunc(m.Fragments, func(f *pb.DataFragment) bool { return !frags.Contains(uint32(f.GetId())) })
	tbl.Manifest = m
	out := &Entries{Keys: item}
	var parts []*file.Array
	rep := progress.From(ctx)
	err = tbl.Batches(ctx, func(bt *scan.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.Add(int64(len(bt.Live)), 0)
		col := bt.Columns[0]
		if col != nil && ((col.Type.Kind != file.KindList && col.Type.Kind != file.KindLargeList) || len(col.Children) != 1 || col.Children[0].Type != it) {
			return fmt.Errorf("fragment %d: column %q decodes as %s, the schema says a list of %s", bt.Fragment, field.GetName(), col.Type, it)
		}
		var take []int
		for _, r := range bt.Live {
			addr := meta.RowAddr(uint32(bt.Fragment), uint32(bt.Offset)+uint32(r))
			if col == nil || !col.IsValid(r) {
				out.ListNulls = append(out.ListNulls, addr)
				continue
			}
			for e := col.Offsets[r]; e < col.Offsets[r+1]; e++ {
				take = append(take, int(e))
				out.Addrs = append(out.Addrs, addr)
			}
		}
		if len(take) > 0 {
			parts = append(parts, col.Children[0].Take(take))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Values = concat(it, parts)
	return out, nil
}

// collectFor reads the content a segment of kind holds over frags:
// CollectLabels for a label list, Collect otherwise.
func collectFor(kind string) func(context.Context, storage.Bucket, uint64, *pb.Field, *roaring.Bitmap) (*Entries, error) {
	if kind == KindLabelList {
		return CollectLabels
	}
	return Collect
}

// checkIndexable checks that an index of kind can be built over the
// top-level field f of a schema.
func checkIndexable(kind string, fields []*pb.Field, f *pb.Field) error {
	if kind == KindLabelList {
		_, err := listItemField(fields, f)
		return err
	}
	_, err := fieldType(f)
	return err
}
