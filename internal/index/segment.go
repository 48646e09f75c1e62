package index

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Spec defines a logical index.
type Spec struct {
	Name   string `json:"name"`
	Column string `json:"column"`
	Type   string `json:"type"`
}

// Validate checks the spec against a schema and returns the indexed field.
func (s Spec) Validate(schema *pb.Schema) (*pb.Field, error) {
	switch {
	case strings.TrimSpace(s.Name) == "":
		return nil, fmt.Errorf("%w: empty index name", ErrBadSpec)
	case strings.HasPrefix(s.Name, "__"):
		return nil, fmt.Errorf("%w: index names starting with \"__\" are reserved for system indices", ErrBadSpec)
	case s.Type != TypeBTree && s.Type != TypeBitmap:
		return nil, fmt.Errorf("%w: unknown index type %q (want %s or %s)", ErrBadSpec, s.Type, TypeBTree, TypeBitmap)
	}
	f := table.FieldByName(schema, s.Column)
	if f == nil {
		names := make([]string, 0, len(schema.GetFields()))
		for _, f := range schema.GetFields() {
			names = append(names, f.Name)
		}
		return nil, fmt.Errorf("%w: the table has no column %q (columns: %s)", ErrBadSpec, s.Column, strings.Join(names, ", "))
	}
	return f, nil
}

// Segments returns the segments of logical index name, in manifest order.
func Segments(m *pb.Manifest, name string) ([]*pb.IndexMetadata, error) {
	var out []*pb.IndexMetadata
	for _, ix := range m.GetIndices() {
		if ix.Name == name && !table.IsSystemIndex(ix) {
			out = append(out, ix)
		}
	}
	if len(out) == 0 {
		names := Names(m)
		if len(names) == 0 {
			return nil, fmt.Errorf("%w %q: the table has no indices", ErrNoIndex, name)
		}
		return nil, fmt.Errorf("%w %q (indices: %s)", ErrNoIndex, name, strings.Join(names, ", "))
	}
	return out, nil
}

