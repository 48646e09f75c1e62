package file

import "slices"

// concatBlocks joins blocks of one shape (the chunks or pages of a column).
func concatBlocks(bs []*block, leaf DataType) (*block, error) {
	if len(bs) == 1 {
		return bs[0], nil
	}
	if len(bs) == 0 {
		return zeroBlock(leaf, 0), nil
	}
	// Null placeholders take the shape of the blocks with data.
	var shape *block
	total := 0
	for _, b := range bs {
		total += b.n
		if !b.zero && shape == nil {
			shape = b
		}
	}
	if shape == nil {
		z := zeroLike(bs[0], total)
		z.zero = true
		return z, nil
	}
	if shape != bs[0] || slices.ContainsFunc(bs, func(b *block) bool { return b.zero }) {
		nbs := make([]*block, len(bs))
		for i, b := range bs {
			nbs[i] = b
			if b.zero {
				nbs[i] = zeroLike(shape, b.n)
			}
		}
		bs = nbs
	}
	first := bs[0]
	if first.fields != nil {
		return concatFields(bs)
	}
	out := &block{bits: first.bits, isVar: first.isVar, dim: first.dim}
	for _, b := range bs {
		if b.isVar != first.isVar || b.dim != first.dim || (!b.isVar && b.dim == 0 && b.bits != first.bits) {
			return nil, errf("pages or chunks of one column decode to different shapes")
		}
		out.n += b.n
	}
	switch {
	case first.isVar:
		out.offsets = make([]int64, 1, out.n+1)
		total := 0
		for _, b := range bs {
			total += len(b.data)
		}
		out.data = make([]byte, 0, total)
		for _, b := range bs {
			base := int64(len(out.data))
			out.data = append(out.data, b.data...)
			for i := 1; i <= b.n; i++ {
				out.offsets = append(out.offsets, base+b.offsets[i])
			}
		}
	case first.dim > 0:
		kids := make([]*block, len(bs))
		anyValid := false
		for i, b := range bs {
			kids[i] = b.child
			anyValid = anyValid || b.itemValid != nil
		}
		c, err := concatBlocks(kids, DataType{})
		if err != nil {
			return nil, err
		}
		out.child = c
		if anyValid {
			out.itemValid = make([]byte, bitmapLen(out.n*out.dim))
			at := 0
			for _, b := range bs {
				m := b.n * b.dim
				if b.itemValid == nil {
					for k := 0; k < m; k++ {
						setBit(out.itemValid, at+k)
					}
				} else {
					copyBits(out.itemValid, at, b.itemValid, 0, m)
				}
				at += m
			}
		}
	case first.bits == 1:
		out.data = make([]byte, bitmapLen(out.n))
		at := 0
		for _, b := range bs {
			copyBits(out.data, at, b.data, 0, b.n)
			at += b.n
		}
	default:
		w := first.bits / 8
		out.data = alloc(out.n * w)
		at := 0
		for _, b := range bs {
			copy(out.data[at:], b.data[:b.n*w])
			at += b.n * w
		}
	}
	return out, nil
}

// concatFields joins decoded variable packed structs field by field.
func concatFields(bs []*block) (*block, error) {
	out := &block{fields: make([]*block, len(bs[0].fields))}
	for k := range out.fields {
		col := make([]*block, len(bs))
		for i, b := range bs {
			if len(b.fields) != len(out.fields) {
				return nil, errf("pages of one packed struct decode to different fields")
			}
			col[i] = b.fields[k]
		}
		c, err := concatBlocks(col, DataType{})
		if err != nil {
			return nil, err
		}
		out.fields[k] = c
	}
	for _, b := range bs {
		out.n += b.n
	}
	return out, nil
}

// concatPages joins the leaf pages of a column span.
func concatPages(ps []*leafPage, leaf DataType) (*leafPage, error) {
	if len(ps) == 1 {
		return ps[0], nil
	}
	out := &leafPage{}
	anyRep, anyDef := false, false
	vals := make([]*block, len(ps))
	for i, p := range ps {
		out.rows += p.rows
		out.slots += p.slots
		anyRep = anyRep || p.rep != nil
		anyDef = anyDef || p.def != nil
		vals[i] = p.values
	}
	if anyRep {
		out.rep = make([]uint16, 0, out.slots)
	}
	if anyDef {
		out.def = make([]uint16, 0, out.slots)
	}
	for _, p := range ps {
		if anyRep {
			if p.rep == nil {
				return nil, errf("a list column page without repetition levels")
			}
			out.rep = append(out.rep, p.rep...)
		}
		if anyDef {
			if p.def == nil {
				out.def = append(out.def, make([]uint16, p.slots)...)
			} else {
				out.def = append(out.def, p.def...)
			}
		}
	}
	v, err := concatBlocks(vals, leaf)
	if err != nil {
		return nil, err
	}
	out.values = v
	return out, nil
}

