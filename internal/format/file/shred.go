package file

import (
	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// shredded is one leaf column's rows in the form a 2.1+ page stores: a
// level stream (raw repetition and definition levels, one per slot) and
// the values of the visible slots. It is the inverse of leafPage+unravel.
type shredded struct {
	rows   int
	slots  int
	layers []pb.RepDefLayer // innermost first
	rep    []uint16         // nil: no lists
	def    []uint16         // raw levels; nil: every slot valid
	maxRep uint16
	maxDef uint16
	values *block // visible values
	// rowStart[s] reports whether slot s starts a row (rep == maxRep).
}

// pathArrays walks a top-level array down a root-to-leaf path.
func pathArrays(nodes []*Field, top *Array) ([]*Array, error) {
	arrs := make([]*Array, len(nodes))
	arrs[0] = top
	for d := 1; d < len(nodes); d++ {
		parent, a := nodes[d-1], arrs[d-1]
		idx := 0
		if parent.Type.Kind == KindStruct {
			idx = -1
			for i, c := range parent.Children {
				if c == nodes[d] {
					idx = i
				}
			}
		}
		if idx < 0 || idx >= len(a.Children) {
			return nil, errf("array of %q has no child for %q", parent.Name, nodes[d].Name)
		}
		arrs[d] = a.Children[idx]
	}
	return arrs, nil
}

func isList(k Kind) bool { return k == KindList || k == KindLargeList }

// shredPath turns the rows of a top-level array into the level stream and
// values of one of its leaf columns.
func shredPath(nodes []*Field, top *Array) (*shredded, error) {
	return shredPathLayers(nodes, top, false)
}

// shredPathLayers is shredPath; with fromSchema the layers come from the
// schema (every nullable node nullable, every list emptyable) instead of
// the page's data, so every page of the column has the same layers (which
// LanceDB's full-zip reader needs when a batch spans pages).
func shredPathLayers(nodes []*Field, top *Array, fromSchema bool) (*shredded, error) {
	arrs, err := pathArrays(nodes, top)
	if err != nil {
		return nil, err
	}
	k := len(nodes)
	leaf := arrs[k-1]
	s := &shredded{rows: top.Len}
	// Which layers have nulls or empty lists (layers are per page, from the
	// data, so a nullable column without nulls needs no levels).
	hasNull := make([]bool, k)
	hasEmpty := make([]bool, k)
	nLists := 0
	for d := 0; d < k; d++ {
		a := arrs[d]
		hasNull[d] = a.Valid != nil && a.NullCount() > 0 || fromSchema && nodes[d].Nullable
		if isList(nodes[d].Type.Kind) {
			nLists++
			if fromSchema {
				hasEmpty[d] = true
				continue
			}
			for i := 0; i < a.Len; i++ {
				if a.Offsets[i] == a.Offsets[i+1] && a.IsValid(i) {
					hasEmpty[d] = true
					break
				}
			}
		}
	}
	// Layers innermost first, and the raw level of "null at depth d" and
	// "empty at depth d".
	nullLevel := make([]uint16, k)
	emptyLevel := make([]uint16, k)
	next := uint16(1)
	for d := k - 1; d >= 0; d-- {
		var l pb.RepDefLayer
		if isList(nodes[d].Type.Kind) {
			switch {
			case hasNull[d] && hasEmpty[d]:
				l = pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST
				nullLevel[d], emptyLevel[d] = next, next+1
				next += 2
			case hasNull[d]:
				l = pb.RepDefLayer_REPDEF_NULLABLE_LIST
				nullLevel[d] = next
				next++
			case hasEmpty[d]:
				l = pb.RepDefLayer_REPDEF_EMPTYABLE_LIST
				emptyLevel[d] = next
				next++
			default:
				l = pb.RepDefLayer_REPDEF_ALL_VALID_LIST
			}
		} else if hasNull[d] {
			l = pb.RepDefLayer_REPDEF_NULLABLE_ITEM
			nullLevel[d] = next
			next++
		} else {
			l = pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
		}
		s.layers = append(s.layers, l)
	}
	s.maxDef = next - 1
	s.maxRep = uint16(nLists)
	if nLists == 0 {
		// One slot per row; the outermost null layer names the level.
		s.slots = top.Len
		if s.maxDef > 0 {
			s.def = make([]uint16, top.Len)
			for d := k - 1; d >= 0; d-- {
				a := arrs[d]
				if !hasNull[d] {
					continue
				}
				for i := 0; i < a.Len; i++ {
					if !a.IsValid(i) {
						s.def[i] = nullLevel[d]
					}
				}
			}
		}
		s.values, err = leafBlock(nodes[k-1], leaf, nil)
		return s, err
	}
	// With lists: walk every row down the path.
	contRep := make([]uint16, k) // rep of a list's items after its first
	inner := 0
	for d := k - 1; d >= 0; d-- {
		if isList(nodes[d].Type.Kind) {
			inner++
			contRep[d] = uint16(inner - 1)
		}
	}
	// visibleNull[d]: a null at depth d keeps a value slot (no list below).
	visibleNull := make([]bool, k)
	for d := k - 1; d >= 0; d-- {
		if isList(nodes[d].Type.Kind) {
			break
		}
		visibleNull[d] = true
	}
	rep := make([]uint16, 0, leaf.Len+top.Len)
	var def []uint16
	if s.maxDef > 0 {
		def = make([]uint16, 0, leaf.Len+top.Len)
	}
	idx := make([]int, 0, leaf.Len)
	var visit func(d, i int, r uint16) error
	visit = func(d, i int, r uint16) error {
		a := arrs[d]
		if i < 0 || i >= a.Len {
			return errf("%q: index %d outside its %d values", nodes[d].Name, i, a.Len)
		}
		if !a.IsValid(i) {
			rep = append(rep, r)
			def = append(def, nullLevel[d])
			if visibleNull[d] {
				idx = append(idx, i)
			}
			return nil
		}
		switch {
		case isList(nodes[d].Type.Kind):
			lo, hi := a.Offsets[i], a.Offsets[i+1]
			if lo == hi {
				rep = append(rep, r)
				def = append(def, emptyLevel[d])
				return nil
			}
			for c := lo; c < hi; c++ {
				rr := contRep[d]
				if c == lo {
					rr = r
				}
				if err := visit(d+1, int(c), rr); err != nil {
					return err
				}
			}
		case d == k-1:
			rep = append(rep, r)
			if def != nil {
				def = append(def, 0)
			}
			idx = append(idx, i)
		default: // struct
			return visit(d+1, i, r)
		}
		return nil
	}
	for i := 0; i < top.Len; i++ {
		if err := visit(0, i, s.maxRep); err != nil {
			return nil, err
		}
	}
	s.rep, s.def, s.slots = rep, def, len(rep)
	s.values, err = leafBlock(nodes[k-1], leaf, idx)
	return s, err
}

// leafBlock is the values of a leaf array (rows idx, or all when idx is
// nil) as a block.
func leafBlock(f *Field, a *Array, idx []int) (*block, error) {
	if idx != nil {
		a = a.Take(idx)
	}
	t := f.Type
	n := a.Len
	switch {
	case t.Kind == KindNull:
		return &block{n: n, bits: 8, data: alloc(n)}, nil
	case t.Kind == KindBool:
		return &block{n: n, bits: 1, data: a.Values[:bitmapLen(n)]}, nil
	case t.IsVariable():
		b := &block{n: n, isVar: true, offsets: a.Offsets, data: a.Values}
		if len(a.fsst) == 1 {
			b.fsst, b.fsstT = a.fsst[0].tab, a.fsst[0].t
		}
		return b, nil
	case t.Kind == KindStruct:
		return packedBlock(f, a)
	case t.Kind == KindFixedSizeList:
		c := a.Children[0]
		it := f.Children[0].Type
		var cb *block
		if it.Kind == KindBool {
			cb = &block{n: c.Len, bits: 1, data: c.Values}
		} else {
			w := it.ByteWidth()
			cb = &block{n: c.Len, bits: 8 * w, data: c.Values[:c.Len*w]}
		}
		out := &block{n: n, dim: t.Size, child: cb}
		if c.Valid != nil && c.NullCount() > 0 {
			out.itemValid = c.Valid
		}
		return out, nil
	}
	w := t.ByteWidth()
	return &block{n: n, bits: 8 * w, data: a.Values[:n*w]}, nil
}
