package vector

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// Vectors are rows read from a table to index: row i's address and its
// vector at Data[i*Dim:(i+1)*Dim].
type Vectors struct {
	Addrs []uint64
	Dim   int
	Data  []float32
	// Data64 are the vectors as read when the column holds float64 ones
	// (Data rounds them), which lance indexes in float64.
	Data64 []float64
}

// CollectVectors reads the non-null vectors of the live rows of the given
// fragments of a version (the rows LanceDB indexes), in fragment then
// offset order.
func CollectVectors(ctx context.Context, b storage.Bucket, version uint64, field *pb.Field, frags *roaring.Bitmap) (*Vectors, error) {
	return streamVectors(ctx, b, version, field, frags, nil, nil)
}

// vectorBatchRows is the rows a vector scan decodes at once: 3 MiB of
// 768-d float32 vectors. The scan holds a batch in several copies at once
// (the page bytes read, the decoded window, the encoder's batch; the
// column handed over is a view of the window) and the garbage collector
// lets the heap grow past that, so the batch, not the index, sets a
// catch-up's peak RSS; the scan's default 4 096 rows held about 100 MiB
// live for 768-d vectors. A view instead of a copy of the column: the 1 M-
// row IVF_PQ catch-up 57-59 → 52-54 MiB peak, 15 % less CPU.
const vectorBatchRows = 1024

