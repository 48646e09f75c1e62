package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// BuildConfig bounds index builds.
type BuildConfig struct {
	// MaxBitmapKeys is the most distinct values a bitmap segment may hold
	// (default 65536): past it the column is not low-cardinality.
	MaxBitmapKeys int `yaml:"max_bitmap_keys"`
}

func (c BuildConfig) maxBitmapKeys() int {
	if c.MaxBitmapKeys <= 0 {
		return 1 << 16
	}
	return c.MaxBitmapKeys
}

// scanColumn calls fn with the offset and value of every live row of
// fragment f in column field, reading only that column, page by page.
func scanColumn(ctx context.Context, b storage.Bucket, f *pb.Fragment, field *pb.Field, fn func(off uint32, v parquet.Value) error) error {
	del, err := table.ReadDeletionFile(ctx, b, f.DeletionFile)
	if err != nil {
		return err
	}
	key := f.GetDataFile().GetPath()
	pf, err := openParquet(ctx, b, key, int64(f.GetDataFile().GetSizeBytes()), table.ErrCorrupt)
	if err != nil {
		return fmt.Errorf("fragment %d: %w", f.Id, err)
	}
	defer pf.Close()
	leaf, ok := pf.Schema().Lookup(field.Name)
	if !ok {
		return fmt.Errorf("fragment %d: data file %s: %w: no column %q", f.Id, key, table.ErrCorrupt, field.Name)
	}
	var off uint64
	buf := make([]parquet.Value, table.ScanBatch)
	for _, rg := range pf.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := table.ReadColumnValues(rg.ColumnChunks()[leaf.ColumnIndex], buf, func(vs []parquet.Value) error {
			for _, v := range vs {
				o := off
				off++
				if o >= f.PhysicalRows {
					return nil // counted below
				}
				if del.Contains(uint32(o)) {
					continue
				}
				if err := fn(uint32(o), v); err != nil {
					return err
				}
			}
			return nil
		}, nil)
		if err != nil {
			if errors.Is(err, ErrBadSpec) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("fragment %d: read %s: %w", f.Id, key, err)
		}
	}
	if off != f.PhysicalRows {
		return fmt.Errorf("fragment %d: data file %s: %w: %d rows, manifest says %d", f.Id, key, table.ErrCorrupt, off, f.PhysicalRows)
	}
	return nil
}

// entries are (key, address) pairs gathered by a btree build, keys in one
// arena (16 bytes per entry plus the key bytes).
type entries struct {
	arena []byte
	list  []entry
}

type entry struct {
	off, n uint32
	addr   uint64
}

func (e *entries) add(k []byte, addr uint64) error {
	if uint64(len(e.arena))+uint64(len(k)) > 1<<32-1 {
		return fmt.Errorf("index build: more than 4 GiB of keys")
	}
	e.list = append(e.list, entry{off: uint32(len(e.arena)), n: uint32(len(k)), addr: addr})
	e.arena = append(e.arena, k...)
	return nil
}

func (e *entries) key(x entry) []byte { return e.arena[x.off : x.off+x.n] }

func (e *entries) sort() {
	slices.SortFunc(e.list, func(a, b entry) int {
		if c := bytes.Compare(e.key(a), e.key(b)); c != 0 {
			return c
		}
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
}

// BuildSegment writes a segment of logical index spec over frags (live rows
// only; null values are not indexed) and returns its metadata, built as of
// manifest m. Nothing is committed: the caller commits or removes
// SegmentFiles(seg).
func BuildSegment(ctx context.Context, b storage.Bucket, m *pb.Manifest, spec Spec, frags []*pb.Fragment, cfg BuildConfig) (*pb.IndexMetadata, error) {
	field, err := spec.Validate(m.Schema)
	if err != nil {
		return nil, err
	}
	id := uuid.NewString()
	cover := roaring.New()
	w, err := newSegWriter(ctx, b, spec.Type, id, cfg)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.abort()
		}
	}()
	var es entries
	var bb *bitmapBuilder
	if spec.Type == TypeBitmap {
		bb = w.(*bitmapSegWriter).bb
	}
	var kbuf []byte
	prog := progress.From(ctx)
	for _, f := range frags {
		cover.Add(f.Id)
		err := scanColumn(ctx, b, f, field, func(off uint32, v parquet.Value) error {
			if v.IsNull() {
				return nil
			}
			var err error
			kbuf, err = appendValueKey(kbuf[:0], field.Type, v)
			if err != nil {
				return err
			}
			addr := table.RowAddr(f.Id, off)
			if bb != nil {
				return bb.add(kbuf, addr)
			}
			return es.add(kbuf, addr)
		})
		if err != nil {
			return nil, fmt.Errorf("build index %q: %w", spec.Name, err)
		}
		prog.Add(int64(f.PhysicalRows), int64(f.GetDataFile().GetSizeBytes()))
	}
	if spec.Type == TypeBTree {
		es.sort()
		for _, e := range es.list {
			if err := w.add(es.key(e), []uint64{e.addr}); err != nil {
				return nil, err
			}
		}
	}
	file, n, size, err := w.finish(ctx)
	if err != nil {
		return nil, fmt.Errorf("build index %q: %w", spec.Name, err)
	}
	ok = true
	return newMeta(spec.Name, spec.Type, id, field, m.Version, cover, file, n, size)
}

