package file

import (
	"fmt"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// Format 2.0 writing: every schema node has its own column; a page is an
// ArrayEncoding tree whose leaves name page buffers by index.

func bufRef(i int) *pb.BufferRef { return &pb.BufferRef{BufferIndex: uint32(i)} }

func flat20(bits, buf int) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Flat{Flat: &pb.FlatV20{BitsPerValue: uint64(bits), Buffer: bufRef(buf)}}}
}

func noNulls20(v *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_NoNulls{NoNulls: &pb.Nullable_NoNull{Values: v}}}}}
}

func someNulls20(validityBuf int, v *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_SomeNulls{SomeNulls: &pb.Nullable_SomeNull{Validity: flat20(1, validityBuf), Values: v}}}}}
}

// validity20 returns a's validity bitmap (nil when all valid) cut to its
// rows, and whether every row is null.
func validity20(a *Array) ([]byte, bool) {
	if a.Valid == nil {
		return nil, false
	}
	nc := a.NullCount()
	if nc == 0 {
		return nil, false
	}
	b := make([]byte, bitmapLen(a.Len))
	copyBits(b, 0, a.Valid, 0, a.Len)
	return b, nc == a.Len && a.Len > 0
}

// writeField20 writes one page per column of the field's node tree.
func (w *Writer) writeField20(f *Field, a *Array, prio uint64) error {
	var bufs [][]byte
	var enc *pb.ArrayEncoding
	valid, allNull := validity20(a)
	t := f.Type
	switch {
	case t.Kind == KindStruct && f.Packed():
		if valid != nil {
			return errf("format 2.0 cannot store null structs (field %q)", f.Name)
		}
		blk, err := packedBlock(f, a)
		if err != nil {
			return err
		}
		if blk.isVar {
			return errf("packed struct %q with variable-width children needs format 2.2", f.Name)
		}
		ps := &pb.PackedStructV20{Buffer: bufRef(0)}
		for _, b := range blk.packed {
			ps.Inner = append(ps.Inner, noNulls20(flat20(b, 0)))
		}
		bufs = [][]byte{blk.data}
		enc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_PackedStruct{PackedStruct: ps}}
	case t.Kind == KindStruct:
		if valid != nil {
			return errf("format 2.0 cannot store null structs (field %q)", f.Name)
		}
		// One struct page for the whole file, written at Close: LanceDB's
		// 2.0 reader does not take several (its pages carry no data).
		w.colRows[f.Column] += uint64(a.Len)
		for i, c := range f.Children {
			if err := w.writeField20(c, a.Children[i], prio); err != nil {
				return err
			}
		}
		return nil
	case isList(t.Kind):
		base := a.Offsets[0]
		items := a.Offsets[a.Len] - base
		adj := uint64(items) + 1
		ends := alloc(8 * a.Len)
		for i := 0; i < a.Len; i++ {
			e := uint64(a.Offsets[i+1] - base)
			if !a.IsValid(i) {
				e += adj
			}
			le.PutUint64(ends[8*i:], e)
		}
		enc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_List{List: &pb.ListV20{
			Offsets: noNulls20(flat20(64, 0)), NullOffsetAdjustment: adj, NumItems: uint64(items)}}}
		if err := w.addPage20(f.Column, [][]byte{ends}, a.Len, enc, prio); err != nil {
			return err
		}
		child := a.Children[0]
		if base != 0 || int64(child.Len) != items {
			child = child.Slice(int(base), int(a.Offsets[a.Len]))
		}
		return w.writeField20(f.Children[0], child, prio)
	case t.DictIndex != KindNull:
		// Before the all-null case: LanceDB writes even an all-null
		// dictionary field as a dictionary (of one null item).
		d, err := arrowDict20Page(a, valid, t.DictIndex)
		if err != nil {
			return fmt.Errorf("field %q: %w", f.Name, err)
		}
		bufs, enc = d.bufs, d.enc
		valid = nil // carried by the null item
	case allNull && t.Kind != KindFixedSizeList:
		enc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
			Nullability: &pb.Nullable_AllNulls{AllNulls: &pb.Nullable_AllNull{}}}}}
	case t.IsVariable():
		// LanceDB 2.0 keeps large strings and binaries plain (its reader
		// takes dictionary items as 32-bit-offset values).
		if !isLarge(t.Kind) {
			if d := dict20Page(a, valid); d != nil {
				bufs, enc = d.bufs, d.enc
				break
			}
		}
		bufs, enc = binary20Page(a, valid, 0)
		valid = nil // carried by the null adjustment
	case t.Kind == KindFixedSizeList:
		c := a.Children[0]
		it := f.Children[0].Type
		bitsPer := 1
		if it.Kind != KindBool {
			bitsPer = 8 * it.ByteWidth()
		}
		cv, _ := validity20(c)
		nb := 0 // the list's own validity is prepended below
		var items *pb.ArrayEncoding
		if cv != nil {
			bufs = append(bufs, cv)
			items = someNulls20(nb, flat20(bitsPer, nb+1))
		} else {
			items = noNulls20(flat20(bitsPer, nb))
		}
		bufs = append(bufs, fixedRange(&block{bits: bitsPer, data: c.Values}, 0, c.Len))
		enc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeListV20{
			Dimension: uint32(t.Size), Items: items}}}
	case t.Kind == KindBool:
		bufs = [][]byte{fixedRange(&block{bits: 1, data: a.Values}, 0, a.Len)}
		enc = flat20(1, 0)
	case t.Kind == KindNull:
		enc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
			Nullability: &pb.Nullable_AllNulls{AllNulls: &pb.Nullable_AllNull{}}}}}
	default:
		wd := t.ByteWidth()
		bufs = [][]byte{a.Values[:a.Len*wd]}
		enc = flat20(8*wd, 0)
	}
	if enc.GetNullable().GetAllNulls() == nil && t.Kind != KindNull && t.Kind != KindStruct {
		if valid != nil {
			shiftBuffers(enc)
			bufs = append([][]byte{valid}, bufs...)
			enc = someNulls20(0, enc)
		} else if !t.IsVariable() {
			enc = noNulls20(enc)
		}
	}
	return w.addPage20(f.Column, bufs, a.Len, enc, prio)
}

