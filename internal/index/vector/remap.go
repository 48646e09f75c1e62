package vector

import (
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
	st := RemapStats{Entries: len(s.RowIDs)}
	keep := make([]int, 0, len(s.RowIDs))
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
		if len(keep) == len(s.RowIDs) {
			out.Columns[i] = c
		} else {
			out.Columns[i] = c.Take(keep)
		}
	}
	return &out, st, touched
}
