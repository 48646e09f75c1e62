package file

import (
	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// Packed structs (field metadata lance-encoding:packed = "true"): the
// struct is one column whose values are whole rows. With fixed-width
// children a row is the children's values side by side (2.0:
// PackedStructV20 over one buffer; 2.1+: PackedStruct over a fixed-width
// block of the summed width, mini-block or full-zip). In 2.2, children of
// variable width make a VariablePackedStruct full-zip page: a row is, per
// child in order, its fixed-width bytes or a length then its bytes.
//
// A decoded packed struct is a block of rows (fixed width) or a block
// whose fields hold one block per child (variable); fillPacked turns
// either into the struct's child arrays.

// packedVar marks a variable-width child in block.packed.
const packedVar = -1

// packedLayout is the bits of each child of a packed struct (packedVar for
// strings and binaries) as the writer lays rows out, or an error for a
// struct whose children cannot be packed.
func packedLayout(f *Field) ([]int, bool, error) {
	if len(f.Children) == 0 {
		return nil, false, errf("packed struct %q has no children", f.Name)
	}
	out := make([]int, len(f.Children))
	anyVar := false
	for i, c := range f.Children {
		switch w := c.Type.ByteWidth(); {
		case c.Type.IsVariable():
			out[i] = packedVar
			anyVar = true
		case w > 0 && len(c.Children) == 0:
			out[i] = 8 * w
		default:
			return nil, false, errf("packed struct %q: child %q of type %s cannot be packed", f.Name, c.Name, c.Type)
		}
	}
	return out, anyVar, nil
}

// checkPackedBits checks a PackedStruct's widths against the rows' width.
func checkPackedBits(bpv []uint64, rowBits int) error {
	sum := uint64(0)
	for _, b := range bpv {
		if b == 0 || b%8 != 0 || b > 1<<20 {
			return errf("packed struct child of %d bits", b)
		}
		sum += b
	}
	if len(bpv) == 0 || sum != uint64(rowBits) {
		return errf("packed struct children of %d bits in rows of %d", sum, rowBits)
	}
	return nil
}

// unpackedFixed checks a decoded fixed-width packed block.
func unpackedFixed(ps *pb.PackedStruct, b *block) (*block, error) {
	if b.isVar || b.dim > 0 || b.fields != nil {
		return nil, errf("packed struct over a block that is not fixed width")
	}
	if err := checkPackedBits(ps.GetBitsPerValue(), b.bits); err != nil {
		return nil, err
	}
	return b, nil
}

// unpackVariable splits full-zip rows of a VariablePackedStruct into one
// block per child and undoes each child's compression.
func unpackVariable(vp *pb.VariablePackedStruct, b *block) (*block, error) {
	if !b.isVar {
		return nil, errf("variable packed struct over fixed-width values")
	}
	fes := vp.GetFields()
	if len(fes) == 0 || len(fes) > 1<<12 {
		return nil, errf("variable packed struct of %d fields", len(fes))
	}
	out := &block{n: b.n, fields: make([]*block, len(fes))}
	widths := make([]int, len(fes))
	for k, fe := range fes {
		switch l := fe.GetLayout().(type) {
		case *pb.VariablePackedStruct_FieldEncoding_BitsPerValue:
			if l.BitsPerValue == 0 || l.BitsPerValue%8 != 0 || l.BitsPerValue > 1<<20 {
				return nil, errf("variable packed struct field of %d bits", l.BitsPerValue)
			}
			widths[k] = int(l.BitsPerValue / 8)
			out.fields[k] = &block{n: b.n, bits: int(l.BitsPerValue), data: alloc(b.n * widths[k])}
		case *pb.VariablePackedStruct_FieldEncoding_BitsPerLength:
			if l.BitsPerLength != 32 && l.BitsPerLength != 64 {
				return nil, errf("variable packed struct lengths of %d bits", l.BitsPerLength)
			}
			widths[k] = -int(l.BitsPerLength / 8)
			out.fields[k] = &block{n: b.n, isVar: true, offsets: make([]int64, b.n+1)}
		default:
			return nil, errf("variable packed struct field without a layout")
		}
	}
	for i := 0; i < b.n; i++ {
		row := b.data[b.offsets[i]:b.offsets[i+1]]
		if len(row) == 0 {
			// A null row: placeholders.
			for k := range fes {
				if fb := out.fields[k]; fb.isVar {
					fb.offsets[i+1] = int64(len(fb.data))
				}
			}
			continue
		}
		p := 0
		for k, w := range widths {
			fb := out.fields[k]
			if w > 0 {
				if p+w > len(row) {
					return nil, errf("packed row %d truncated", i)
				}
				copy(fb.data[i*w:], row[p:p+w])
				p += w
				continue
			}
			if p-w > len(row) {
				return nil, errf("packed row %d truncated", i)
			}
			var l uint64
			if w == -4 {
				l = uint64(le.Uint32(row[p:]))
			} else {
				l = le.Uint64(row[p:])
			}
			p -= w
			if l > uint64(len(row)-p) {
				return nil, errf("packed row %d: value of %d bytes runs past the row", i, l)
			}
			fb.data = append(fb.data, row[p:p+int(l)]...)
			p += int(l)
			fb.offsets[i+1] = int64(len(fb.data))
		}
		if p != len(row) {
			return nil, errf("packed row %d has %d bytes past its fields", i, len(row)-p)
		}
	}
	for k, fe := range fes {
		fb, err := perValue(fe.GetValue(), out.fields[k])
		if err != nil {
			return nil, err
		}
		out.fields[k] = fb
	}
	return out, nil
}

// fixedBits20 is the width of a 2.0 packed struct child (a flat encoding,
// possibly under a no-nulls nullable).
func fixedBits20(e *pb.ArrayEncoding) (int, error) {
	for d := 0; d < 4 && e != nil; d++ {
		switch c := e.GetArrayEncoding().(type) {
		case *pb.ArrayEncoding_Flat:
			return int(c.Flat.GetBitsPerValue()), nil
		case *pb.ArrayEncoding_Nullable:
			e = c.Nullable.GetNoNulls().GetValues()
			continue
		}
		break
	}
	return 0, errf("2.0 packed struct child encoded as %T", e.GetArrayEncoding())
}

func packed20(ps *pb.PackedStructV20, bufs [][]byte, n int) (*decoded20, error) {
	b, err := buffer20(ps.GetBuffer(), bufs)
	if err != nil {
		return nil, err
	}
	var bpv []uint64
	sum := 0
	for _, in := range ps.GetInner() {
		w, err := fixedBits20(in)
		if err != nil {
			return nil, err
		}
		bpv = append(bpv, uint64(w))
		sum += w
	}
	if err := checkPackedBits(bpv, sum); err != nil {
		return nil, err
	}
	if err := checkCount(uint64(n), len(b)); err != nil {
		return nil, err
	}
	blk, err := fixedBlock(n, sum, b)
	if err != nil {
		return nil, err
	}
	return &decoded20{b: blk}, nil
}

// fillPacked sets a packed struct array's children from its block.
func fillPacked(a *Array, f *Field, b *block) error {
	n := a.Len
	if b.n != n {
		return errf("packed struct %q has %d rows for %d slots", f.Name, b.n, n)
	}
	a.Children = make([]*Array, len(f.Children))
	if b.fields != nil {
		if len(b.fields) != len(f.Children) {
			return errf("packed struct %q has %d fields, schema %d", f.Name, len(b.fields), len(f.Children))
		}
		for i, c := range f.Children {
			ca := &Array{Type: c.Type, Name: c.Name, Len: n}
			if err := fillValues(ca, c, b.fields[i]); err != nil {
				return err
			}
			a.Children[i] = ca
		}
		return nil
	}
	if b.isVar || b.dim > 0 {
		return errf("packed struct %q decodes to an incompatible block", f.Name)
	}
	widths := make([]int, len(f.Children))
	row := 0
	for i, c := range f.Children {
		w := c.Type.ByteWidth()
		if w == 0 || len(c.Children) > 0 {
			return errf("packed struct %q: child %q of type %s is not fixed width", f.Name, c.Name, c.Type)
		}
		widths[i] = w
		row += w
	}
	zero := b.bits == 0 || b.data == nil
	if !zero && b.bits != 8*row {
		return errf("packed struct %q: rows of %d bits, children of %d", f.Name, b.bits, 8*row)
	}
	at := 0
	for i, c := range f.Children {
		w := widths[i]
		vals := alloc(n * w)
		if !zero {
			for r := 0; r < n; r++ {
				copy(vals[r*w:(r+1)*w], b.data[r*row+at:])
			}
		}
		at += w
		a.Children[i] = &Array{Type: c.Type, Name: c.Name, Len: n, Values: vals}
	}
	return nil
}

// packedBlock is a packed struct array's rows as a block for the writer:
// fixed-width rows, or (with variable-width children) one value per row.
func packedBlock(f *Field, a *Array) (*block, error) {
	layout, anyVar, err := packedLayout(f)
	if err != nil {
		return nil, err
	}
	if len(a.Children) != len(f.Children) {
		return nil, errf("packed struct %q has %d children, schema %d", f.Name, len(a.Children), len(f.Children))
	}
	n := a.Len
	for i, c := range a.Children {
		if c.Len < n {
			return nil, errf("packed struct %q child %q has %d values for %d rows", f.Name, f.Children[i].Name, c.Len, n)
		}
		if c.NullCount() > 0 {
			return nil, errf("packed struct %q: child %q has nulls, which a packed struct cannot store", f.Name, f.Children[i].Name)
		}
	}
	if !anyVar {
		row := 0
		for _, b := range layout {
			row += b / 8
		}
		out := alloc(n * row)
		at := 0
		for i, c := range a.Children {
			w := layout[i] / 8
			for r := 0; r < n; r++ {
				copy(out[r*row+at:r*row+at+w], c.Values[r*w:(r+1)*w])
			}
			at += w
		}
		return &block{n: n, bits: 8 * row, data: out, packed: layout}, nil
	}
	out := &block{n: n, isVar: true, offsets: make([]int64, n+1), packed: layout}
	for r := 0; r < n; r++ {
		if a.IsValid(r) {
			for i, c := range a.Children {
				if w := layout[i]; w > 0 {
					out.data = append(out.data, c.Values[r*w/8:(r+1)*w/8]...)
					continue
				}
				v := c.Values[c.Offsets[r]:c.Offsets[r+1]]
				if uint64(len(v)) > 1<<32-1 {
					return nil, errf("packed struct %q: value of %d bytes", f.Name, len(v))
				}
				out.data = le.AppendUint32(out.data, uint32(len(v)))
				out.data = append(out.data, v...)
			}
		}
		out.offsets[r+1] = int64(len(out.data))
	}
	return out, nil
}

// packedFixedEnc wraps the encoding of fixed-width packed rows.
func packedFixedEnc(layout []int, inner *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	bpv := make([]uint64, len(layout))
	for i, b := range layout {
		bpv[i] = uint64(b)
	}
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_PackedStruct{PackedStruct: &pb.PackedStruct{BitsPerValue: bpv, Values: inner}}}
}

