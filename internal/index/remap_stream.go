package index

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// A remap streams a segment: it reads the old segment's files a window at
// a time and writes the new segment's as it goes, so its memory is a
// window of entries and a page of output, whatever the segment's size.
// Remapping moves addresses but never values, so a btree's entries stay
// in value order and a bitmap's keys in key order; only the addresses of
// a run of equal btree values need sorting again (btree order breaks ties
// by address), which a run does on its own, in a roaring bitmap once it
// holds more than remapRunSlice addresses. (Variables so that tests can
// make windows small.)
var (
	// remapWindow is the rows of an old segment file decoded at once.
	// 16 Ki rather than 64 Ki rows: the same CPU, and 6-15 MiB less peak
	// RSS for a compaction whose peak is its btree remap (1 Mi rows with
	// a btree and a bitmap: 54-66 to 48-50 MiB).
	remapWindow = 16 << 10
	// remapFlush is the output rows buffered before they are encoded.
	remapFlush = 16 << 10
	// remapRunSlice is the addresses of a run of equal btree values kept
	// in a slice (sorted when the run ends); a longer run moves to a
	// roaring bitmap, at most 2 bytes per address and far less for the
	// dense ranges a compaction's new fragments hold.
	remapRunSlice = 64 << 10
	// bitmapWindow is the keys of a bitmap segment decoded at once: a
	// key's row map can hold a whole fragment's rows.
	bitmapWindow = 256
	// bitmapFlushBytes is the encoded new row maps of a window's keys
	// buffered before they are written. A low-cardinality key's new map
	// holds a large share of the table's rows though its old one may be
	// small on disk (LanceDB's maps of whole fragments): at 16 Mi rows
	// with 4 keys, 2.5 MB each, the four maps and their copy in the
	// writer were the compaction's peak (one key at a time: 94-104 MiB
	// against 107-135 MiB).
	bitmapFlushBytes = 256 << 10
)

// streamMemory is what a streamed remap holds from the memory budget: a
// decoded window of the old segment (remapWindow rows of values of up to
// 32 bytes and their addresses, as read and decoded), the output rows
// waiting (remapFlush: values, row indexes and addresses) and their
// encoded copy, and a page per output column; a bitmap window of
// bitmapWindow keys' row maps is of the same order.
const streamMemory = 2*(32+8)*(16<<10) + 2*(32+8+8)*(16<<10) + 4*remapPageBytes

// remapPageBytes is the page size of a remapped segment's files: each
// column's page is buffered until written, 1 MiB rather than the
// writer's 8 MiB default, as the compaction writes its data files.
const remapPageBytes = 1 << 20

// segmentFile opens one file of segment m.
func segmentFile(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, name string) (*file.File, error) {
	key := meta.IndexDir(meta.UUIDString(m.GetUuid())) + name
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
	}
	return openFile(Reader{R: storage.NewReaderAt(ctx, b, key, a.Size), Size: a.Size}, name)
}

// SegmentOut is a new segment's files, written to the bucket as they are
// encoded (Put), under _indices/{uuid}/ of a new uuid.
type SegmentOut struct {
	ctx context.Context
	b   storage.Bucket
	w   *Written
	dir string
}

func newSegmentOut(ctx context.Context, b storage.Bucket) *SegmentOut {
	u, id := meta.NewUUID()
	return &SegmentOut{ctx: ctx, b: b, w: &Written{UUID: u}, dir: meta.IndexDir(id)}
}

