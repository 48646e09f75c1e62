package vector

import (
	"context"
	"fmt"
	"io"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
)

// remapGraphStream writes a remap of an HNSW segment (index.idx ir of
// isize bytes, auxiliary.idx sr of ssize bytes) to iw and sw, a partition
// at a time: the partition's storage rows and graph rows are read, its
// row addresses passed through remap (rows it reports deleted dropped),
// its graph kept, repaired or rebuilt as remapGraphs does it for the
// whole segment, and both written before the next partition is read. A
// remap then holds the largest partition, not the index (LanceDB's
// default HNSW partition holds about 2^20 rows: an index of ten million
// 768-d SQ rows is ten such partitions, 7.7 GB of codes). Each
// partition's working memory is taken from mem first. It returns the
// bytes written to iw and sw.
//
// Partition p is read into a storage and a sub-index that keep every
// partition of the segment but hold rows in p only, so that remapGraphs
// and the graph repair number partitions, centroids, HNSW parameters and
// rebuild seeds as they do for the whole segment: the output is the
// whole-segment remap's, row for row.
func remapGraphStream(ctx context.Context, ir io.ReaderAt, isize int64, sr io.ReaderAt, ssize int64, iw, sw io.Writer, typ string, remap func(uint64) (uint64, bool), mem func(context.Context, int64) (func(), error)) (in, sn int64, st RemapStats, _ error) {
	x, xf, err := openSubIndex(ir, isize)
	if err != nil {
		return 0, 0, st, err
	}
	s, sf, err := openStorage(sr, ssize)
	if err != nil {
		return 0, 0, st, err
	}
	if err := checkStorage(typ, x, s); err != nil {
		return 0, 0, st, err
	}
	if !x.IsHNSW() {
		return 0, 0, st, formatErr("%s: %s has no HNSW graphs", IndexFile, x.Type)
	}
	parts := s.Partitions()
	for p, h := range x.HNSW {
		n, gn := s.IVF.GetLengths()[p], x.IVF.GetLengths()[p]
		if got := h.LevelOffsets[min(1, len(h.LevelOffsets)-1)] - h.LevelOffsets[0]; len(h.LevelOffsets) > 1 && got != int(n) {
			return 0, 0, st, formatErr("partition %d: HNSW graph has %d nodes but its vector storage has %d rows", p, got, n)
		}
		if (n == 0) != (gn == 0) {
			return 0, 0, st, formatErr("partition %d: %d graph rows over %d storage rows", p, gn, n)
		}
	}
	perRow, perGraphRow := bytesPerRow(ssize, sf.NumRows()), bytesPerRow(isize, xf.NumRows())

	ss, err := newStorageStream(sw, s)
	if err != nil {
		return 0, 0, st, err
	}
	gs, err := newGraphStream(iw, x)
	if err != nil {
		return 0, 0, st, err
	}
	out := *x
	out.Columns = nil
	out.HNSW = make([]HNSWMeta, parts)
	out.IVF = &ipb.IVF{CentroidsTensor: x.IVF.GetCentroidsTensor(), Loss: x.IVF.Loss,
		Offsets: make([]uint64, parts), Lengths: make([]uint32, parts)}
	zero := make([]uint64, parts)
	var at uint64
	for p := range parts {
		if err := ctx.Err(); err != nil {
			return 0, 0, st, err
		}
		out.IVF.Offsets[p] = at
		n, gn := s.IVF.GetLengths()[p], x.IVF.GetLengths()[p]
		if n == 0 {
			out.HNSW[p] = x.HNSW[p]
			if err := ss.add(p, nil); err != nil {
				return 0, 0, st, err
			}
			continue
		}
		rows, err := func() (int, error) {
			release, err := hold(ctx, mem, graphRemapMemory(int64(n)*perRow, int64(gn)*perGraphRow))
			if err != nil {
				return 0, err
			}
			defer release()
			only := func(k uint32) []uint32 {
				ls := make([]uint32, parts)
				ls[p] = k
				return ls
			}
			part, err := readPartition(s, sf, p, &ipb.IVF{Offsets: zero, Lengths: only(n)})
			if err != nil {
				return 0, err
			}
			goff := x.IVF.GetOffsets()[p]
			b, err := xf.ReadRange(nil, goff, goff+uint64(gn))
			if err != nil {
				return 0, fmt.Errorf("%s: partition %d: %w", IndexFile, p, err)
			}
			if err := checkGraphRows(b, int(gn)); err != nil {
				return 0, err
			}
			xp := *x
			xp.IVF = &ipb.IVF{CentroidsTensor: x.IVF.GetCentroidsTensor(), Offsets: zero, Lengths: only(gn)}
			xp.Columns = b.Columns
			// In place: part is this partition's own read.
			ns, ps, touched, keep := remapStorage(part, remap, true)
			st.Entries, st.Kept, st.Dropped = st.Entries+ps.Entries, st.Kept+ps.Kept, st.Dropped+ps.Dropped
			nx, gps, err := remapGraphs(&xp, part, ns, keep, touched)
			if err != nil {
				return 0, err
			}
			out.HNSW[p] = nx.HNSW[p]
			gp := &gps[p]
			k := gp.rows()
			if err := gs.add(gp); err != nil {
				return 0, err
			}
			return k, ss.add(p, ns)
		}()
		if err != nil {
			return 0, 0, st, err
		}
		out.IVF.Lengths[p] = uint32(rows)
		at += uint64(rows)
	}
	if in, err = gs.close(&out); err != nil {
		return 0, 0, st, err
	}
	if sn, err = ss.close(); err != nil {
		return 0, 0, st, err
	}
	return in, sn, st, nil
}