// appendValueKey encodes a Parquet value of field type t without building
// a table.Row.
func appendValueKey(dst []byte, t pb.FieldType, v parquet.Value) ([]byte, error) {
	switch t {
	case pb.FieldType_FIELD_TYPE_INT64, pb.FieldType_FIELD_TYPE_TIMESTAMP:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int64())^(1<<63)), nil
	case pb.FieldType_FIELD_TYPE_STRING, pb.FieldType_FIELD_TYPE_BYTES:
		return append(dst, v.ByteArray()...), nil
	}
	k, err := EncodeKey(t, table.DecodeValue(t, v))
	if err != nil {
		return nil, err
	}
	return append(dst, k...), nil
}

// Create builds logical index spec over every fragment of the head and
// commits it (CreateIndex, read version = the head it was built from).
func Create(ctx context.Context, t *ops.Table, spec Spec, cfg BuildConfig) (*commit.Result, error) {
	head, err := table.ReadLatest(ctx, t.Bucket)
	if err != nil {
		return nil, err
	}
	if _, err := spec.Validate(head.Schema); err != nil {
		return nil, err
	}
	if table.FindIndex(head, spec.Name) != nil {
		return nil, fmt.Errorf("%w: index %q already exists", ErrBadSpec, spec.Name)
	}
	seg, err := BuildSegment(ctx, t.Bucket, head, spec, head.Fragments, cfg)
	if err != nil {
		return nil, err
	}
	// The name was free at the read version; CreatedNames makes that a
	// precondition of the commit too (a concurrent create of the name
	// conflicts).
	txn := t.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{seg}, CreatedNames: []string{spec.Name}}}
	res, err := t.CommitOrClean(ctx, txn, SegmentFiles(seg))
	if errors.Is(err, commit.ErrRetryable) {
		if now, rerr := table.ReadLatest(ctx, t.Bucket); rerr == nil && table.FindIndex(now, spec.Name) != nil {
			return nil, fmt.Errorf("%w: index %q was created by another writer while this one was built: %w", ErrBadSpec, spec.Name, err)
		}
	}
	return res, err
}

// SpecOf returns the spec of an existing logical index.
func SpecOf(m *pb.Manifest, name string) (Spec, error) {
	segs, err := Segments(m, name)
	if err != nil {
		return Spec{}, err
	}
	f, err := fieldOf(m.Schema, segs[0])
	if err != nil {
		return Spec{}, err
	}
	return Spec{Name: name, Column: f.Name, Type: segs[0].Type}, nil
}

// CatchUpSegment builds a delta segment of logical index name over the
// fragments of m it does not cover, or returns nil when it covers them all.
func CatchUpSegment(ctx context.Context, b storage.Bucket, m *pb.Manifest, name string, cfg BuildConfig) (*pb.IndexMetadata, error) {
	spec, err := SpecOf(m, name)
	if err != nil {
		return nil, err
	}
	ids, err := Unindexed(m, name)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	frags := make([]*pb.Fragment, 0, len(ids))
	for _, id := range ids {
		frags = append(frags, table.FragmentByID(m, id))
	}
	return BuildSegment(ctx, b, m, spec, frags, cfg)
}
