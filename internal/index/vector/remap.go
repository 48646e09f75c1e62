package vector

import (
	"context"
	"fmt"
	"io"
	"slices"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/internal/format/file"
)

// RemapStats count what a remap did to a segment's rows.
type RemapStats struct {
	Entries, Kept, Dropped int
}

// RemapStorage returns s with every row address passed through remap,
// the rows it reports deleted dropped. Rows keep their partition, their
// order in it and their codes; partition offsets are recomputed. s is not
// modified. touched[p] reports whether partition p lost rows (its HNSW
// graph, whose nodes are the partition's row numbers, must be rebuilt).
func RemapStorage(s *Storage, remap func(uint64) (uint64, bool)) (_ *Storage, _ RemapStats, touched []bool) {
	out, st, touched, _ := remapStorage(s, remap, false)
	return out, st, touched
}

// remapStorage is RemapStorage, also returning the rows of s it kept
// (ascending): what a graph repair renumbers its nodes by. With inPlace
// the kept rows of s's dense fixed-width columns (the codes) are moved
// to the front of their own buffers instead of copied, so that a remap
// holds the storage once, not twice; s's columns are then garbage and
// only its row ids and partitions may still be read.
func remapStorage(s *Storage, remap func(uint64) (uint64, bool), inPlace bool) (_ *Storage, _ RemapStats, touched []bool, keep []int) {
	st := RemapStats{Entries: len(s.RowIDs)}
	keep = make([]int, 0, len(s.RowIDs))
	ids := make([]uint64, 0, len(s.RowIDs))
	ivf := &ipb.IVF{Offsets: make([]uint64, s.Partitions()), Lengths: make([]uint32, s.Partitions())}
	for p, off := range s.IVF.GetOffsets() {
		ivf.Offsets[p] = uint64(len(keep))
		for i := int(off); i < int(off)+int(s.IVF.GetLengths()[p]); i++ {
			if na, ok := remap(s.RowIDs[i]); ok {
				keep = append(keep, i)
				ids = append(ids, na)
			}
		}
		ivf.Lengths[p] = uint32(uint64(len(keep)) - ivf.Offsets[p])
		touched = append(touched, ivf.Lengths[p] != s.IVF.GetLengths()[p])
	}
	st.Kept, st.Dropped = len(keep), len(s.RowIDs)-len(keep)
	out := *s
	out.IVF, out.RowIDs = ivf, ids
	out.Columns = make([]*file.Array, len(s.Columns))
	for i, c := range s.Columns {
		switch {
		case len(keep) == len(s.RowIDs):
			out.Columns[i] = c
		default:
			out.Columns[i] = take(c, keep, inPlace && slices.IsSorted(keep))
		}
	}
	return &out, st, touched, keep
}

// take is c.Take(rows), copying whole rows at once for the dense
// fixed-width columns vector storage has (codes, vectors, factors); with
// inPlace (rows ascending) those rows are moved within c's own buffer,
// each to a place at or before its own, and the result shares it.
func take(c *file.Array, rows []int, inPlace bool) *file.Array {
	var w int
	var src []byte
	switch {
	case c.Valid != nil:
	case c.Type.Kind == file.KindFixedSizeList && len(c.Children) == 1 && c.Children[0].Valid == nil && c.Children[0].Type.ByteWidth() > 0:
		w, src = c.Type.Size*c.Children[0].Type.ByteWidth(), c.Children[0].Values
	case c.Type.ByteWidth() > 0 && len(c.Children) == 0:
		w, src = c.Type.ByteWidth(), c.Values
	}
	if w == 0 || len(src) < c.Len*w {
		return c.Take(rows)
	}
	var dst []byte
	if inPlace {
		dst = src[:len(rows)*w]
	} else {
		dst = make([]byte, len(rows)*w)
	}
	for k, r := range rows {
		copy(dst[k*w:(k+1)*w], src[r*w:(r+1)*w])
	}
	if c.Type.Kind != file.KindFixedSizeList {
		return &file.Array{Type: c.Type, Len: len(rows), Values: dst}
	}
	ch := c.Children[0]
	return &file.Array{Type: c.Type, Len: len(rows), Children: []*file.Array{{Type: ch.Type, Len: len(rows) * c.Type.Size, Values: dst}}}
}

// storagePageBytes is the page size of a streamed remap's auxiliary.idx:
// each column's page is buffered until written.
const storagePageBytes = 1 << 20

// storageMemory estimates the working memory of a remap holding rows
// stored in n bytes: the rows as read, decoded, kept (a copy) and
// transposed back for the writer, and a page per column being written.
func storageMemory(n int64) int64 {
	return 4*n + 4*storagePageBytes
}

// hold takes n bytes from mem (nil: no budget) and returns their release.
func hold(ctx context.Context, mem func(context.Context, int64) (func(), error), n int64) (func(), error) {
	if mem == nil {
		return func() {}, nil
	}
	return mem(ctx, n)
}