// packedVarEnc is the full-zip value encoding of variable packed rows.
func packedVarEnc(layout []int) *pb.CompressiveEncoding {
	vp := &pb.VariablePackedStruct{}
	for _, b := range layout {
		fe := &pb.VariablePackedStruct_FieldEncoding{}
		if b > 0 {
			fe.Value = flatEnc(b)
			fe.Layout = &pb.VariablePackedStruct_FieldEncoding_BitsPerValue{BitsPerValue: uint64(b)}
		} else {
			fe.Value = variableEnc(32)
			fe.Layout = &pb.VariablePackedStruct_FieldEncoding_BitsPerLength{BitsPerLength: 32}
		}
		vp.Fields = append(vp.Fields, fe)
	}
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_VariablePackedStruct{VariablePackedStruct: vp}}
}

// fullZipFSLValid splits full-zip fixed-size lists with item validity:
// each value is the items' validity bitmap (a bit per item, whole bytes)
// then the items.
func fullZipFSLValid(fsl *pb.FixedSizeList, b *block) (*block, error) {
	dim := int(fsl.GetItemsPerValue())
	ib, ok := flatBits(fsl.GetValues())
	if !ok || dim <= 0 || dim > 1<<24 || b.isVar || b.dim > 0 || ib <= 0 || ib%8 != 0 && ib != 1 {
		return nil, errf("unsupported full-zip fixed-size list with item validity")
	}
	vb := (dim + 7) / 8
	items := (dim*ib + 7) / 8
	row := vb + items
	if b.bits != 8*row {
		return nil, errf("full-zip fixed-size list values of %d bits, want %d", b.bits, 8*row)
	}
	n := b.n
	valid := make([]byte, bitmapLen(n*dim))
	var data []byte
	if ib == 1 {
		data = make([]byte, bitmapLen(n*dim))
	} else {
		data = alloc(n * items)
	}
	for r := 0; r < n; r++ {
		v := b.data[r*row : (r+1)*row]
		copyBits(valid, r*dim, v[:vb], 0, dim)
		if ib == 1 {
			copyBits(data, r*dim, v[vb:], 0, dim)
		} else {
			copy(data[r*items:], v[vb:])
		}
	}
	return &block{n: n, dim: dim, itemValid: valid, child: &block{n: n * dim, bits: ib, data: data}}, nil
}
