package vector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Kind is meta.IndexKind's name of a vector index.
const Kind = "vector"

// Segment is a decoded vector index segment.
type Segment struct {
	Meta    *pb.IndexMetadata
	Details *ipb.VectorIndexDetails
	Index   *SubIndex
	Storage *Storage
	// indexRaw is index.idx as read (a FLAT sub-index is rewritten as is).
	indexRaw []byte
}

// segmentType checks a segment's metadata and returns its index type.
func segmentType(m *pb.IndexMetadata) (string, *ipb.VectorIndexDetails, error) {
	d, err := DecodeDetails(m.GetIndexDetails())
	if err != nil {
		return "", nil, fmt.Errorf("index %s: %w", m.GetName(), err)
	}
	typ := DetailsType(d)
	if typ == "" {
		return "", nil, fmt.Errorf("index %s: %w", m.GetName(), unsupported("details name no quantizer (an index older than LanceDB 0.39's)"))
	}
	if err := CheckIndexVersion(typ, m.GetIndexVersion()); err != nil {
		return "", nil, fmt.Errorf("index %s: %w", m.GetName(), err)
	}
	return typ, d, nil
}

// Remappable reports whether Remap handles the segment: every vector
// index type LanceDB 0.39 writes (IVF_RQ included: its codes are moved,
// never re-encoded).
func Remappable(m *pb.IndexMetadata) bool {
	if meta.IndexKind(m) != Kind {
		return false
	}
	_, d, err := segmentType(m)
	return err == nil && Refusal(d) == ""
}

// Refusal is why compactord leaves an index of these details alone ("":
// it does not): hamming indexes of any type but IVF_FLAT (the only one
// LanceDB 0.39 builds over binary vectors: its PQ, SQ and RQ builders
// refuse uint8), and PQ codes of other than 4 or 8 bits.
func Refusal(d *ipb.VectorIndexDetails) string {
	if d.GetMetricType() == ipb.VectorMetricType_Hamming && (d.GetHnsw() != nil || d.GetFlat() == nil) {
		return fmt.Sprintf("compactord reads hamming (binary vector) indexes of type IVF_FLAT only, not %s", DetailsType(d))
	}
	if pq := d.GetPq(); pq != nil && pq.GetNumBits() != 0 && pq.GetNumBits() != 8 && pq.GetNumBits() != 4 {
		return fmt.Sprintf("compactord reads 4- and 8-bit PQ codes, not %d-bit", pq.GetNumBits())
	}
	return ""
}

// SegmentRefusal is why Remap and BuildSegment leave the vector segment m
// alone, in one line ("": they do not).
func SegmentRefusal(m *pb.IndexMetadata) string {
	_, d, err := segmentType(m)
	if err != nil {
		return err.Error()
	}
	return Refusal(d)
}

// Buildable reports whether BuildSegment writes segments of m's index:
// every one Remap handles.
func Buildable(m *pb.IndexMetadata) bool { return Remappable(m) }

// HasGraph reports whether m is a vector index with HNSW graphs (nodes
// numbered by storage row, so storage rows must never disappear without a
// rebuild).
func HasGraph(m *pb.IndexMetadata) bool {
	if meta.IndexKind(m) != Kind {
		return false
	}
	typ, _, err := segmentType(m)
	return err == nil && typeParts[typ].hnsw
}

// ReadSegment reads and cross-checks both files of a vector segment.
func ReadSegment(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata) (*Segment, error) {
	return readSegment(ctx, b, m, true)
}