// remapStorageStream writes to w the auxiliary.idx r (size bytes) with
// every row address passed through remap, the rows it reports deleted
// dropped, as RemapStorage does, but one partition in memory at a time
// (its bytes held from mem first), so a remap's memory is the largest
// partition's, not the index's. check vets the storage's header against
// the segment's index.idx before any row is read. It returns the bytes
// written.
func remapStorageStream(ctx context.Context, r io.ReaderAt, size int64, w io.Writer, check func(*Storage) error, remap func(uint64) (uint64, bool), mem func(context.Context, int64) (func(), error)) (int64, RemapStats, error) {
	var st RemapStats
	s, f, err := openStorage(r, size)
	if err != nil {
		return 0, st, err
	}
	if err := check(s); err != nil {
		return 0, st, err
	}
	perRow := bytesPerRow(size, f.NumRows())
	out, err := newStorageStream(w, s)
	if err != nil {
		return 0, st, err
	}
	for p, n := range s.IVF.GetLengths() {
		if err := ctx.Err(); err != nil {
			return 0, st, err
		}
		if n == 0 {
			if err := out.add(p, nil); err != nil {
				return 0, st, err
			}
			continue
		}
		err := func() error {
			release, err := hold(ctx, mem, storageMemory(int64(n)*perRow))
			if err != nil {
				return err
			}
			defer release()
			// The partition alone: its rows are all the storage holds.
			part, err := readPartition(s, f, p, &ipb.IVF{Offsets: []uint64{0}, Lengths: []uint32{n}})
			if err != nil {
				return err
			}
			ns, ps, _, _ := remapStorage(part, remap, true)
			st.Entries, st.Kept, st.Dropped = st.Entries+ps.Entries, st.Kept+ps.Kept, st.Dropped+ps.Dropped
			return out.add(p, ns)
		}()
		if err != nil {
			return 0, st, err
		}
	}
	n, err := out.close()
	return n, st, err
}

// bytesPerRow is a file's bytes per row (at least 1), to estimate what
// reading some of its rows holds.
func bytesPerRow(size int64, rows uint64) int64 {
	if rows == 0 {
		return 1
	}
	return max(1, size/int64(rows))
}

// readPartition reads partition p's rows of the storage s (f its file)
// into a copy of s whose partitions are ivf: all of the rows read must be
// in ivf's partitions.
func readPartition(s *Storage, f *file.File, p int, ivf *ipb.IVF) (*Storage, error) {
	off, n := s.IVF.GetOffsets()[p], s.IVF.GetLengths()[p]
	b, err := f.ReadRange(nil, off, off+uint64(n))
	if err != nil {
		return nil, fmt.Errorf("%s: partition %d: %w", StorageFile, p, err)
	}
	part := *s
	part.IVF = ivf
	if err := part.setRows(b); err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	return &part, nil
}

// storageStream writes an auxiliary.idx a partition at a time, in
// partition order; its IVF buffer (the partitions' offsets and lengths)
// is known only once the last is written, and the file writer writes its
// global buffers at Close, from the slice it was given.
type storageStream struct {
	fw      *file.Writer
	cw      *countingWriter
	ivf     *ipb.IVF
	globals [][]byte
	at      uint64
}

// newStorageStream starts the auxiliary.idx of a storage like s (its
// fields, metadata, quantizer buffers and partition count) on w.
func newStorageStream(w io.Writer, s *Storage) (*storageStream, error) {
	ss := &storageStream{cw: &countingWriter{w: w}, globals: append([][]byte{nil}, s.Extra...),
		ivf: &ipb.IVF{Offsets: make([]uint64, s.Partitions()), Lengths: make([]uint32, s.Partitions())}}
	var err error
	ss.fw, err = file.NewWriter(ss.cw, s.Fields, file.WriterOptions{Version: file.V2_2, Metadata: s.Metadata, GlobalBuffers: ss.globals, PageBytes: storagePageBytes})
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// add writes the rows of ns (nil: none), all of them partition p's.
func (ss *storageStream) add(p int, ns *Storage) error {
	ss.ivf.Offsets[p] = ss.at
	if ns == nil || len(ns.RowIDs) == 0 {
		return nil
	}
	k := len(ns.RowIDs)
	cols := append([]*file.Array{uint64Array(ns.RowIDs)}, ns.Columns...)
	switch {
	case ns.Quantizer == QuantPQ && ns.PQ.Transposed:
		cols[1] = transposePQ(ns)
	case ns.Quantizer == QuantRQ && ns.RQ.Packed:
		// Packed in blocks of the partition's own rows.
		cols[1] = ns.mapRQPartitions(packRQ)
	}
	const chunk = 64 << 10
	for start := 0; start < k; start += chunk {
		end := min(k, start+chunk)
		bt := &file.Batch{NumRows: end - start}
		for _, c := range cols {
			bt.Columns = append(bt.Columns, c.Slice(start, end))
		}
		if err := ss.fw.Write(bt); err != nil {
			return err
		}
	}
	ss.ivf.Lengths[p] = uint32(k)
	ss.at += uint64(k)
	return nil
}

// close writes the IVF buffer and the file's end, and returns its size.
func (ss *storageStream) close() (int64, error) {
	var err error
	if ss.globals[0], err = encodeIVF(ss.ivf); err != nil {
		return 0, err
	}
	if err := ss.fw.Close(); err != nil {
		return 0, err
	}
	return ss.cw.n, nil
}