// streamVectors is CollectVectors handing each scan batch's vectors to
// emit (when not nil) instead of keeping them: the Vectors emit gets are
// reused for the next batch. reserve (when not nil) is told first how
// many live rows the scan reads (a multivector row may hold several
// vectors, a null one none), so that the caller can size its output once.
func streamVectors(ctx context.Context, b storage.Bucket, version uint64, field *pb.Field, frags *roaring.Bitmap, emit func(*Vectors) error, reserve func(rows int)) (*Vectors, error) {
	// Views: each batch's vectors are copied (appendVector) before the
	// callback returns.
	tbl, err := scan.Open(ctx, b, scan.Options{Version: version, Columns: []string{field.GetName()}, BatchRows: vectorBatchRows, Views: true})
	if err != nil {
		return nil, err
	}
	if tbl.Columns[0].Field.GetId() != field.GetId() {
		return nil, fmt.Errorf("column %q of version %d is field %d, the index's %d", field.GetName(), version, tbl.Columns[0].Field.GetId(), field.GetId())
	}
	m := proto.Clone(tbl.Manifest).(*pb.Manifest)
	m.Fragments = slices.DeleteFunc(m.Fragments, func(f *pb.DataFragment) bool { return !frags.Contains(uint32(f.GetId())) })
	tbl.Manifest = m
	if reserve != nil {
		var live uint64
		for _, f := range m.Fragments {
			live += f.GetPhysicalRows() - min(f.GetDeletionFile().GetNumDeletedRows(), f.GetPhysicalRows())
		}
		reserve(int(live))
	}
	out := &Vectors{}
	err = tbl.Batches(ctx, func(bt *scan.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		col := bt.Columns[0]
		if col == nil {
			return nil // every vector of the batch is null
		}
		// A multivector column (a list of vectors) indexes each vector of
		// a row as its own entry, under the row's address, as lance
		// flattens it.
		list := col
		if (col.Type.Kind == file.KindList || col.Type.Kind == file.KindLargeList) && len(col.Children) == 1 && len(col.Offsets) == col.Len+1 {
			col = col.Children[0]
		} else {
			list = nil
		}
		if col.Type.Kind != file.KindFixedSizeList || len(col.Children) != 1 || col.Type.Size <= 0 {
			return fmt.Errorf("fragment %d: column %q is %s, not a fixed-size list of floats (or a list of them)", bt.Fragment, field.GetName(), bt.Columns[0].Type)
		}
		dim := col.Type.Size
		if out.Dim == 0 {
			out.Dim = dim
		} else if out.Dim != dim {
			return fmt.Errorf("fragment %d: vectors of %d dimensions, others %d", bt.Fragment, dim, out.Dim)
		}
		items := col.Children[0]
		for _, row := range bt.Live {
			lo, hi := row, row+1
			if list != nil {
				if !list.IsValid(row) {
					continue
				}
				lo, hi = int(list.Offsets[row]), int(list.Offsets[row+1])
				if lo < 0 || hi < lo || hi > col.Len {
					return fmt.Errorf("fragment %d: column %q: row %d lists vectors %d..%d of %d", bt.Fragment, field.GetName(), row, lo, hi, col.Len)
				}
			}
			for r := lo; r < hi; r++ {
				if !col.IsValid(r) {
					continue
				}
				if err := appendVector(out, items, r, dim); err != nil {
					return fmt.Errorf("fragment %d: column %q: %w", bt.Fragment, field.GetName(), err)
				}
				out.Addrs = append(out.Addrs, meta.RowAddr(uint32(bt.Fragment), uint32(bt.Offset)+uint32(row)))
			}
		}
		if emit == nil {
			return nil
		}
		err := emit(out)
		out.Addrs, out.Data, out.Data64 = out.Addrs[:0], out.Data[:0], out.Data64[:0]
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendVector appends vector r of items (dim floats each) to out as
// float32.
func appendVector(out *Vectors, items *file.Array, r, dim int) error {
	if w := items.Type.ByteWidth(); w > 0 && len(items.Values) < (r+1)*dim*w {
		return fmt.Errorf("vector %d lies beyond its %d bytes of items", r, len(items.Values))
	}
	for e := range dim {
		k := r*dim + e
		var x float32
		switch items.Type.Kind {
		case file.KindFloat32:
			x = f32(items.Values[4*k:])
		case file.KindFloat16:
			x = file.Float16(binary.LittleEndian.Uint16(items.Values[2*k:]))
		case file.KindFloat64:
			f := math.Float64frombits(binary.LittleEndian.Uint64(items.Values[8*k:]))
			out.Data64 = append(out.Data64, f)
			x = float32(f)
		case file.KindUint8:
			// Binary vectors (a hamming index's), widened exactly.
			x = float32(items.Values[k])
		default:
			return fmt.Errorf("%s items, not floats", items.Type)
		}
		out.Data = append(out.Data, x)
	}
	return nil
}

// normalize is v over its L2 norm, computed in float32 in order, as
// LanceDB normalizes for cosine (bit for bit on the files it wrote).
func normalize(v []float32) []float32 {
	return normalizeInto(make([]float32, len(v)), v)
}

// nearestCentroid assigns v to a partition as LanceDB does: squared L2
// (on the normalized vector for cosine), or the largest dot product.
func nearestCentroid(v, cent []float32, dim int, distance string) int {
	best, bd := 0, float32(math.Inf(1))
	for c := 0; c*dim < len(cent); c++ {
		cc := cent[c*dim : (c+1)*dim]
		var d float32
		if distance == "dot" {
			for e := range dim {
				d -= v[e] * cc[e]
			}
		} else {
			d = l2(v, cc)
		}
		if d < bd {
			best, bd = c, d
		}
	}
	return best
}

// Encode builds the storage of new rows as LanceDB's optimize() appends
// them to an index (a delta segment), with the segment's centroids and
// quantizer, without retraining: each vector (normalized for cosine) goes
// to its nearest centroid and is encoded (FLAT: the vector; SQ: the
// vector over the stored bounds; PQ: the nearest codebook entry per
// sub-vector of the residual to the centroid, except for dot, which
// encodes the vector itself and, as the quantizer LanceDB loads from a
// dot index does, picks the entry of largest dot product; RQ: the sign
// bits of the rotated residual and its factors). Rows keep their order
// within a partition.
func (seg *Segment) Encode(v *Vectors) (*Storage, error) { return seg.encode(v, false) }

// EncodeBuild is Encode as LanceDB's createIndex encodes the rows it
// trained on: the same but for dot PQ, whose codebook entries it picks by
// squared L2 (lance builds the quantizer with L2 and loads it with the
// index's distance). A rebuild uses it, so that every row LanceDB indexed
// gets the code it has.
func (seg *Segment) EncodeBuild(v *Vectors) (*Storage, error) { return seg.encode(v, true) }

func (seg *Segment) encode(v *Vectors, build bool) (*Storage, error) {
	e, err := seg.newEncoder(build)
	if err != nil {
		return nil, err
	}
	if err := e.add(v); err != nil {
		return nil, err
	}
	return e.storage(), nil
}

// pqEncodeInto writes into out the nearest codebook entry of each
// sub-vector of x: by squared L2 (float32), or by largest dot product when
// dot is set (ties: the first entry); 4-bit codes two to a byte, the
// even sub-vector in the low half. book16 is pqBook16(p) (nil: the
// scalar kernel), the same codes faster.
func pqEncodeInto(out []byte, p *PQParams, x []float32, dot bool, book16 []float32) {
	m, k := p.NumSubVectors, p.entries()
	sub := len(x) / m
	if sub == 16 && k == 256 && p.NBits == 8 && !dot {
		if book16 != nil {
			for j := range m {
				out[j] = byte(nearestSub16T(x[j*16:], book16[j*256*16:], 256))
			}
			return
		}
		for j := range m {
			out[j] = byte(nearestSub16(x[j*16:], p.Codebook[j*256*16:], 256))
		}
		return
	}
	clear(out[:p.codeBytes()])
	for j := range m {
		best, bd := 0, float32(math.Inf(1))
		xs := x[j*sub : (j+1)*sub]
		for c := range k {
			cb := p.Codebook[(j*k+c)*sub : (j*k+c+1)*sub]
			var d float32
			if dot {
				for e, f := range xs {
					d -= f * cb[e]
				}
			} else {
				d = l2(xs, cb)
			}
			if d < bd {
				best, bd = c, d
			}
		}
		if p.NBits == 4 {
			out[j/2] |= byte(best) << (4 * (j % 2))
		} else {
			out[j] = byte(best)
		}
	}
}

// BuildOptions say what a new segment covers.
type BuildOptions struct {
	// Version is the table version read; the segment's dataset_version.
	Version uint64
	Field   *pb.Field
	// Fragments are the fragments the segment covers (its bitmap).
	Fragments *roaring.Bitmap
	Now       time.Time
	// Rebuild says the segment replaces every segment of the index: its
	// rows are encoded as LanceDB's createIndex encodes them
	// (EncodeBuild), a delta's as its optimize() appends them (Encode).
	Rebuild bool
}

// BuildSegment writes a new segment of the logical index like belongs to
// over the live rows of o.Fragments, encoded with like's centroids and
// quantizer (a delta segment, or one replacing every segment when the
// fragments are all of the version's). It returns the segment's metadata,
// the objects written (also on error, for cleanup) and its row count.
func BuildSegment(ctx context.Context, b storage.Bucket, like *pb.IndexMetadata, o BuildOptions) (*pb.IndexMetadata, []string, int, error) {
	defer holdGC(segmentGCPercent)()
	seg, err := readSegment(ctx, b, like, false)
	if err != nil {
		return nil, nil, 0, err
	}
	enc, err := seg.newEncoder(o.Rebuild)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("index %s: %w", like.GetName(), err)
	}
	if _, err := streamVectors(ctx, b, o.Version, o.Field, o.Fragments, enc.add, enc.reserve); err != nil {
		return nil, nil, 0, fmt.Errorf("index %s: %w", like.GetName(), err)
	}
	ns := enc.storage()
	rows := len(ns.RowIDs)
	writeStorage := segmentFile{StorageFile, func(w io.Writer) (int64, error) { return WriteStorage(w, ns) }}
	var order []segmentFile
	if !seg.Index.IsHNSW() {
		order = []segmentFile{{IndexFile, func(w io.Writer) (int64, error) { n, err := w.Write(seg.indexRaw); return int64(n), err }}, writeStorage}
	} else {
		// The codes (a byte a dimension a row for SQ) and the graphs are
		// the bulk of the memory. auxiliary.idx is written from the codes
		// first, the graphs are built on them, and index.idx's columns
		// are laid out from the graphs once the codes are let go: the
		// writers' buffers never come on top of both, nor the columns on
		// top of the codes.
		order = []segmentFile{writeStorage, {IndexFile, func(w io.Writer) (int64, error) {
			// The scan's and the writer's buffers are garbage now, in
			// pieces too small for the graphs' slabs: their pages go back
			// before the graphs are built.
			debug.FreeOSMemory()
			graphs, err := buildGraphs(seg.Index, ns)
			if err != nil {
				return 0, err
			}
			lengths := ns.IVF.GetLengths()
			ns = nil
			debug.FreeOSMemory() // the codes, before the columns are laid out
			nx := graphsSubIndex(seg.Index, lengths, graphs)
			graphs = nil
			debug.FreeOSMemory() // the graphs, before the writer's buffers
			return WriteSubIndex(w, nx)
		}}}
	}
	u, id := meta.NewUUID()
	files, keys, err := writeFiles(ctx, b, meta.IndexDir(id), order)
	if err != nil {
		return nil, keys, 0, fmt.Errorf("index %s: %w", like.GetName(), err)
	}
	return &pb.IndexMetadata{
		Uuid:           u,
		Fields:         slices.Clone(like.GetFields()),
		Name:           like.GetName(),
		DatasetVersion: o.Version,
		FragmentBitmap: meta.EncodeBitmap(o.Fragments.Clone()),
		IndexDetails:   proto.Clone(like.GetIndexDetails()).(*anypb.Any),
		IndexVersion:   proto.Int32(like.GetIndexVersion()),
		CreatedAt:      proto.Uint64(uint64(o.Now.UnixMilli())),
		Files:          files,
	}, keys, rows, nil
}

// buildGraphs builds the HNSW graph of every partition of s (a new
// segment's storage under x's centroids), each with its partition's
// parameters in x, as RebuildGraphs builds a touched partition's.
func buildGraphs(x *SubIndex, s *Storage) ([]*graph, error) {
	if len(x.HNSW) != s.Partitions() {
		return nil, fmt.Errorf("the index has %d partitions and the storage %d", len(x.HNSW), s.Partitions())
	}
	cent, dim := x.Centroids()
	graphs := make([]*graph, s.Partitions())
	for p := range graphs {
		off, n := int(s.IVF.GetOffsets()[p]), int(s.IVF.GetLengths()[p])
		v, err := partitionVectors(s, cent[p*dim:(p+1)*dim], off, n)
		if err != nil {
			return nil, err
		}
		h := x.HNSW[p]
		m := max(h.Params.M, 2)
		graphs[p] = buildGraph(v, n, m, max(h.Params.EfConstruction, m), h.Params.MaxLevel, graphSeed+uint64(p), true)
	}
	return graphs, nil
}

// graphsSubIndex is x (its centroids, types and parameters) holding
// graphs, partition p's over lengths[p] rows.
func graphsSubIndex(x *SubIndex, lengths []uint32, graphs []*graph) *SubIndex {
	var vid []uint32
	var nbrs [][]uint32
	var dists [][]float32
	out := *x
	out.HNSW = make([]HNSWMeta, len(graphs))
	out.IVF = &ipb.IVF{CentroidsTensor: x.IVF.GetCentroidsTensor(), Loss: x.IVF.Loss,
		Offsets: make([]uint64, len(graphs)), Lengths: make([]uint32, len(graphs))}
	for p, g := range graphs {
		start := len(vid)
		out.IVF.Offsets[p] = uint64(start)
		pv, pn, pd, hm := graphRows(g, x.HNSW[p].Params)
		vid, nbrs, dists = append(vid, pv...), append(nbrs, pn...), append(dists, pd...)
		out.HNSW[p] = hm
		out.IVF.Lengths[p] = uint32(len(vid) - start)
	}
	out.Columns = hnswColumns(vid, nbrs, dists)
	return &out
}

// writeSegmentFiles writes index.idx (the given bytes) and auxiliary.idx
// (s) under dir.
func writeSegmentFiles(ctx context.Context, b storage.Bucket, dir string, indexBytes []byte, s *Storage) ([]*pb.IndexFile, []string, error) {
	return writeSegment(ctx, b, dir, func(w io.Writer) (int64, error) { n, err := w.Write(indexBytes); return int64(n), err }, s)
}

// writeSegment is writeSegmentFiles with index.idx written by writeIndex
// (a remap encodes its graphs straight into the object, not into a
// buffer first).
func writeSegment(ctx context.Context, b storage.Bucket, dir string, writeIndex func(io.Writer) (int64, error), s *Storage) ([]*pb.IndexFile, []string, error) {
	return writeFiles(ctx, b, dir, []segmentFile{
		{IndexFile, writeIndex},
		{StorageFile, func(w io.Writer) (int64, error) { return WriteStorage(w, s) }},
	})
}

// segmentFile is one file of a segment and how to write it (returning
// its size).
type segmentFile struct {
	name  string
	write func(io.Writer) (int64, error)
}

// writeFiles writes fs under dir in the order given, each straight to
// the bucket. It returns the files, sorted by name, and the objects
// written (also on error, for cleanup).
func writeFiles(ctx context.Context, b storage.Bucket, dir string, fs []segmentFile) ([]*pb.IndexFile, []string, error) {
	var keys []string
	var files []*pb.IndexFile
	for _, f := range fs {
		key := dir + f.name
		w, err := b.NewWriter(ctx, key)
		if err != nil {
			return nil, keys, err
		}
		keys = append(keys, key)
		n, err := f.write(w)
		if err != nil {
			_ = w.Close()
			return nil, keys, fmt.Errorf("write %s: %w", f.name, err)
		}
		if err := w.Close(); err != nil {
			return nil, keys, fmt.Errorf("write %s: %w", f.name, err)
		}
		files = append(files, &pb.IndexFile{Path: f.name, SizeBytes: uint64(n)})
	}
	slices.SortFunc(files, func(a, b *pb.IndexFile) int { return strings.Compare(a.GetPath(), b.GetPath()) })
	return files, keys, nil
}
