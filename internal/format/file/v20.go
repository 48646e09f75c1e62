package file

import (
	"fmt"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// Format 2.0 (the MemWAL _pk_index and older tables): every schema node has
// its own column; a page's encoding is a tree of ArrayEncodings whose
// leaves name page buffers. Validity is a bitmap (Nullable), lists are
// end offsets (List), strings are end offsets plus bytes (Binary), and
// nulls in offsets are marked by adding an adjustment.

// decoded20 is a decoded 2.0 page: values plus an optional validity bitmap.
type decoded20 struct {
	b     *block
	valid []byte // nil: all valid
}

func buffer20(ref *pb.BufferRef, bufs [][]byte) ([]byte, error) {
	if ref.GetBufferType() != pb.BufferRef_page {
		return nil, errf("2.0 %v buffers are not supported", ref.GetBufferType())
	}
	i := int(ref.GetBufferIndex())
	if i >= len(bufs) {
		return nil, errf("2.0 encoding names page buffer %d of %d", i, len(bufs))
	}
	return bufs[i], nil
}

func decompress20(c *pb.CompressionV20, b []byte) ([]byte, error) {
	switch c.GetScheme() {
	case "", "none":
		return b, nil
	case "zstd":
		return unzstd(b)
	case "lz4":
		return unlz4(b)
	}
	return nil, errf("2.0 compression %q", c.GetScheme())
}

func decode20(e *pb.ArrayEncoding, bufs [][]byte, n int, leaf DataType) (*decoded20, error) {
	if e == nil {
		return nil, errf("2.0 page without an encoding")
	}
	switch c := e.GetArrayEncoding().(type) {
	case *pb.ArrayEncoding_Nullable:
		switch nn := c.Nullable.GetNullability().(type) {
		case *pb.Nullable_NoNulls:
			return decode20(nn.NoNulls.GetValues(), bufs, n, leaf)
		case *pb.Nullable_SomeNulls:
			v, err := decode20(nn.SomeNulls.GetValidity(), bufs, n, DataType{Kind: KindBool})
			if err != nil {
				return nil, err
			}
			if v.b.bits != 1 {
				return nil, errf("2.0 validity of %d bits", v.b.bits)
			}
			d, err := decode20(nn.SomeNulls.GetValues(), bufs, n, leaf)
			if err != nil {
				return nil, err
			}
			d.valid = andBits(d.valid, v.b.data, n)
			return d, nil
		case *pb.Nullable_AllNulls:
			return &decoded20{b: zeroBlock(leaf, n), valid: make([]byte, bitmapLen(n))}, nil
		}
		return nil, errf("2.0 nullable without nullability")
	case *pb.ArrayEncoding_Flat:
		b, err := buffer20(c.Flat.GetBuffer(), bufs)
		if err != nil {
			return nil, err
		}
		if b, err = decompress20(c.Flat.GetCompression(), b); err != nil {
			return nil, err
		}
		blk, err := fixedBlock(n, int(c.Flat.GetBitsPerValue()), b)
		if err != nil {
			return nil, err
		}
		return &decoded20{b: blk}, nil
	case *pb.ArrayEncoding_Constant:
		blk, err := constBlock(c.Constant.GetValue(), n)
		if err != nil {
			return nil, err
		}
		return &decoded20{b: blk}, nil
	case *pb.ArrayEncoding_FixedSizeList:
		dim := int(c.FixedSizeList.GetDimension())
		if dim <= 0 || dim > 1<<24 {
			return nil, errf("2.0 fixed-size list of %d", dim)
		}
		if err := checkCount(uint64(n)*uint64(dim), totalLen(bufs)); err != nil {
			return nil, err
		}
		item := DataType{}
		if leaf.Kind == KindFixedSizeList {
			item = DataType{Kind: KindInt8}
		}
		d, err := decode20(c.FixedSizeList.GetItems(), bufs, n*dim, item)
		if err != nil {
			return nil, err
		}
		return &decoded20{b: &block{n: n, dim: dim, child: d.b, itemValid: d.valid}}, nil
	case *pb.ArrayEncoding_Binary:
		return binary20(c.Binary, bufs, n)
	case *pb.ArrayEncoding_PackedStruct:
		return packed20(c.PackedStruct, bufs, n)
	case *pb.ArrayEncoding_Fsst:
		d, err := decode20(c.Fsst.GetBinary(), bufs, n, leaf)
		if err != nil {
			return nil, err
		}
		if d.b, err = unfsst(c.Fsst.GetSymbolTable(), d.b); err != nil {
			return nil, err
		}
		return d, nil
	case *pb.ArrayEncoding_Dictionary:
		return dict20(c.Dictionary, bufs, n, leaf)
	case *pb.ArrayEncoding_Bitpacked:
		b, err := buffer20(c.Bitpacked.GetBuffer(), bufs)
		if err != nil {
			return nil, err
		}
		blk, err := unpackPlain(b, n, int(c.Bitpacked.GetCompressedBitsPerValue()), int(c.Bitpacked.GetUncompressedBitsPerValue()), c.Bitpacked.GetSigned())
		if err != nil {
			return nil, err
		}
		return &decoded20{b: blk}, nil
	case *pb.ArrayEncoding_BitpackedForNonNeg:
		b, err := buffer20(c.BitpackedForNonNeg.GetBuffer(), bufs)
		if err != nil {
			return nil, err
		}
		blk, err := unpackOutOfLine(int(c.BitpackedForNonNeg.GetUncompressedBitsPerValue()), int(c.BitpackedForNonNeg.GetCompressedBitsPerValue()), b, n)
		if err != nil {
			return nil, err
		}
		return &decoded20{b: blk}, nil
	}
	return nil, errf("unsupported 2.0 encoding %T", e.GetArrayEncoding())
}

func andBits(a, b []byte, n int) []byte {
	if a == nil {
		out := make([]byte, bitmapLen(n))
		copy(out, b)
		return out
	}
	for i := range a {
		a[i] &= b[i]
	}
	return a
}

// intsOf reads an unsigned integer block as uint64s.
func intsOf(b *block) ([]uint64, error) {
	if b.isVar || b.dim > 0 {
		return nil, errf("offsets are not integers")
	}
	out := make([]uint64, b.n)
	for i := range out {
		switch b.bits {
		case 8:
			out[i] = uint64(b.data[i])
		case 16:
			out[i] = uint64(le.Uint16(b.data[2*i:]))
		case 32:
			out[i] = uint64(le.Uint32(b.data[4*i:]))
		case 64:
			out[i] = le.Uint64(b.data[8*i:])
		default:
			return nil, errf("offsets of %d bits", b.bits)
		}
	}
	return out, nil
}

// endOffsets turns 2.0 end offsets (null ones raised by adj) into Arrow
// offsets and validity.
func endOffsets(ends []uint64, adj uint64) ([]int64, []byte, error) {
	n := len(ends)
	offs := make([]int64, n+1)
	var valid []byte
	var prev uint64
	for i, e := range ends {
		if adj > 0 && e >= adj {
			if valid == nil {
				valid = make([]byte, bitmapLen(n))
				for k := 0; k < i; k++ {
					setBit(valid, k)
				}
			}
			e -= adj
		} else if valid != nil {
			setBit(valid, i)
		}
		if e < prev {
			return nil, nil, errf("2.0 offsets decrease (%d after %d)", e, prev)
		}
		offs[i+1] = int64(e)
		prev = e
	}
	return offs, valid, nil
}

func binary20(b *pb.Binary, bufs [][]byte, n int) (*decoded20, error) {
	idx, err := decode20(b.GetIndices(), bufs, n, DataType{Kind: KindUint64})
	if err != nil {
		return nil, err
	}
	ends, err := intsOf(idx.b)
	if err != nil {
		return nil, err
	}
	offs, valid, err := endOffsets(ends, b.GetNullAdjustment())
	if err != nil {
		return nil, err
	}
	total := int(offs[n])
	by, err := decode20(b.GetBytes(), bufs, total, DataType{Kind: KindUint8})
	if err != nil {
		return nil, err
	}
	if by.b.bits != 8 {
		return nil, errf("2.0 binary bytes of %d bits", by.b.bits)
	}
	return &decoded20{b: &block{n: n, isVar: true, offsets: offs, data: by.b.data}, valid: valid}, nil
}

// dict20: indices are 1-based, 0 meaning null.
func dict20(d *pb.DictionaryV20, bufs [][]byte, n int, leaf DataType) (*decoded20, error) {
	idx, err := decode20(d.GetIndices(), bufs, n, DataType{Kind: KindUint32})
	if err != nil {
		return nil, err
	}
	nd := int(d.GetNumDictionaryItems())
	if err := checkCount(uint64(nd), totalLen(bufs)); err != nil {
		return nil, err
	}
	items, err := decode20(d.GetItems(), bufs, nd, leaf)
	if err != nil {
		return nil, err
	}
	ix, err := intsOf(idx.b)
	if err != nil {
		return nil, err
	}
	valid := make([]byte, bitmapLen(n))
	shifted := &block{n: n, bits: 32, data: alloc(4 * n)}
	// A field that is an Arrow dictionary keeps the writer's own indices:
	// 0-based, a null row pointing at a null item (LanceDB appends one,
	// through the items' null_adjustment). LanceDB's own dictionary of a
	// plain string column is 1-based with 0 for null.
	arrowDict := leaf.DictIndex != KindNull
	for i, v := range ix {
		if arrowDict {
			if v >= uint64(nd) || items.valid != nil && !getBit(items.valid, int(v)) {
				continue
			}
			setBit(valid, i)
			le.PutUint32(shifted.data[4*i:], uint32(v))
			continue
		}
		if v == 0 || v > uint64(nd) {
			continue
		}
		setBit(valid, i)
		le.PutUint32(shifted.data[4*i:], uint32(v-1))
	}
	out, err := undict(shifted, items.b)
	if err != nil {
		return nil, err
	}
	return &decoded20{b: out, valid: andBits(idx.valid, valid, n)}, nil
}

// unpackPlain reads LSB-first packed values of cb bits into ub-bit values.
func unpackPlain(b []byte, n, cb, ub int, signed bool) (*block, error) {
	if ub%8 != 0 || ub == 0 || ub > 64 || cb > ub || cb < 0 {
		return nil, errf("2.0 bitpacking %d of %d bits", cb, ub)
	}
	if uint64(len(b))*8 < uint64(n)*uint64(cb) {
		return nil, errf("2.0 bitpacked buffer too short")
	}
	w := ub / 8
	out := alloc(n * w)
	bit := 0
	for i := 0; i < n; i++ {
		var v uint64
		for k := 0; k < cb; k++ {
			if getBit(b, bit+k) {
				v |= 1 << uint(k)
			}
		}
		bit += cb
		if signed && cb > 0 && cb < 64 && v>>(uint(cb)-1)&1 == 1 {
			v |= ^uint64(0) << uint(cb)
		}
		for k := 0; k < w; k++ {
			out[i*w+k] = byte(v >> (8 * k))
		}
	}
	return &block{n: n, bits: ub, data: out}, nil
}

// column20 decodes rows [start, end) of one 2.0 column.
func (f *File) column20(col int, leaf DataType, start, end uint64) (*decoded20, uint64, error) {
	lo, hi, first, err := f.pageSpan(col, start, end)
	if err != nil {
		return nil, 0, err
	}
	pages := f.Columns[col].GetPages()
	var parts []*decoded20
	for i := lo; i < hi; i++ {
		p := pages[i]
		ae := &pb.ArrayEncoding{}
		if err := unwrapEncoding(p.GetEncoding(), "ArrayEncoding", ae); err != nil {
			return nil, 0, err
		}
		bufs, err := f.pageBuffers(p)
		if err != nil {
			return nil, 0, err
		}
		if err := checkCount(p.GetLength(), int(f.size)); err != nil {
			return nil, 0, err
		}
		d, err := decode20(ae, bufs, int(p.GetLength()), leaf)
		if err != nil {
			return nil, 0, fmt.Errorf("column %d page %d: %w", col, i, err)
		}
		if ae.GetList() != nil || ae.GetStruct() != nil {
			return nil, 0, errf("internal: list/struct page decoded as values")
		}
		parts = append(parts, d)
	}
	d, err := concat20(parts, leaf)
	return d, first, err
}

func concat20(parts []*decoded20, leaf DataType) (*decoded20, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	bs := make([]*block, len(parts))
	anyNull := false
	n := 0
	for i, p := range parts {
		bs[i] = p.b
		anyNull = anyNull || p.valid != nil
		n += p.b.n
	}
	b, err := concatBlocks(bs, leaf)
	if err != nil {
		return nil, err
	}
	out := &decoded20{b: b}
	if anyNull {
		out.valid = make([]byte, bitmapLen(n))
		at := 0
		for _, p := range parts {
			if p.valid == nil {
				for k := 0; k < p.b.n; k++ {
					setBit(out.valid, at+k)
				}
			} else {
				copyBits(out.valid, at, p.valid, 0, p.b.n)
			}
			at += p.b.n
		}
	}
	return out, nil
}

// listOffsets20 decodes the offsets of list column col for rows [start,
// end): per page, end offsets relative to the page's first item.
func (f *File) listOffsets20(col int, start, end uint64) ([]int64, []byte, uint64, error) {
	lo, hi, first, err := f.pageSpan(col, start, end)
	if err != nil {
		return nil, nil, 0, err
	}
	pages := f.Columns[col].GetPages()
	offs := []int64{0}
	var valid []byte
	rows := 0
	for i := lo; i < hi; i++ {
		p := pages[i]
		ae := &pb.ArrayEncoding{}
		if err := unwrapEncoding(p.GetEncoding(), "ArrayEncoding", ae); err != nil {
			return nil, nil, 0, err
		}
		l := ae.GetList()
		if l == nil {
			return nil, nil, 0, errf("list column %d page %d is not a list page", col, i)
		}
		bufs, err := f.pageBuffers(p)
		if err != nil {
			return nil, nil, 0, err
		}
		if err := checkCount(p.GetLength(), int(f.size)); err != nil {
			return nil, nil, 0, err
		}
		n := int(p.GetLength())
		d, err := decode20(l.GetOffsets(), bufs, n, DataType{Kind: KindUint64})
		if err != nil {
			return nil, nil, 0, err
		}
		ends, err := intsOf(d.b)
		if err != nil {
			return nil, nil, 0, err
		}
		po, pv, err := endOffsets(ends, l.GetNullOffsetAdjustment())
		if err != nil {
			return nil, nil, 0, err
		}
		base := offs[len(offs)-1]
		for k := 1; k <= n; k++ {
			offs = append(offs, base+po[k])
		}
		if pv != nil || valid != nil {
			nv := make([]byte, bitmapLen(rows+n))
			if valid == nil {
				for k := 0; k < rows; k++ {
					setBit(nv, k)
				}
			} else {
				copyBits(nv, 0, valid, 0, rows)
			}
			if pv == nil {
				for k := 0; k < n; k++ {
					setBit(nv, rows+k)
				}
			} else {
				copyBits(nv, rows, pv, 0, n)
			}
			valid = nv
		}
		rows += n
	}
	return offs, valid, first, nil
}

// readField20 decodes rows [start, end) of a field of a 2.0 file.
func (f *File) readField20(fl *Field, start, end uint64) (*Array, error) {
	switch {
	case fl.Type.Kind == KindStruct && !fl.Packed():
		a := &Array{Type: fl.Type, Name: fl.Name, Len: int(end - start)}
		for _, c := range fl.Children {
			ca, err := f.readField20(c, start, end)
			if err != nil {
				return nil, err
			}
			a.Children = append(a.Children, ca)
		}
		return a, nil
	case fl.Type.Kind == KindList || fl.Type.Kind == KindLargeList:
		offs, valid, first, err := f.listOffsets20(fl.Column, start, end)
		if err != nil {
			return nil, err
		}
		a := &Array{Type: fl.Type, Name: fl.Name, Len: len(offs) - 1, Valid: valid, Offsets: offs}
		// Items of the pages read: the item column's rows from the
		// offsets' base. Pages of the list column start at item 0 of the
		// item column at the first page; find that base by summing the
		// items of earlier list pages.
		base, err := f.listItemBase(fl.Column, first)
		if err != nil {
			return nil, err
		}
		child, err := f.readField20(fl.Children[0], base, base+uint64(offs[len(offs)-1]))
		if err != nil {
			return nil, err
		}
		a.Children = []*Array{child}
		if first != start || uint64(a.Len) != end-start {
			a = a.Slice(int(start-first), int(end-first))
		}
		return a, nil
	}
	d, first, err := f.column20(fl.Column, fl.Type, start, end)
	if err != nil {
		return nil, err
	}
	a := &Array{Type: fl.Type, Name: fl.Name, Len: d.b.n, Valid: d.valid}
	if err := fillValues(a, fl, d.b); err != nil {
		return nil, err
	}
	if first != start || uint64(a.Len) != end-start {
		a = a.Slice(int(start-first), int(end-first))
	}
	return a, nil
}

// listItemBase is the first item row of the list column's page starting
// at row first: the items of the pages before it.
func (f *File) listItemBase(col int, first uint64) (uint64, error) {
	var row, items uint64
	for _, p := range f.Columns[col].GetPages() {
		if row >= first {
			break
		}
		ae := &pb.ArrayEncoding{}
		if err := unwrapEncoding(p.GetEncoding(), "ArrayEncoding", ae); err != nil {
			return 0, err
		}
		items += ae.GetList().GetNumItems()
		row += p.GetLength()
	}
	return items, nil
}