func (w *Writer) addPage20(col int, bufs [][]byte, rows int, e *pb.ArrayEncoding, prio uint64) error {
	enc, err := wrapEncoding(e)
	if err != nil {
		return err
	}
	return w.addPage(col, bufs, uint64(rows), enc, prio)
}

// shiftBuffers renumbers every buffer an encoding names by one (a validity
// buffer goes first).
func shiftBuffers(e *pb.ArrayEncoding) {
	switch c := e.GetArrayEncoding().(type) {
	case *pb.ArrayEncoding_Flat:
		c.Flat.Buffer.BufferIndex++
	case *pb.ArrayEncoding_Nullable:
		switch n := c.Nullable.GetNullability().(type) {
		case *pb.Nullable_NoNulls:
			shiftBuffers(n.NoNulls.Values)
		case *pb.Nullable_SomeNulls:
			shiftBuffers(n.SomeNulls.Validity)
			shiftBuffers(n.SomeNulls.Values)
		}
	case *pb.ArrayEncoding_FixedSizeList:
		shiftBuffers(c.FixedSizeList.Items)
	case *pb.ArrayEncoding_Binary:
		shiftBuffers(c.Binary.Indices)
		shiftBuffers(c.Binary.Bytes)
	case *pb.ArrayEncoding_Dictionary:
		shiftBuffers(c.Dictionary.Indices)
		shiftBuffers(c.Dictionary.Items)
	}
}

// binary20Page is a 2.0 Binary encoding: end offsets (u64, a null's raised
// by the null adjustment) in buffer first, bytes in buffer first+1.
func binary20Page(a *Array, valid []byte, first int) ([][]byte, *pb.ArrayEncoding) {
	base := a.Offsets[0]
	total := uint64(a.Offsets[a.Len] - base)
	adj := total + 1
	ends := alloc(8 * a.Len)
	for i := 0; i < a.Len; i++ {
		e := uint64(a.Offsets[i+1] - base)
		if valid != nil && !getBit(valid, i) {
			e += adj
		}
		le.PutUint64(ends[8*i:], e)
	}
	enc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Binary{Binary: &pb.Binary{
		Indices: noNulls20(flat20(64, first)), Bytes: flat20(8, first+1), NullAdjustment: adj}}}
	return [][]byte{ends, a.Values[base:a.Offsets[a.Len]]}, enc
}

type page20 struct {
	bufs [][]byte
	enc  *pb.ArrayEncoding
}

// dict20Page encodes low-cardinality strings as a 2.0 dictionary: 1-based
// indices (0 is null) and the distinct values as a Binary.
func dict20Page(a *Array, valid []byte) *page20 {
	if a.Len < 100 {
		return nil
	}
	limit := min(a.Len/10, 1<<16-2)
	ids := map[string]uint32{}
	idx := make([]uint32, a.Len)
	var items []int // row of each item's first use
	var itemBytes int64
	for i := 0; i < a.Len; i++ {
		if valid != nil && !getBit(valid, i) {
			continue
		}
		s := a.Values[a.Offsets[i]:a.Offsets[i+1]]
		id, ok := ids[string(s)]
		if !ok {
			if len(ids) >= limit {
				return nil
			}
			items = append(items, i)
			id = uint32(len(items))
			ids[string(s)] = id
			itemBytes += int64(len(s))
		}
		idx[i] = id
	}
	if itemBytes+8*int64(len(items)) > (a.Offsets[a.Len]-a.Offsets[0])/2 || len(items) == 0 {
		return nil
	}
	iw := 1
	if len(items) >= 255 {
		iw = 2
	}
	ib := make([]byte, iw*a.Len)
	for i, v := range idx {
		if iw == 1 {
			ib[i] = byte(v)
		} else {
			le.PutUint16(ib[2*i:], uint16(v))
		}
	}
	dict := a.Take(items)
	dict.Valid = nil
	db, denc := binary20Page(dict, nil, 1)
	enc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.DictionaryV20{
		Indices: noNulls20(flat20(8*iw, 0)), Items: denc, NumDictionaryItems: uint32(len(items))}}}
	return &page20{bufs: append([][]byte{ib}, db...), enc: enc}
}