// readSegment is ReadSegment, without auxiliary.idx's rows (row ids and
// codes) and index.idx's HNSW graphs unless rows is set: a segment's
// centroids, quantizer and HNSW parameters are all that encoding new rows
// with it needs (the new rows get graphs of their own), and its rows and
// graphs are most of the bytes (48 MiB of PQ codes and 8 MiB of row ids a
// million rows, decoded in several copies; about 320 bytes of graph a
// node at m 20).
func readSegment(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, rows bool) (*Segment, error) {
	typ, d, err := segmentType(m)
	if err != nil {
		return nil, err
	}
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	wrap := func(err error) error {
		return fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
	}
	var x *SubIndex
	var raw []byte
	// Read in place rather than fetched whole: an HNSW index.idx is
	// mostly graphs (about 320 bytes a node at m 20), decoded into
	// columns of their own, and its bytes as read are not needed after.
	// Without the rows, without an HNSW index's graphs too (the new rows
	// get graphs of their own). A FLAT sub-index's file, a few hundred
	// bytes, is kept as read, to be written again as is.
	ia, err := b.Attributes(ctx, dir+IndexFile)
	if err != nil {
		return nil, wrap(err)
	}
	ir := storage.NewReaderAt(ctx, b, dir+IndexFile, ia.Size)
	defer ir.(*storage.ReaderAt).Close()
	if x, err = readSubIndex(ir, ia.Size, rows); err != nil {
		return nil, wrap(err)
	}
	if !x.IsHNSW() {
		if raw, err = b.Get(ctx, dir+IndexFile); err != nil {
			return nil, wrap(err)
		}
	}
	a, err := b.Attributes(ctx, dir+StorageFile)
	if err != nil {
		return nil, wrap(err)
	}
	var s *Storage
	sr := storage.NewReaderAt(ctx, b, dir+StorageFile, a.Size)
	defer sr.(*storage.ReaderAt).Close()
	if rows {
		s, err = ReadStorage(sr, a.Size)
	} else {
		s, err = readStorageHead(sr, a.Size)
	}
	if err != nil {
		return nil, wrap(err)
	}
	if err := checkStorage(typ, x, s); err != nil {
		return nil, wrap(err)
	}
	if x.IsHNSW() {
		for p, h := range x.HNSW {
			if got, want := h.LevelOffsets[min(1, len(h.LevelOffsets)-1)]-h.LevelOffsets[0], int(s.IVF.GetLengths()[p]); len(h.LevelOffsets) > 1 && got != want {
				return nil, wrap(formatErr("partition %d: HNSW graph has %d nodes but its vector storage has %d rows", p, got, want))
			}
		}
	}
	return &Segment{Meta: m, Details: d, Index: x, Storage: s, indexRaw: raw}, nil
}

// checkStorage checks that index.idx (x) and auxiliary.idx (s, its
// partitions read) describe one index of type typ.
func checkStorage(typ string, x *SubIndex, s *Storage) error {
	if x.Type != typ {
		return formatErr("%s holds an %s index, the details say %s", IndexFile, x.Type, typ)
	}
	if s.Quantizer != x.Quantizer() || s.Distance != x.Distance || s.Partitions() != len(x.IVF.GetLengths()) {
		return formatErr("%s storage (%s, %d partitions) under an %s %s index of %d partitions", s.Quantizer, s.Distance, s.Partitions(), x.Type, x.Distance, len(x.IVF.GetLengths()))
	}
	return nil
}

// graphRemapMemory estimates the working memory of remapping one HNSW
// partition (aux bytes of its storage rows, idx bytes of its graph rows):
// the storage rows decoded once (the kept ones moved in place), the old
// graph rows decoded, the new lists in slabs while they are repaired or
// built and then a batch at a time as they are written (each about the
// size of the graph rows), a page per column being written, and the
// heap's growth between collections (segmentGCPercent). Measured on a
// whole segment of one partition in the vector benchmark (192.5 MB +
// 53.4 MB files): about 310 MiB live, 390 MiB of heap at the most at GOGC
// 25 (so at most 341 at 10); this gives 374 MiB.
func graphRemapMemory(aux, idx int64) int64 {
	return (aux+3*idx)*(100+segmentGCPercent)/100 + 4*storagePageBytes
}

// RemapOptions say what a remapped segment becomes.
type RemapOptions struct {
	// DatasetVersion of the new segment: the version whose addresses it
	// holds.
	DatasetVersion uint64
	// Bitmap is the new segment's fragment bitmap. Required.
	Bitmap *roaring.Bitmap
	Now    time.Time
	// Memory, when set, takes the bytes the remap is about to hold from
	// the caller's memory budget (waiting until they fit) and returns the
	// function that gives them back: a partition's worth at a time (for
	// an HNSW index, its storage rows and graph rows).
	Memory func(ctx context.Context, n int64) (release func(), err error)
}