// layerOut is one level of the nested structure rebuilt from levels.
type layerOut struct {
	n       int
	valid   []byte  // nil: all valid
	offsets []int64 // lists: n+1 entries into the next level
}

// unravel rebuilds validity and offsets per level of the column's path
// (outermost first) from the slot stream. For a slot with repetition r
// and a code naming the layer j where it stops (null or empty list), every
// layer i whose threshold (the number of list layers inside it, plus one
// for a list) is at most r starts a new element; layers outside j are
// valid, j is null or an empty list, and item layers below a null item are
// null too, down to the first list.
func unravel(lp *leafPage, lists []bool) ([]layerOut, error) {
	k := len(lists)
	if lp.rep == nil && !slices.Contains(lists, true) {
		return unravelFlat(lp, k)
	}
	thr := make([]int, k)
	inner := 0
	for i := 0; i < k; i++ {
		thr[i] = inner
		if lists[i] {
			inner++
			thr[i] = inner
		}
	}
	outs := make([]layerOut, k) // innermost first while building
	anyNull := make([]bool, k)
	valid := make([][]bool, k)
	offs := make([][]int64, k)
	for i := range valid {
		valid[i] = make([]bool, 0, lp.rows)
	}
	for s := 0; s < lp.slots; s++ {
		r := k + 1 // without repetition every slot starts every layer
		if lp.rep != nil {
			r = int(lp.rep[s])
		}
		j, empty := -1, false
		if lp.def != nil && lp.def[s] != 0 {
			c := int(lp.def[s]) - 1
			j, empty = c/2, c%2 == 1
			if j >= k {
				return nil, errf("definition code for layer %d of %d", j, k)
			}
		}
		masked := false
	layers:
		for i := k - 1; i >= 0; i-- {
			if r < thr[i] {
				continue
			}
			if lists[i] {
				start := int64(0)
				if i > 0 {
					start = int64(len(valid[i-1]))
				}
				offs[i] = append(offs[i], start)
				switch {
				case masked || (j == i && !empty):
					valid[i] = append(valid[i], false)
					anyNull[i] = true
				case j == i && empty:
					valid[i] = append(valid[i], true)
				default:
					valid[i] = append(valid[i], true)
					continue
				}
				break layers
			}
			if masked || j == i {
				valid[i] = append(valid[i], false)
				anyNull[i] = true
				masked = true
			} else {
				valid[i] = append(valid[i], true)
			}
		}
	}
	for i := 0; i < k; i++ {
		o := layerOut{n: len(valid[i])}
		if anyNull[i] {
			o.valid = make([]byte, bitmapLen(o.n))
			for e, v := range valid[i] {
				if v {
					setBit(o.valid, e)
				}
			}
		}
		if lists[i] {
			end := int64(0)
			if i > 0 {
				end = int64(len(valid[i-1]))
			}
			o.offsets = append(offs[i], end)
		}
		outs[k-1-i] = o
	}
	if outs[0].n != lp.rows {
		return nil, errf("levels describe %d rows, page has %d", outs[0].n, lp.rows)
	}
	if outs[k-1].n != lp.values.n {
		return nil, errf("levels describe %d values, page has %d", outs[k-1].n, lp.values.n)
	}
	return outs, nil
}

// buildPath turns a column's levels and values into the top-level array of
// its path, holding only this column's branch.
func buildPath(nodes []*Field, outs []layerOut, vals *block) (*Array, error) {
	var build func(d int) (*Array, error)
	build = func(d int) (*Array, error) {
		f := nodes[d]
		o := outs[d]
		a := &Array{Type: f.Type, Name: f.Name, Len: o.n, Valid: o.valid}
		if d == len(nodes)-1 {
			if err := fillValues(a, f, vals); err != nil {
				return nil, err
			}
			return a, nil
		}
		c, err := build(d + 1)
		if err != nil {
			return nil, err
		}
		if f.Type.Kind == KindList || f.Type.Kind == KindLargeList {
			a.Offsets = o.offsets
		}
		a.Children = []*Array{c}
		return a, nil
	}
	return build(0)
}