// arrowDict20Page encodes a field of an Arrow dictionary type as LanceDB
// 2.0 does: 0-based indices of the index type's width, the distinct
// values in first-use order as a Binary, and, when a row is null, one null
// item at the end (through the Binary's null adjustment) that null rows
// point at.
func arrowDict20Page(a *Array, valid []byte, ix Kind) (*page20, error) {
	if !a.Type.IsVariable() {
		return arrowDictFixed20Page(a, valid, ix)
	}
	a = a.expandFSST()
	bw := dictIndexBits(ix)
	limit := dictIndexLimit(ix)
	ids := map[string]uint64{}
	idx := make([]uint64, a.Len)
	items := &Array{Type: DataType{Kind: a.Type.Kind}, Offsets: []int64{0}}
	var nulls []int
	for i := 0; i < a.Len; i++ {
		if valid != nil && !getBit(valid, i) || a.Valid != nil && !a.IsValid(i) {
			nulls = append(nulls, i)
			continue
		}
		s := a.Values[a.Offsets[i]:a.Offsets[i+1]]
		id, ok := ids[string(s)]
		if !ok {
			id = uint64(items.Len)
			ids[string(s)] = id
			items.Values = append(items.Values, s...)
			items.Offsets = append(items.Offsets, int64(len(items.Values)))
			items.Len++
		}
		idx[i] = id
	}
	var iv []byte
	if len(nulls) > 0 {
		for _, i := range nulls {
			idx[i] = uint64(items.Len)
		}
		items.Offsets = append(items.Offsets, int64(len(items.Values)))
		items.Len++
		iv = make([]byte, bitmapLen(items.Len))
		for i := 0; i < items.Len-1; i++ {
			setBit(iv, i)
		}
	}
	if uint64(items.Len) > limit {
		return nil, errf("%d distinct values do not fit a %s dictionary index", items.Len, ix)
	}
	ib := alloc(bw / 8 * a.Len)
	for i, v := range idx {
		putUint(ib[i*bw/8:], bw, v)
	}
	db, denc := binary20Page(items, iv, 1)
	enc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.DictionaryV20{
		Indices: noNulls20(flat20(bw, 0)), Items: denc, NumDictionaryItems: uint32(items.Len)}}}
	return &page20{bufs: append([][]byte{ib}, db...), enc: enc}, nil
}

// arrowDictFixed20Page is arrowDict20Page for fixed-width values (a
// dictionary of numbers), laid out as LanceDB 0.39 writes it: the items
// are a flat array of the value width, nullable with a trailing null item
// (validity buffer, then values) when a row is null, all-null items (no
// values buffer) when every row is.
func arrowDictFixed20Page(a *Array, valid []byte, ix Kind) (*page20, error) {
	// Booleans are items of one bit (itemBits), the others of w bytes.
	w, bits := a.Type.ByteWidth(), 8*a.Type.ByteWidth()
	if a.Type.Kind == KindBool {
		bits = 1
	} else if w <= 0 {
		return nil, errf("dictionary of %s values", a.Type.Kind)
	}
	bw := dictIndexBits(ix)
	ids := map[string]uint64{}
	idx := make([]uint64, a.Len)
	var items []byte
	var nulls []int
	for i := 0; i < a.Len; i++ {
		if valid != nil && !getBit(valid, i) || a.Valid != nil && !a.IsValid(i) {
			nulls = append(nulls, i)
			continue
		}
		var v []byte
		if bits == 1 {
			v = []byte{0}
			if getBit(a.Values, i) {
				v[0] = 1
			}
		} else {
			v = a.Values[i*w : (i+1)*w]
		}
		id, ok := ids[string(v)]
		if !ok {
			id = uint64(len(ids))
			ids[string(v)] = id
			if bits == 1 {
				items = appendBit(items, int(id), v[0] == 1)
			} else {
				items = append(items, v...)
			}
		}
		idx[i] = id
	}
	nd := len(ids)
	if len(nulls) > 0 {
		for _, i := range nulls {
			idx[i] = uint64(nd)
		}
		nd++
	}
	if uint64(nd) > dictIndexLimit(ix) {
		return nil, errf("%d distinct values do not fit a %s dictionary index", nd, ix)
	}
	ib := alloc(bw / 8 * a.Len)
	for i, v := range idx {
		putUint(ib[i*bw/8:], bw, v)
	}
	bufs := [][]byte{ib}
	var denc *pb.ArrayEncoding
	switch {
	case len(ids) == 0:
		denc = &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
			Nullability: &pb.Nullable_AllNulls{AllNulls: &pb.Nullable_AllNull{}}}}}
	case len(nulls) > 0:
		// The null item's value is zero.
		if bits == 1 {
			items = appendBit(items, nd-1, false)
		} else {
			items = append(items, make([]byte, w)...)
		}
		iv := make([]byte, bitmapLen(nd))
		for i := 0; i < nd-1; i++ {
			setBit(iv, i)
		}
		bufs = append(bufs, iv, items)
		denc = someNulls20(1, flat20(bits, 2))
	default:
		bufs = append(bufs, items)
		denc = noNulls20(flat20(bits, 1))
	}
	enc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.DictionaryV20{
		Indices: noNulls20(flat20(bw, 0)), Items: denc, NumDictionaryItems: uint32(nd)}}}
	return &page20{bufs: bufs, enc: enc}, nil
}