// Put writes file name of the segment with write, streamed to the
// bucket (write gets a buffered writer; the file's size is recorded).
func (s *SegmentOut) Put(name string, write func(io.Writer) error) error {
	key := s.dir + name
	wc, err := s.b.NewWriter(s.ctx, key)
	if err != nil {
		return err
	}
	s.w.Keys = append(s.w.Keys, key)
	cw := &countingWriter{w: wc}
	bw := bufio.NewWriterSize(cw, 256<<10)
	if err := write(bw); err != nil {
		_ = wc.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		_ = wc.Close()
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := wc.Close(); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	s.w.Files = append(s.w.Files, &pb.IndexFile{Path: name, SizeBytes: uint64(cw.n)})
	slices.SortFunc(s.w.Files, func(a, b *pb.IndexFile) int { return strings.Compare(a.GetPath(), b.GetPath()) })
	return nil
}

// btreeRemap is the state of a btree remap: the run of equal values being
// collected and the output rows not yet encoded.
type btreeRemap struct {
	remap func(uint64) (uint64, bool)
	st    *RemapStats
	data  *file.Writer

	// The open run: its value is row runRow of runArr.
	runArr   *file.Array
	runRow   int
	runAddrs []uint64
	runBig   *roaring64.Bitmap

	// Output rows waiting: rows idx of arr, with their addresses.
	pend     []btreeOut
	pendRows int

	// page_lookup: per page of BTreeBatchSize output rows, its first and
	// last values and its nulls.
	rows       uint64
	mins, maxs []*file.Array
	nulls      []uint32
	last       *file.Array
}

type btreeOut struct {
	arr   *file.Array
	idx   []int
	addrs []uint64
}

// add is one old entry: row i of vals at old address addr.
func (r *btreeRemap) add(vals *file.Array, i int, addr uint64) error {
	if r.runArr == nil || compareRows(r.runArr, r.runRow, vals, i) != 0 {
		if err := r.endRun(); err != nil {
			return err
		}
		r.runArr, r.runRow = vals, i
	}
	r.st.Entries++
	na, ok := r.remap(addr)
	if !ok {
		r.st.Dropped++
		return nil
	}
	r.st.Kept++
	switch {
	case r.runBig != nil:
		r.runBig.Add(na)
	case len(r.runAddrs) < remapRunSlice:
		r.runAddrs = append(r.runAddrs, na)
	default:
		r.runBig = roaring64.New()
		r.runBig.AddMany(r.runAddrs)
		r.runBig.Add(na)
		r.runAddrs = r.runAddrs[:0]
	}
	return nil
}

// compareRows orders row i of a and row j of b: nulls first.
func compareRows(a *file.Array, i int, b *file.Array, j int) int {
	vi, vj := a.IsValid(i), b.IsValid(j)
	switch {
	case !vi && !vj:
		return 0
	case !vi:
		return -1
	case !vj:
		return 1
	}
	return compareValues(a, i, b, j)
}

// endRun queues the run's entries in address order.
func (r *btreeRemap) endRun() error {
	if r.runArr == nil {
		return nil
	}
	var err error
	switch {
	case r.runBig != nil:
		buf := make([]uint64, 0, remapRunSlice)
		for it := r.runBig.Iterator(); it.HasNext() && err == nil; {
			buf = append(buf, it.Next())
			if len(buf) == cap(buf) || !it.HasNext() {
				err = r.emit(buf)
				buf = buf[:0]
			}
		}
		r.runBig = nil
	case len(r.runAddrs) > 1:
		slices.Sort(r.runAddrs)
		err = r.emit(r.runAddrs)
	case len(r.runAddrs) == 1:
		err = r.emit(r.runAddrs)
	}
	r.runAddrs = r.runAddrs[:0]
	r.runArr = nil
	return err
}

// emit queues addrs (ascending) with the open run's value, and encodes
// the queue once it holds remapFlush rows.
func (r *btreeRemap) emit(addrs []uint64) error {
	n := len(addrs)
	if k := len(r.pend) - 1; k >= 0 && r.pend[k].arr == r.runArr {
		p := &r.pend[k]
		for range n {
			p.idx = append(p.idx, r.runRow)
		}
		p.addrs = append(p.addrs, addrs...)
	} else {
		idx := make([]int, n, max(n, 1024))
		for j := range idx {
			idx[j] = r.runRow
		}
		r.pend = append(r.pend, btreeOut{arr: r.runArr, idx: idx, addrs: append(make([]uint64, 0, max(n, 1024)), addrs...)})
	}
	r.pendRows += n
	if r.pendRows >= remapFlush {
		return r.flush()
	}
	return nil
}

// flush encodes the waiting output rows into page_data and notes their
// pages for page_lookup.
func (r *btreeRemap) flush() error {
	for _, p := range r.pend {
		vals := p.arr.Take(p.idx)
		for j := 0; j < vals.Len; j++ {
			at := r.rows + uint64(j)
			if at%BTreeBatchSize == 0 {
				r.mins = append(r.mins, vals.Slice(j, j+1))
				r.nulls = append(r.nulls, 0)
			}
			if !vals.IsValid(j) {
				r.nulls[len(r.nulls)-1]++
			}
			if at%BTreeBatchSize == BTreeBatchSize-1 {
				r.maxs = append(r.maxs, vals.Slice(j, j+1))
			}
		}
		r.rows += uint64(vals.Len)
		if vals.Len > 0 {
			r.last = vals.Slice(vals.Len-1, vals.Len)
		}
		if err := r.data.Write(&file.Batch{NumRows: vals.Len, Columns: []*file.Array{vals, uint64Array(p.addrs)}}); err != nil {
			return err
		}
	}
	r.pend, r.pendRows = r.pend[:0], 0
	return nil
}

// remapBTree streams btree segment m through remap into out.
func remapBTree(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), tf *pb.Field, out *SegmentOut, st *RemapStats) error {
	df, err := segmentFile(ctx, b, m, BTreeDataFile)
	if err != nil {
		return err
	}
	if len(df.Schema.Fields) != 2 {
		return formatErr("%s has %d columns, want 2", BTreeDataFile, len(df.Schema.Fields))
	}
	vf, err := fieldOf(df, "values", 0, indexable)
	if err != nil {
		return err
	}
	if _, err := fieldOf(df, "ids", 1, isKind(file.KindUint64)); err != nil {
		return err
	}
	r := &btreeRemap{remap: remap, st: st}
	err = out.Put(BTreeDataFile, func(w io.Writer) error {
		dw, err := file.NewWriter(w, []*pb.Field{indexField(tf, "values", 0, "", true), indexField(nil, "ids", 1, "uint64", false)}, file.WriterOptions{Version: file.V2_2, PageBytes: remapPageBytes})
		if err != nil {
			return err
		}
		r.data = dw
		s, err := df.Stream(nil, remapWindow)
		if err != nil {
			return fmt.Errorf("%s: %w", BTreeDataFile, err)
		}
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			bt, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", BTreeDataFile, err)
			}
			vals, ids := bt.Columns[0], bt.Columns[1]
			if vals == nil || ids == nil || vals.Len != bt.NumRows || ids.Len != bt.NumRows || len(ids.Values) < 8*ids.Len {
				return formatErr("%s: a window's columns do not hold its %d rows", BTreeDataFile, bt.NumRows)
			}
			if ids.Valid != nil && ids.NullCount() > 0 {
				return formatErr("%s: null row ids", BTreeDataFile)
			}
			for i := 0; i < bt.NumRows; i++ {
				if err := r.add(vals, i, le.Uint64(ids.Values[8*i:])); err != nil {
					return err
				}
			}
			if r.runArr == vals {
				// The open run goes on into the next window: keep its value,
				// not the whole window.
				r.runArr, r.runRow = vals.Slice(r.runRow, r.runRow+1), 0
			}
		}
		if err := r.endRun(); err != nil {
			return err
		}
		if err := r.flush(); err != nil {
			return err
		}
		return dw.Close()
	})
	if err != nil {
		return fmt.Errorf("btree %s: %w", BTreeDataFile, err)
	}
	if r.rows%BTreeBatchSize != 0 {
		r.maxs = append(r.maxs, r.last)
	}
	t := vf.Type
	pages := make([]uint32, len(r.mins))
	for i := range pages {
		pages[i] = uint32(i)
	}
	md := map[string][]byte{"batch_size": fmt.Appendf(nil, "%d", BTreeBatchSize), "range_partitioned": []byte("false")}
	err = out.Put(BTreeLookupFile, func(w io.Writer) error {
		_, err := writeFile(w, file.V2_2, []*pb.Field{indexField(tf, "min", 0, "", true), indexField(tf, "max", 1, "", true),
			indexField(nil, "null_count", 2, "uint32", false), indexField(nil, "page_idx", 3, "uint32", false)},
			md, []*file.Array{concat(t, r.mins), concat(t, r.maxs), uint32Array(r.nulls), uint32Array(pages)})
		return err
	})
	if err != nil {
		return fmt.Errorf("btree %s: %w", BTreeLookupFile, err)
	}
	return nil
}

