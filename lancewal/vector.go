package lancewal

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// A maintained vector index's copy in a generation is what LanceDB's
// MemWAL flush writes for it (vector.BuildGenerationCopy): an IVF_HNSW_SQ
// segment over the generation's own vectors with the base index's
// distance type, whatever the base index's type. LanceDB's LSM vector
// search reads flushed generations through that copy only, so a
// generation without it would hide its rows from every vector search.

// vectorCopy is a maintained vector index the writer copies.
type vectorCopy struct {
	name     string
	col      int // index into state.cols
	distance string
	like     *pb.IndexMetadata
}

// isVectorIndex reports whether the maintained index name is a vector
// index of the table.
func isVectorIndex(st *state, name string) bool {
	segs := meta.FindIndex(st.read.Indices, name)
	return len(segs) > 0 && meta.IndexKind(segs[0]) == vector.Kind
}

// maintainedVector checks a maintained vector index: one float32 vector
// column, and a distance type the copy is written for.
func maintainedVector(st *state, name string) (*vectorCopy, error) {
	ix := meta.FindIndex(st.read.Indices, name)[0]
	d, err := vector.DecodeDetails(ix.GetIndexDetails())
	if err != nil {
		return nil, fmt.Errorf("lancewal: maintained index %q: %w", name, err)
	}
	dist := vector.DistanceName(d.GetMetricType())
	ok := false
	for _, g := range vector.GenerationDistances {
		ok = ok || g == dist
	}
	if !ok {
		return nil, fmt.Errorf("lancewal: maintained vector index %q has distance type %q; the writer copies l2, cosine and dot indexes", name, dist)
	}
	if len(ix.GetFields()) != 1 {
		return nil, fmt.Errorf("lancewal: maintained index %q covers %d fields, want 1", name, len(ix.GetFields()))
	}
	for i, c := range st.cols {
		if c.field.GetId() != ix.GetFields()[0] {
			continue
		}
		if !c.isVector() {
			return nil, fmt.Errorf("lancewal: maintained vector index %q is on column %q of type %s, not a float32 vector", name, c.field.GetName(), c.field.GetLogicalType())
		}
		return &vectorCopy{name: name, col: i, distance: dist, like: ix}, nil
	}
	return nil, fmt.Errorf("lancewal: maintained index %q is on field %d, which is not a column", name, ix.GetFields()[0])
}

// writeVectorCopy writes the generation's copy of a maintained vector
// index over the generation's rows (ch, its vector column, row i at
// offset i) that are neither tombstones nor null or non-finite vectors (LanceDB's copy
// skips null vectors; its LSM search hides a deleted key's older rows
// without the tombstone in the copy), or nothing (nil) when no row is.
func writeVectorCopy(ctx context.Context, gb storage.Bucket, vc *vectorCopy, ch *chunk, tomb []bool, createdAt uint64) (*pb.IndexMetadata, error) {
	d := ch.col.t.Size
	v := &vector.Vectors{Dim: d, Addrs: make([]uint64, 0, ch.n), Data: make([]float32, 0, ch.n*d)}
	var buf []float32
	for i := range ch.n {
		if tomb[i] || !ch.valid[i] {
			continue
		}
		buf = ch.vectorAt(i, buf)
		if !finite(buf) {
			continue // only a replayed entry holds one (Upsert refuses it)
		}
		v.Data = append(v.Data, buf...)
		v.Addrs = append(v.Addrs, meta.RowAddr(0, uint32(i)))
	}
	if len(v.Addrs) == 0 {
		// LanceDB writes no copy of a generation without vectors either.
		return nil, nil
	}
	u, id := meta.NewUUID()
	if _, _, err := vector.WriteGenerationCopy(ctx, gb, meta.IndexDir(id), v, vc.distance); err != nil {
		return nil, fmt.Errorf("maintained index %s: %w", vc.name, err)
	}
	// As LanceDB's flush: empty details (the copy's files say what it
	// is), no file list.
	return &pb.IndexMetadata{
		Uuid:           u,
		Fields:         append([]int32(nil), vc.like.GetFields()...),
		Name:           vc.name,
		DatasetVersion: 1,
		FragmentBitmap: meta.EncodeBitmap(roaring.BitmapOf(0)),
		IndexDetails:   &anypb.Any{TypeUrl: vector.TypeURLDetails},
		IndexVersion:   proto.Int32(1),
		CreatedAt:      proto.Uint64(createdAt),
	}, nil
}