// appendBit sets bit i (the next one) of bitmap b, growing it by a byte
// when i starts one.
func appendBit(b []byte, i int, v bool) []byte {
	if i%8 == 0 {
		b = append(b, 0)
	}
	if v {
		setBit(b, i)
	}
	return b
}

// wideFixedRows reports a top-level field of fixed-width rows of 256 bytes
// or more (a vector, a wide fixed-size binary), whose pages the writer
// stores full-zip.
func wideFixedRows(f *Field) bool {
	t := f.Type
	if fslFlatItem(t, firstChild(f)) {
		return t.Size*f.Children[0].Type.ByteWidth() >= 256
	}
	return len(f.Children) == 0 && t.Kind != KindBool && !t.IsVariable() && t.DictIndex == KindNull && t.ByteWidth() >= 256
}

// fieldPageBytes is how many bytes of a top-level field's decoded values
// make a page. A dictionary of numbers is counted at its key's width, as
// stored, not at its values': LanceDB reads a batch that spans pages by
// concatenating the pages' arrays, and fails ("Dictionary key bigger than
// the key type") when their dictionaries together fill the key's range
// (seen with a float64 dictionary using all 128 int8 keys cut into two
// pages; the same rows in one page read fine). Fewer, longer pages keep
// that as rare as in LanceDB's own files.
func (w *Writer) fieldPageBytes(f *Field) int {
	t := f.Type
	if w.opts.WidePageBytes > w.opts.PageBytes && w.opts.Version != V2_0 && wideFixedRows(f) {
		return w.opts.WidePageBytes
	}
	vw, kw := t.ByteWidth(), DataType{Kind: t.DictIndex}.ByteWidth()
	if t.DictIndex == KindNull || t.IsVariable() || vw <= kw || kw == 0 {
		return w.opts.PageBytes
	}
	return w.opts.PageBytes / kw * vw
}

// dictIndexBits is the width of a dictionary index type in bits.
func dictIndexBits(ix Kind) int {
	return 8 * DataType{Kind: ix}.ByteWidth()
}

// dictIndexLimit is how many dictionary items an index type can address
// (Arrow's signed keys stop at their largest positive value).
func dictIndexLimit(ix Kind) uint64 {
	bw := dictIndexBits(ix)
	signed := ix >= KindInt8 && ix <= KindInt64
	if signed {
		bw--
	}
	if bw >= 62 {
		return 1 << 62 // beyond any page's row count
	}
	return 1 << uint(bw)
}

func putUint(b []byte, bits int, v uint64) {
	switch bits {
	case 8:
		b[0] = byte(v)
	case 16:
		le.PutUint16(b, uint16(v))
	case 32:
		le.PutUint32(b, uint32(v))
	default:
		le.PutUint64(b, v)
	}
}

// finishStructs20 writes the single page of each 2.0 struct column.
func (w *Writer) finishStructs20() error {
	var walk func(f *Field) error
	walk = func(f *Field) error {
		if f.Packed() {
			return nil
		}
		if f.Type.Kind == KindStruct {
			rows := w.colRows[f.Column]
			w.colRows[f.Column] = 0
			enc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Struct{Struct: &pb.SimpleStruct{}}}
			if err := w.addPage20(f.Column, nil, int(rows), enc, 0); err != nil {
				return err
			}
		}
		if f.Type.Kind == KindFixedSizeList {
			return nil
		}
		for _, c := range f.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range w.schema.Fields {
		if err := walk(f); err != nil {
			return err
		}
	}
	return nil
}