// remapBitmap streams bitmap segment m through remap into out, key by
// key; a key left without rows is dropped.
func remapBitmap(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), full func(frag uint32) (uint64, bool), tf *pb.Field, out *SegmentOut, st *RemapStats) error {
	f, err := segmentFile(ctx, b, m, BitmapLookupFile)
	if err != nil {
		return err
	}
	return remapBitmapFile(ctx, f, remap, full, indexField(tf, "keys", 0, "", true), map[string][]byte{}, nil, out, st)
}

// remapLabelList streams label-list segment m through remap into out as
// remapBitmap does, the keys typed as the old file's, and the rows of
// its null lists remapped too (written whole: one row map).
func remapLabelList(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), full func(frag uint32) (uint64, bool), out *SegmentOut, st *RemapStats) error {
	f, err := segmentFile(ctx, b, m, BitmapLookupFile)
	if err != nil {
		return err
	}
	fs := f.Desc.GetSchema().GetFields()
	if len(fs) == 0 {
		return formatErr("%s has no fields", BitmapLookupFile)
	}
	nulls := NewRowAddrMap()
	if s, ok := f.Desc.GetSchema().GetMetadata()[labelListNullsKey]; ok {
		i, err := strconv.Atoi(string(s))
		if err != nil || i < 1 {
			return formatErr("%s: %s=%q is not a global buffer number", BitmapLookupFile, labelListNullsKey, s)
		}
		raw, err := f.GlobalBuffer(i)
		if err != nil {
			return formatErr("%s: null lists: %v", BitmapLookupFile, err)
		}
		old, err := DecodeRowAddrMap(raw)
		if err != nil {
			return fmt.Errorf("%s: null lists: %w", BitmapLookupFile, err)
		}
		// The null lists are rows of the segment, not entries: not counted.
		if nulls, err = remapRowAddrMap(old, remap, full, &RemapStats{}); err != nil {
			return fmt.Errorf("%s: null lists: %w", BitmapLookupFile, err)
		}
	}
	nb, err := nulls.MarshalBinary()
	if err != nil {
		return err
	}
	return remapBitmapFile(ctx, f, remap, full, indexField(proto.Clone(fs[0]).(*pb.Field), "keys", 0, "", true),
		map[string][]byte{labelListNullsKey: []byte("1")}, [][]byte{nb}, out, st)
}