// fillValues sets a leaf array's values from its block.
func fillValues(a *Array, f *Field, b *block) error {
	t := f.Type
	n := a.Len
	switch {
	case t.Kind == KindNull:
		return nil
	case t.Kind == KindStruct && f.Packed():
		return fillPacked(a, f, b)
	case t.Kind == KindBool:
		if b.bits == 8 && !b.isVar && b.dim == 0 {
			// Full-zip stores a byte per bool.
			bm := make([]byte, bitmapLen(b.n))
			for i := 0; i < b.n; i++ {
				if b.data[i] != 0 {
					setBit(bm, i)
				}
			}
			b = &block{n: b.n, bits: 1, data: bm}
		}
		if b.bits != 1 || b.isVar {
			return errf("bool column %q decodes to %d-bit values", f.Name, b.bits)
		}
		a.Values = b.data
	case t.IsVariable():
		if !b.isVar {
			return errf("%s column %q decodes to fixed-width values", t, f.Name)
		}
		a.Offsets = b.offsets
		a.Values = b.data
	case t.Kind == KindFixedSizeList:
		item := f.Children[0]
		ca := &Array{Type: item.Type, Name: item.Name, Len: n * t.Size}
		var cb *block
		switch {
		case b.dim == t.Size:
			cb = b.child
			if b.itemValid != nil {
				ca.Valid = b.itemValid
			}
		case b.dim == 0 && !b.isVar && b.bits == 8*t.Size*item.Type.ByteWidth():
			cb = &block{n: n * t.Size, bits: b.bits / t.Size, data: b.data}
		default:
			return errf("fixed-size list column %q decodes to an incompatible block", f.Name)
		}
		if cb.data == nil && !cb.isVar {
			cb = zeroBlock(item.Type, n*t.Size)
		}
		if err := fillValues(ca, item, cb); err != nil {
			return err
		}
		a.Children = []*Array{ca}
	default:
		w := t.ByteWidth()
		if b.isVar || b.dim > 0 || b.bits != 8*w {
			return errf("%s column %q decodes to %d-bit values", t, f.Name, b.bits)
		}
		data := b.data
		if len(data) > 0 && uintptrOf(data)%8 != 0 {
			al := alloc(len(data))
			copy(al, data)
			data = al
		}
		a.Values = data
	}
	if b.n != n {
		return errf("column %q has %d values for %d slots", f.Name, b.n, n)
	}
	return nil
}

// mergeInto adds src's branch to dst, two path arrays of one top-level
// field that share their ancestors.
func mergeInto(dst, src *Array) {
	if dst.Type.Kind != KindStruct && dst.Type.Kind != KindList && dst.Type.Kind != KindLargeList {
		return
	}
	if dst.Type.Kind != KindStruct {
		mergeInto(dst.Children[0], src.Children[0])
		return
	}
	for _, sc := range src.Children {
		found := false
		for _, dc := range dst.Children {
			if dc.Name == sc.Name {
				mergeInto(dc, sc)
				found = true
				break
			}
		}
		if !found {
			dst.Children = append(dst.Children, sc)
		}
	}
}

// unravelFlat is unravel without lists: one element per slot at every
// layer; layer i is valid unless the slot is null at layer i or outside it.
func unravelFlat(lp *leafPage, k int) ([]layerOut, error) {
	n := lp.slots
	if n != lp.rows {
		return nil, errf("levels describe %d rows, page has %d", n, lp.rows)
	}
	if lp.values.n != n {
		return nil, errf("levels describe %d values, page has %d", n, lp.values.n)
	}
	outs := make([]layerOut, k)
	for d := range outs {
		outs[d].n = n
	}
	if lp.def == nil {
		return outs, nil
	}
	for s, c := range lp.def {
		if c == 0 {
			continue
		}
		j := int(c-1) / 2
		if j >= k || c%2 == 0 {
			return nil, errf("definition code %d for %d item layers", c, k)
		}
		// Layers 0..j (innermost first) are null: depths k-1-j .. k-1.
		for i := 0; i <= j; i++ {
			o := &outs[k-1-i]
			if o.valid == nil {
				o.valid = make([]byte, bitmapLen(n))
				for b := range o.valid {
					o.valid[b] = 0xff
				}
			}
			o.valid[s>>3] &^= 1 << (s & 7)
		}
	}
	return outs, nil
}