// Names lists the logical (non-system) indices of m, sorted.
func Names(m *pb.Manifest) []string {
	var out []string
	for _, ix := range m.GetIndices() {
		if !table.IsSystemIndex(ix) {
			out = append(out, ix.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fieldOf returns the field a segment indexes.
func fieldOf(schema *pb.Schema, seg *pb.IndexMetadata) (*pb.Field, error) {
	if len(seg.FieldIds) != 1 {
		return nil, corruptf("segment %s of %q indexes %d fields, want 1", seg.Uuid, seg.Name, len(seg.FieldIds))
	}
	i := table.FieldIndex(schema, seg.FieldIds[0])
	if i < 0 {
		return nil, fmt.Errorf("%w: index %q is on field id %d, which the schema does not have", ErrBadSpec, seg.Name, seg.FieldIds[0])
	}
	return schema.Fields[i], nil
}

// Field returns the field logical index name covers.
func Field(m *pb.Manifest, name string) (*pb.Field, error) {
	segs, err := Segments(m, name)
	if err != nil {
		return nil, err
	}
	return fieldOf(m.Schema, segs[0])
}

func segmentFile(seg *pb.IndexMetadata) (string, error) {
	files := seg.GetScalar().GetFiles()
	if len(files) != 1 {
		return "", corruptf("segment %s of %q lists %d files, want 1", seg.Uuid, seg.Name, len(files))
	}
	if !strings.HasPrefix(files[0], table.IndexDir(seg.Uuid)) {
		return "", corruptf("segment %s of %q: file %s is outside its directory", seg.Uuid, seg.Name, files[0])
	}
	return files[0], nil
}

// Coverage is a segment's fragment bitmap after the load-time remap through
// versions (old fragments replaced by the new ones). An absent bitmap is returned as nil (unknown).
func Coverage(seg *pb.IndexMetadata, versions []*pb.FragReuseVersion) (*roaring.Bitmap, error) {
	if seg.FragmentBitmap == nil {
		return nil, nil
	}
	bm, err := fri.DecodeBitmap32(seg.FragmentBitmap)
	if err != nil {
		return nil, fmt.Errorf("index %q segment %s: fragment bitmap: %w", seg.Name, seg.Uuid, err)
	}
	return fri.RemapBitmap(bm, seg.DatasetVersion, versions), nil
}

// Covered is the union of the load-time coverage of a logical index's
// segments.
func Covered(segs []*pb.IndexMetadata, versions []*pb.FragReuseVersion) (*roaring.Bitmap, error) {
	out := roaring.New()
	for _, s := range segs {
		c, err := Coverage(s, versions)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out.Or(c)
		}
	}
	return out, nil
}

// Unindexed lists the fragments of m that logical index name does not
// cover (after the load-time remap): what a catch-up segment must index.
func Unindexed(m *pb.Manifest, name string) ([]uint32, error) {
	segs, err := Segments(m, name)
	if err != nil {
		return nil, err
	}
	cov, err := Covered(segs, table.FragReuse(m).GetVersions())
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, f := range m.Fragments {
		if !cov.Contains(f.Id) {
			out = append(out, f.Id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// liveSet is the fragment ids of m.
func liveSet(m *pb.Manifest) *roaring.Bitmap {
	bm := roaring.New()
	for _, f := range m.Fragments {
		bm.Add(f.Id)
	}
	return bm
}

// segWriter writes one new segment's file.
type segWriter interface {
	// add appends the addresses of key. REQUIRES: keys in ascending order.
	add(key []byte, addrs []uint64) error
	// finish publishes the file (still unreferenced until a commit).
	finish(ctx context.Context) (file string, entries, size uint64, err error)
	abort()
}

func newSegWriter(ctx context.Context, b storage.Bucket, typ, uuid string, cfg BuildConfig) (segWriter, error) {
	switch typ {
	case TypeBTree:
		w, err := newBTreeWriter(ctx, b, table.IndexDir(uuid)+btreeFileName)
		if err != nil {
			return nil, err
		}
		return &btreeSegWriter{w: w}, nil
	case TypeBitmap:
		return &bitmapSegWriter{b: b, key: table.IndexDir(uuid) + bitmapFileName, bb: newBitmapBuilder(cfg.maxBitmapKeys())}, nil
	}
	return nil, fmt.Errorf("%w: unknown index type %q", ErrBadSpec, typ)
}

type btreeSegWriter struct{ w *btreeWriter }

func (s *btreeSegWriter) add(k []byte, addrs []uint64) error {
	for _, a := range addrs {
		if err := s.w.add(k, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *btreeSegWriter) finish(context.Context) (string, uint64, uint64, error) {
	n, err := s.w.close()
	return s.w.key, s.w.n, uint64(n), err
}

func (s *btreeSegWriter) abort() { s.w.abort() }

type bitmapSegWriter struct {
	b   storage.Bucket
	key string
	bb  *bitmapBuilder
}

func (s *bitmapSegWriter) add(k []byte, addrs []uint64) error { return s.bb.add(k, addrs...) }

func (s *bitmapSegWriter) finish(ctx context.Context) (string, uint64, uint64, error) {
	data, entries, err := s.bb.encode()
	if err != nil {
		return "", 0, 0, err
	}
	if err := s.b.Put(ctx, s.key, data); err != nil {
		return "", 0, 0, fmt.Errorf("write %s: %w", s.key, err)
	}
	return s.key, entries, uint64(len(data)), nil
}

func (s *bitmapSegWriter) abort() {}

// newMeta describes a freshly written segment.
func newMeta(name, typ, uuid string, field *pb.Field, datasetVersion uint64, cover *roaring.Bitmap, file string, entries, size uint64) (*pb.IndexMetadata, error) {
	cover.RunOptimize()
	bm, err := fri.EncodeBitmap32(cover)
	if err != nil {
		return nil, err
	}
	return &pb.IndexMetadata{
		Uuid: uuid, Name: name, Type: typ, FieldIds: []int32{field.Id},
		DatasetVersion: datasetVersion, FragmentBitmap: bm,
		Details: &pb.IndexMetadata_Scalar{Scalar: &pb.ScalarIndexDetails{Files: []string{file}, NumEntries: entries, SizeBytes: size}},
	}, nil
}

// SegmentFiles lists the files of segments (for cleanup of an uncommitted
// build).
func SegmentFiles(segs ...*pb.IndexMetadata) []string {
	var out []string
	for _, s := range segs {
		out = append(out, s.GetScalar().GetFiles()...)
	}
	return out
}

// CheckSegment opens a segment's file and checks its frame: a btree's
// Parquet footer and columns, a bitmap file's checksum and entries. A
// caller about to commit something irreversible (a fragment-id
// reservation) checks first, so that a corrupt segment fails the job before
// it changes anything.
func CheckSegment(ctx context.Context, b storage.Bucket, seg *pb.IndexMetadata) error {
	file, err := segmentFile(seg)
	if err != nil {
		return err
	}
	switch seg.Type {
	case TypeBTree:
		t, err := openBTree(ctx, b, file)
		if err != nil {
			return fmt.Errorf("index %q segment %s: %w", seg.Name, seg.Uuid, err)
		}
		return t.Close()
	case TypeBitmap:
		if _, err := readBitmapFile(ctx, b, file); err != nil {
			return fmt.Errorf("index %q segment %s: %w", seg.Name, seg.Uuid, err)
		}
		return nil
	}
	return corruptf("segment %s of %q has unknown type %q", seg.Uuid, seg.Name, seg.Type)
}
