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
		switch {
		case len(keep) == len(s.RowIDs):
			out.Columns[i] = c
		default:
			out.Columns[i] = take(c, keep)
		}
	}
	return &out, st, touched
}

// take is c.Take(rows), copying whole rows at once for the dense
// fixed-width columns vector storage has (codes, vectors, factors).
func take(c *file.Array, rows []int) *file.Array {
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
	dst := make([]byte, len(rows)*w)
	for k, r := range rows {
		copy(dst[k*w:(k+1)*w], src[r*w:(r+1)*w])
	}
	if c.Type.Kind != file.KindFixedSizeList {
		return &file.Array{Type: c.Type, Len: len(rows), Values: dst}
	}
	ch := c.Children[0]
	return &file.Array{Type: c.Type, Len: len(rows), Children: []*file.Array{{Type: ch.Type, Len: len(rows) * c.Type.Size, Values: dst}}}
}