// Remap writes a copy of the vector segment m with every row address
// passed through remap (rows it reports deleted dropped) under a new uuid,
// and returns its metadata (m's name, fields, details, index version and
// creation time; o's dataset version and bitmap) and the objects written
// (also on error, for cleanup).
func Remap(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), o RemapOptions) (*pb.IndexMetadata, []string, RemapStats, error) {
	var st RemapStats
	if o.Bitmap == nil {
		return nil, nil, st, fmt.Errorf("index %s: remap needs the new fragment bitmap", m.GetName())
	}
	if !Remappable(m) {
		typ, d, err := segmentType(m)
		if err != nil {
			return nil, nil, st, err
		}
		if why := Refusal(d); why != "" {
			return nil, nil, st, fmt.Errorf("index %s: %w", m.GetName(), unsupported("%s", why))
		}
		return nil, nil, st, fmt.Errorf("index %s: %w", m.GetName(), unsupported("compactord does not remap %s indexes", typ))
	}
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	a, err := b.Attributes(ctx, dir+StorageFile)
	if err != nil {
		return nil, nil, st, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
	}
	var files []*pb.IndexFile
	var keys []string
	u, id := meta.NewUUID()
	typ, _, err := segmentType(m)
	if err != nil {
		return nil, nil, st, err
	}
	switch {
	case HasGraph(m):
		// A partition at a time: its storage rows and graph rows read,
		// remapped, the graph kept, repaired or rebuilt, both written.
		defer holdGC(segmentGCPercent)()
		ia, err := b.Attributes(ctx, dir+IndexFile)
		if err != nil {
			return nil, nil, st, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		ir := storage.NewReaderAt(ctx, b, dir+IndexFile, ia.Size)
		defer ir.(*storage.ReaderAt).Close()
		sr := storage.NewReaderAt(ctx, b, dir+StorageFile, a.Size)
		defer sr.(*storage.ReaderAt).Close()
		out := meta.IndexDir(id)
		var ws []io.WriteCloser
		for _, name := range []string{IndexFile, StorageFile} {
			w, err := b.NewWriter(ctx, out+name)
			if err != nil {
				for _, w := range ws {
					_ = w.Close()
				}
				return nil, keys, st, fmt.Errorf("index %s: write %s: %w", m.GetName(), name, err)
			}
			ws = append(ws, w)
			keys = append(keys, out+name)
		}
		in, sn, rst, err := remapGraphStream(ctx, ir, ia.Size, sr, a.Size, ws[0], ws[1], typ, remap, o.Memory)
		st = rst
		for i, w := range ws {
			if cerr := w.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("write %s: %w", []string{IndexFile, StorageFile}[i], cerr)
			}
		}
		if err != nil {
			return nil, keys, st, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		files = []*pb.IndexFile{{Path: StorageFile, SizeBytes: uint64(sn)}, {Path: IndexFile, SizeBytes: uint64(in)}}
	default:
		// A FLAT sub-index holds only the centroids, which a remap keeps:
		// index.idx is copied, and auxiliary.idx streamed a partition at
		// a time (IVF_RQ's codes, packed in blocks of a partition's rows,
		// unpacked and packed again per partition).
		raw, err := b.Get(ctx, dir+IndexFile)
		if err != nil {
			return nil, nil, st, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		x, err := ReadSubIndex(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			return nil, nil, st, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		out := meta.IndexDir(id)
		put := func(name string, write func(io.Writer) (int64, error)) error {
			w, err := b.NewWriter(ctx, out+name)
			if err != nil {
				return err
			}
			keys = append(keys, out+name)
			n, err := write(w)
			if err != nil {
				_ = w.Close()
				return fmt.Errorf("write %s: %w", name, err)
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			files = append(files, &pb.IndexFile{Path: name, SizeBytes: uint64(n)})
			return nil
		}
		err = put(IndexFile, func(w io.Writer) (int64, error) { n, err := w.Write(raw); return int64(n), err })
		if err == nil {
			err = put(StorageFile, func(w io.Writer) (int64, error) {
				src := storage.NewReaderAt(ctx, b, dir+StorageFile, a.Size)
				if c, ok := src.(io.Closer); ok {
					defer c.Close()
				}
				var n int64
				n, st, err = remapStorageStream(ctx, src, a.Size, w, func(s *Storage) error { return checkStorage(typ, x, s) }, remap, o.Memory)
				return n, err
			})
		}
		if err != nil {
			return nil, keys, st, fmt.Errorf("index %s: %w", m.GetName(), err)
		}
		slices.SortFunc(files, func(a, b *pb.IndexFile) int { return strings.Compare(a.GetPath(), b.GetPath()) })
	}
	nm := &pb.IndexMetadata{
		Uuid:           u,
		Fields:         slices.Clone(m.GetFields()),
		Name:           m.GetName(),
		DatasetVersion: o.DatasetVersion,
		FragmentBitmap: meta.EncodeBitmap(o.Bitmap.Clone()),
		IndexDetails:   proto.Clone(m.GetIndexDetails()).(*anypb.Any),
		IndexVersion:   proto.Int32(m.GetIndexVersion()),
		Files:          files,
	}
	// Lance's remap keeps the creation time: the same index, moved rows.
	if m.CreatedAt != nil {
		nm.CreatedAt = proto.Uint64(m.GetCreatedAt())
	} else {
		nm.CreatedAt = proto.Uint64(uint64(o.Now.UnixMilli()))
	}
	return nm, keys, st, nil
}