// remapBitmapFile streams the bitmap_page_lookup.lance f through remap
// into out, its keys written as keys, with schema metadata md (the index
// stats added) and global buffers globals.
func remapBitmapFile(ctx context.Context, f *file.File, remap func(uint64) (uint64, bool), full func(frag uint32) (uint64, bool), keysField *pb.Field, md map[string][]byte, globals [][]byte, out *SegmentOut, st *RemapStats) error {
	if len(f.Schema.Fields) != 2 {
		return formatErr("%s has %d columns, want 2", BitmapLookupFile, len(f.Schema.Fields))
	}
	if _, err := fieldOf(f, "keys", 0, indexable); err != nil {
		return err
	}
	if _, err := fieldOf(f, "bitmaps", 1, func(t file.DataType) bool { return t.Kind == file.KindBinary || t.Kind == file.KindLargeBinary }); err != nil {
		return err
	}
	err := out.Put(BitmapLookupFile, func(w io.Writer) error {
		fw, err := file.NewWriter(w, []*pb.Field{keysField, indexField(nil, "bitmaps", 1, "binary", true)}, file.WriterOptions{Version: file.V2_2, Metadata: md, GlobalBuffers: globals, PageBytes: remapPageBytes})
		if err != nil {
			return err
		}
		s, err := f.Stream(nil, bitmapWindow)
		if err != nil {
			return fmt.Errorf("%s: %w", BitmapLookupFile, err)
		}
		nulls, kept := 0, 0
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			bt, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", BitmapLookupFile, err)
			}
			keys, maps := bt.Columns[0], bt.Columns[1]
			if keys == nil || maps == nil || keys.Len != bt.NumRows || maps.Len != bt.NumRows {
				return formatErr("%s: a window's columns do not hold its %d rows", BitmapLookupFile, bt.NumRows)
			}
			var rows []int
			bm := &file.Array{Type: file.DataType{Kind: file.KindBinary}, Offsets: make([]int64, 1, bt.NumRows+1)}
			// write encodes the keys so far, so that the new maps a
			// window holds stay near bitmapFlushBytes.
			write := func() error {
				if len(rows) == 0 {
					return nil
				}
				bm.Len = len(rows)
				if bm.Values == nil {
					bm.Values = []byte{}
				}
				kept += len(rows)
				err := fw.Write(&file.Batch{NumRows: len(rows), Columns: []*file.Array{keys.Take(rows), bm}})
				rows, bm = rows[:0], &file.Array{Type: file.DataType{Kind: file.KindBinary}, Offsets: make([]int64, 1, bt.NumRows+1)}
				return err
			}
			for i := 0; i < bt.NumRows; i++ {
				if !keys.IsValid(i) {
					if nulls++; nulls > 1 {
						return formatErr("%s: two null keys", BitmapLookupFile)
					}
				}
				if !maps.IsValid(i) {
					return formatErr("%s: key %d has a null bitmap", BitmapLookupFile, i)
				}
				old, err := DecodeRowAddrMap(maps.Bytes(i))
				if err != nil {
					return fmt.Errorf("%s: key %d: %w", BitmapLookupFile, i, err)
				}
				nm, err := remapRowAddrMap(old, remap, full, st)
				if err != nil {
					return fmt.Errorf("%s: key %d: %w", BitmapLookupFile, i, err)
				}
				if len(nm.Frags) == 0 {
					continue
				}
				enc, err := nm.MarshalBinary()
				if err != nil {
					return err
				}
				rows = append(rows, i)
				bm.Values = append(bm.Values, enc...)
				bm.Offsets = append(bm.Offsets, int64(len(bm.Values)))
				if len(bm.Values) >= bitmapFlushBytes {
					if err := write(); err != nil {
						return err
					}
				}
			}
			if err := write(); err != nil {
				return err
			}
		}
		// The file's metadata is written with its footer, at Close.
		md["lance:index_stats"] = fmt.Appendf(nil, `{"num_bitmaps":%d}`, kept)
		return fw.Close()
	})
	if err != nil {
		return fmt.Errorf("bitmap %s: %w", BitmapLookupFile, err)
	}
	return nil
}

// remapRowAddrMap passes every address of m through remap, fragment by
// fragment (a fragment held whole has full(frag) rows), without listing
// them first.
func remapRowAddrMap(m *RowAddrMap, remap func(uint64) (uint64, bool), full func(frag uint32) (uint64, bool), st *RemapStats) (*RowAddrMap, error) {
	out := NewRowAddrMap()
	one := func(a uint64) {
		st.Entries++
		if na, ok := remap(a); ok {
			st.Kept++
			out.Add(na)
		} else {
			st.Dropped++
		}
	}
	for _, frag := range slices.Sorted(mapsKeys(m.Frags)) {
		bm := m.Frags[frag]
		if bm == nil {
			n, ok := uint64(0), false
			if full != nil {
				n, ok = full(frag)
			}
			if !ok {
				return nil, fmt.Errorf("fragment %d is held whole and its row count is unknown", frag)
			}
			for i := uint64(0); i < n; i++ {
				one(uint64(frag)<<32 | i)
			}
			continue
		}
		for it := bm.Iterator(); it.HasNext(); {
			one(uint64(frag)<<32 | uint64(it.Next()))
		}
	}
	return out, nil
}
