package index

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// Kinds of segment this package builds (meta.IndexKind's names).
const (
	KindBTree  = "btree"
	KindBitmap = "bitmap"
)

// fieldType is the file type of a manifest field.
func fieldType(f *pb.Field) (file.DataType, error) {
	w, err := file.NewWriter(io.Discard, []*pb.Field{{Name: f.GetName(), Id: 0, ParentId: -1, LogicalType: f.GetLogicalType(), Nullable: true}}, file.WriterOptions{})
	if err != nil {
		return file.DataType{}, fmt.Errorf("column %q: %w", f.GetName(), err)
	}
	t := w.Schema().Fields[0].Type
	return t, Indexable(t)
}

// Collect reads the live rows (deletion vectors applied) of the given
// fragments of a version: the field's values and their row addresses
// (fragment<<32 | offset), in fragment then offset order.
func Collect(ctx context.Context, b storage.Bucket, version uint64, field *pb.Field, frags *roaring.Bitmap) (*Entries, error) {
	t, err := fieldType(field)
	if err != nil {
		return nil, err
	}
	tbl, err := scan.Open(ctx, b, scan.Options{Version: version, Columns: []string{field.GetName()}})
	if err != nil {
		return nil, err
	}
	if tbl.Columns[0].Field.GetId() != field.GetId() {
		return nil, fmt.Errorf("column %q of version %d is field %d, the index's %d", field.GetName(), version, tbl.Columns[0].Field.GetId(), field.GetId())
	}
	m := proto.Clone(tbl.Manifest).(*pb.Manifest)
	m.Fragments = slices.DeleteFunc(m.Fragments, func(f *pb.DataFragment) bool { return !frags.Contains(uint32(f.GetId())) })
	tbl.Manifest = m
	var parts []*file.Array
	var addrs []uint64
	// The rows read count in the caller's progress phase, per batch.
	rep := progress.From(ctx)
	err = tbl.Batches(ctx, func(bt *scan.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.Add(int64(len(bt.Live)), 0)
		col := bt.Columns[0]
		if col == nil {
			col = nullArray(t, bt.NumRows)
		}
		if col.Type != t {
			return fmt.Errorf("fragment %d: column %q decodes as %s, the schema says %s", bt.Fragment, field.GetName(), col.Type, t)
		}
		if len(bt.Live) == bt.NumRows {
			parts = append(parts, col)
		} else {
			parts = append(parts, col.Take(bt.Live))
		}
		for _, r := range bt.Live {
			addrs = append(addrs, meta.RowAddr(uint32(bt.Fragment), uint32(bt.Offset)+uint32(r)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Entries{Values: concat(t, parts), Addrs: addrs}, nil
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

// Written is a segment's files in the bucket.
type Written struct {
	UUID  *pb.UUID
	Files []*pb.IndexFile
	// Keys are the objects written (also on error, for cleanup).
	Keys []string
}

// newWritten starts a segment under a new uuid; put writes one of its
// files whole and records it (its key too when the put fails, for
// cleanup).
func newWritten(ctx context.Context, b storage.Bucket) (*Written, func(name string, data []byte) error) {
	u, id := meta.NewUUID()
	w := &Written{UUID: u}
	return w, func(name string, data []byte) error {
		key := meta.IndexDir(id) + name
		w.Keys = append(w.Keys, key)
		if err := b.Put(ctx, key, data); err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		w.Files = append(w.Files, &pb.IndexFile{Path: name, SizeBytes: uint64(len(data))})
		return nil
	}
}

// remappedMetadata is the metadata of the segment w remapped from m: m's
// name, fields, details and index version, the new bitmap and dataset
// version of o, and m's creation time (Lance's remap keeps it).
func remappedMetadata(m *pb.IndexMetadata, kind string, o RemapOptions, w *Written) (*pb.IndexMetadata, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	nm, err := SegmentMetadata(m.GetName(), m.GetFields(), kind, m, o.DatasetVersion, o.Bitmap, w, now)
	if err != nil {
		return nil, err
	}
	if m.CreatedAt != nil {
		nm.CreatedAt = proto.Uint64(m.GetCreatedAt())
	}
	return nm, nil
}

// WriteSegment writes a segment of kind over the entries of the table
// field tf under _indices/{uuid}/ with a new uuid.
func WriteSegment(ctx context.Context, b storage.Bucket, kind string, tf *pb.Field, e *Entries) (*Written, error) {
	u, id := meta.NewUUID()
	out := &Written{UUID: u}
	dir := meta.IndexDir(id)
	put := func(name string, write func(io.Writer) error) error {
		key := dir + name
		w, err := b.NewWriter(ctx, key)
		if err != nil {
			return err
		}
		out.Keys = append(out.Keys, key)
		cw := &countingWriter{w: w}
		if err := write(cw); err != nil {
			_ = w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		out.Files = append(out.Files, &pb.IndexFile{Path: name, SizeBytes: uint64(cw.n)})
		return nil
	}
	var err error
	switch kind {
	case KindBTree:
		// Both files are encoded in memory first: page_lookup is known only
		// once page_data is written, and a failed encode leaves nothing.
		var data, lookup memBuf
		if _, _, err = WriteBTree(&data, &lookup, tf, e); err == nil {
			if err = put(BTreeDataFile, data.writeTo); err == nil {
				err = put(BTreeLookupFile, lookup.writeTo)
			}
		}
	case KindBitmap:
		err = put(BitmapLookupFile, func(w io.Writer) error { _, err := WriteBitmap(w, tf, e); return err })
	case KindLabelList:
		err = put(BitmapLookupFile, func(w io.Writer) error { _, err := WriteLabelList(w, e); return err })
	default:
		err = fmt.Errorf("compactord does not build %s indexes", kind)
	}
	slices.SortFunc(out.Files, func(a, b *pb.IndexFile) int { return strings.Compare(a.GetPath(), b.GetPath()) })
	return out, err
}

type memBuf struct{ b []byte }

func (m *memBuf) Write(p []byte) (int, error) { m.b = append(m.b, p...); return len(p), nil }
func (m *memBuf) writeTo(w io.Writer) error   { _, err := w.Write(m.b); return err }

// SegmentMetadata is the IndexMetadata of a new segment as LanceDB writes
// one: the logical index's name, fields, details and index version (from
// like, an existing segment, or the kind's empty details), the version its
// row addresses are valid at, the fragments it covers, its files, and the
// creation time in milliseconds.
func SegmentMetadata(name string, fields []int32, kind string, like *pb.IndexMetadata, datasetVersion uint64, frags *roaring.Bitmap, w *Written, now time.Time) (*pb.IndexMetadata, error) {
	ix := &pb.IndexMetadata{
		Uuid:           w.UUID,
		Fields:         slices.Clone(fields),
		Name:           name,
		DatasetVersion: datasetVersion,
		FragmentBitmap: meta.EncodeBitmap(frags.Clone()),
		IndexVersion:   proto.Int32(0),
		CreatedAt:      proto.Uint64(uint64(now.UnixMilli())),
		Files:          w.Files,
	}
	switch {
	case like != nil:
		if err := meta.CheckIndexVersion(like); err != nil {
			return nil, err
		}
		if like.GetIndexDetails() != nil {
			ix.IndexDetails = proto.Clone(like.GetIndexDetails()).(*anypb.Any)
		}
		ix.IndexVersion = proto.Int32(like.GetIndexVersion())
	case kind == KindBTree:
		ix.IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLBTree}
	case kind == KindBitmap:
		ix.IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLBitmap}
	case kind == KindLabelList:
		ix.IndexDetails = &anypb.Any{TypeUrl: TypeURLLabelList}
		ix.IndexVersion = proto.Int32(labelListVersion)
	default:
		return nil, fmt.Errorf("compactord does not build %s indexes", kind)
	}
	return ix, nil
}
