package file

import (
	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// leafPage is one page of a leaf column after its layout is undone: a
// level ("slot") stream and the values of the visible slots. Definition
// levels are rewritten into a page-independent code (see defCodes) so pages
// with different layer descriptions can be concatenated.
type leafPage struct {
	rows   int
	slots  int
	rep    []uint16 // nil: no repetition, every slot starts a row
	def    []uint16 // canonical codes; nil: nothing null or empty
	values *block
	// fsst: the symbol table the variable-width values are still
	// compressed with (decodeMiniChunks with keep), else nil; fsstT is
	// it parsed.
	fsst  []byte
	fsstT *fsstTable
}

// defCodes maps raw definition levels of a page to codes: 0 valid, 2j+1
// null at layer j, 2j+2 empty list at layer j (layers innermost first).
func defCodes(layers []pb.RepDefLayer) ([]uint16, error) {
	codes := []uint16{0}
	for j, l := range layers {
		null, empty := uint16(2*j+1), uint16(2*j+2)
		switch l {
		case pb.RepDefLayer_REPDEF_ALL_VALID_ITEM, pb.RepDefLayer_REPDEF_ALL_VALID_LIST:
		case pb.RepDefLayer_REPDEF_NULLABLE_ITEM, pb.RepDefLayer_REPDEF_NULLABLE_LIST:
			codes = append(codes, null)
		case pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			codes = append(codes, empty)
		case pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			codes = append(codes, null, empty)
		default:
			return nil, errf("unknown rep/def layer %v", l)
		}
	}
	return codes, nil
}

func isListLayer(l pb.RepDefLayer) bool {
	switch l {
	case pb.RepDefLayer_REPDEF_ALL_VALID_LIST, pb.RepDefLayer_REPDEF_NULLABLE_LIST,
		pb.RepDefLayer_REPDEF_EMPTYABLE_LIST, pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
		return true
	}
	return false
}

// mapDefs rewrites raw levels into codes in place.
func mapDefs(def []uint16, codes []uint16) error {
	for i, d := range def {
		if int(d) >= len(codes) {
			return errf("definition level %d beyond the %d the layers allow", d, len(codes)-1)
		}
		def[i] = codes[d]
	}
	return nil
}

// visible reports whether a slot with this code has a leaf value slot: it
// reaches the leaf (code 0) or stops at an item layer with only item layers
// inside it.
func visibleCode(code uint16, lists []bool) bool {
	if code == 0 {
		return true
	}
	j := int(code-1) / 2
	if code%2 == 0 {
		return false // an empty list
	}
	for i := 0; i <= j && i < len(lists); i++ {
		if lists[i] {
			return false
		}
	}
	return true
}

func padTo8(n int) int { return (n + 7) &^ 7 }

// chunkRef locates one mini-block chunk in the chunk buffer.
type chunkRef struct {
	off, size int
	n         int // values (visible items)
}

// miniChunks reads the chunk metadata: a u16 (u32 in large-chunk pages)
// per chunk, ((bytes/8)-1)<<4 | log2(values), the last chunk's count being
// what is left of the page's items.
func miniChunks(ml *pb.MiniBlockLayout, meta []byte, dataLen int) ([]chunkRef, error) {
	ws := 2
	if ml.GetHasLargeChunk() {
		ws = 4
	}
	if len(meta)%ws != 0 {
		return nil, errf("mini-block metadata of %d bytes", len(meta))
	}
	nchunks := len(meta) / ws
	total := ml.GetNumItems()
	if err := checkCount(total, dataLen); err != nil {
		return nil, err
	}
	out := make([]chunkRef, nchunks)
	pos := 0
	var seen uint64
	for c := range out {
		var word uint32
		if ws == 4 {
			word = le.Uint32(meta[c*4:])
		} else {
			word = uint32(le.Uint16(meta[c*2:]))
		}
		size := int((word>>4)+1) * 8
		var n uint64
		if c < nchunks-1 {
			if word&0xf == 0 {
				return nil, errf("mini-block chunk %d of %d has no value count", c, nchunks)
			}
			n = 1 << (word & 0xf)
		} else {
			n = total - seen
		}
		seen += n
		if seen > total {
			return nil, errf("mini-block chunks hold more than the page's %d items", total)
		}
		if pos+size > dataLen {
			return nil, errf("mini-block chunk %d runs past its buffer", c)
		}
		out[c] = chunkRef{off: pos, size: size, n: int(n)}
		pos += size
	}
	if seen != total {
		return nil, errf("mini-block chunks hold %d items, page has %d", seen, total)
	}
	return out, nil
}

// decodeMiniBlockPage undoes a mini-block layout.
func decodeMiniBlockPage(ml *pb.MiniBlockLayout, bufs [][]byte, rows int, leaf DataType, keep bool) (*leafPage, error) {
	if len(bufs) < 2 {
		return nil, errf("mini-block page has %d buffers", len(bufs))
	}
	chunks, err := miniChunks(ml, bufs[0], len(bufs[1]))
	if err != nil {
		return nil, err
	}
	var dict []byte
	if len(bufs) > 2 {
		dict = bufs[2]
	}
	return decodeMiniChunks(ml, chunks, bufs[1], 0, dict, rows, leaf, nil, keep)
}

// decodeMiniChunks decodes the given chunks; data holds the chunk buffer
// from byte base on. Directly decoded values go into buffers from rb
// (nil: fresh ones). With keep, FSST-compressed values of a page without
// a dictionary stay compressed: the page's values are the compressed
// bytes and its fsst the symbol table.
func decodeMiniChunks(ml *pb.MiniBlockLayout, chunks []chunkRef, data []byte, base int, dictBuf []byte, rows int, leaf DataType, rb *decodeBufs, keep bool) (*leafPage, error) {
	codes, err := defCodes(ml.GetLayers())
	if err != nil {
		return nil, err
	}
	hasRep, hasDef := ml.GetRepCompression() != nil, ml.GetDefCompression() != nil
	nbuf := int(ml.GetNumBuffers())
	if nbuf < 1 || nbuf > 16 {
		return nil, errf("mini-block with %d value buffers", nbuf)
	}
	ws := 2
	if ml.GetHasLargeChunk() {
		ws = 4
	}
	// FSST values are expanded once for the whole page (one output
	// allocation) rather than chunk by chunk and then concatenated.
	venc := ml.GetValueCompression()
	var fsstTab []byte
	if f := venc.GetFsst(); f != nil {
		fsstTab, venc = f.GetSymbolTable(), f.GetValues()
	}
	var fsstT *fsstTable
	if keep = keep && fsstTab != nil && ml.GetDictionary() == nil; keep {
		if fsstT, err = parseFSST(fsstTab); err != nil {
			return nil, err
		}
		// A table with compression off stores the values as they are.
		keep = !fsstT.raw
	}
	var rep, def []uint16
	total := 0
	for _, ch := range chunks {
		total += ch.n
	}
	// Plain fixed-width and bitpacked values are decoded straight into one
	// page buffer, variable-width offsets into one offset array, instead
	// of a block per chunk that is then copied into the page.
	dk := directOf(venc, nbuf)
	if dk != directNone && ml.GetDictionary() == nil {
		if err := checkCount(uint64(total), len(data)); err != nil {
			return nil, err
		}
	} else {
		dk = directNone
	}
	var dst *directPage
	if dk != directNone {
		dst = newDirectPage(dk, venc, total, len(chunks), rb)
	}
	vals := make([]*block, 0, len(chunks))
	for c, ch := range chunks {
		lo := ch.off - base
		if lo < 0 || lo+ch.size > len(data) {
			return nil, errf("mini-block chunk %d outside the bytes read", c)
		}
		cr, cd, bufs, err := chunkParts(ml, data[lo:lo+ch.size], hasRep, hasDef, nbuf, ws)
		if err != nil {
			return nil, err
		}
		if dst != nil {
			cv, err := dst.add(bufs[0], ch.n)
			if err != nil {
				return nil, err
			}
			if cv != nil {
				vals = append(vals, cv)
			}
		} else {
			cv, err := decodeMini(venc, bufs, ch.n)
			if err != nil {
				return nil, err
			}
			vals = append(vals, cv)
		}
		if hasRep {
			rep = append(rep, cr...)
		}
		if hasDef {
			def = append(def, cd...)
		}
	}
	var values *block
	var err2 error
	switch {
	case dst != nil && dk != directVariable:
		values = dst.fixed()
	case fsstTab != nil && !keep:
		values, err2 = unfsstBlocksInto(fsstTab, vals, rb)
	case dk == directVariable && len(vals) > 1:
		values = concatVarInto(vals, rb)
	default:
		values, err2 = concatBlocks(vals, leaf)
	}
	if err2 != nil {
		return nil, err2
	}
	if dk == directVariable && len(dst.offs) > 0 && (len(values.offsets) == 0 || &values.offsets[0] != &dst.offs[0]) {
		rb.giveInt64s(dst.offs) // the chunks' offsets were copied out
	}
	if d := ml.GetDictionary(); d != nil {
		if dictBuf == nil {
			return nil, errf("dictionary page without its dictionary buffer")
		}
		nd := ml.GetNumDictionaryItems()
		if err := checkCount(nd, len(dictBuf)); err != nil {
			return nil, err
		}
		dict, err := decodeBlock(d, dictBuf, int(nd))
		if err != nil {
			return nil, err
		}
		if values, err = undict(values, dict); err != nil {
			return nil, err
		}
	}
	lp := &leafPage{rows: rows, values: values, rep: rep, slots: total}
	if keep {
		if !values.isVar {
			return nil, errf("fsst over a fixed-width block")
		}
		// Values that stay compressed are not expanded here, which is
		// where a corrupt one would be found: check them now.
		if err := checkFSSTValues(values); err != nil {
			return nil, err
		}
		lp.fsst, lp.fsstT = fsstTab, fsstT
	}
	if hasDef {
		if err := mapDefs(def, codes); err != nil {
			return nil, err
		}
		lp.def = def
		lp.slots = len(def)
	}
	if hasRep {
		lp.slots = len(rep)
		if hasDef && len(def) != len(rep) {
			return nil, errf("%d repetition but %d definition levels", len(rep), len(def))
		}
	}
	return lp, nil
}

// concatVarInto joins a page's variable-width chunk blocks (offsets from
// 0 into each block's data) into one block in buffers from rb, which a
// Stream handing out views recycles instead of allocating and zeroing.
func concatVarInto(bs []*block, rb *decodeBufs) *block {
	n, total := 0, 0
	for _, b := range bs {
		n += b.n
		total += len(b.data)
	}
	out := &block{n: n, isVar: true, offsets: rb.int64s(n + 1), data: rb.bytes(total)}
	out.offsets[0] = 0
	at, pos := 1, 0
	for _, b := range bs {
		base := int64(pos)
		pos += copy(out.data[pos:], b.data)
		dst := out.offsets[at : at+b.n]
		for i, o := range b.offsets[1 : b.n+1] {
			dst[i] = base + o
		}
		at += b.n
	}
	return out
}

// chunkParts parses one chunk: u16 level count, u16 sizes of the rep and
// def buffers present, a size per value buffer (u16, or u32 in large-chunk
// pages), padding to 8, then each buffer padded to 8. It decodes the
// levels and returns the value buffers as they are.
func chunkParts(ml *pb.MiniBlockLayout, chunk []byte, hasRep, hasDef bool, nbuf, ws int) ([]uint16, []uint16, [][]byte, error) {
	p := 0
	rd := func(w int) (int, error) {
		if p+w > len(chunk) {
			return 0, errf("mini-block chunk header truncated")
		}
		var v int
		if w == 2 {
			v = int(le.Uint16(chunk[p:]))
		} else {
			v = int(le.Uint32(chunk[p:]))
		}
		p += w
		return v, nil
	}
	nlev, err := rd(2)
	if err != nil {
		return nil, nil, nil, err
	}
	var repSize, defSize int
	if hasRep {
		if repSize, err = rd(2); err != nil {
			return nil, nil, nil, err
		}
	}
	if hasDef {
		if defSize, err = rd(2); err != nil {
			return nil, nil, nil, err
		}
	}
	var sizesA [16]int
	sizes := sizesA[:nbuf]
	for i := range sizes {
		if sizes[i], err = rd(ws); err != nil {
			return nil, nil, nil, err
		}
	}
	p = padTo8(p)
	take := func(sz int) ([]byte, error) {
		if sz > len(chunk)-p || p > len(chunk) {
			return nil, errf("mini-block chunk buffer of %d bytes runs past the chunk", sz)
		}
		b := chunk[p : p+sz]
		p = padTo8(p + sz)
		return b, nil
	}
	var rep, def []uint16
	if hasRep {
		b, err := take(repSize)
		if err != nil {
			return nil, nil, nil, err
		}
		blk, err := decodeBlock(ml.GetRepCompression(), b, nlev)
		if err != nil {
			return nil, nil, nil, err
		}
		if rep, err = levelsOf(blk); err != nil {
			return nil, nil, nil, err
		}
	}
	if hasDef {
		b, err := take(defSize)
		if err != nil {
			return nil, nil, nil, err
		}
		blk, err := decodeBlock(ml.GetDefCompression(), b, nlev)
		if err != nil {
			return nil, nil, nil, err
		}
		if def, err = levelsOf(blk); err != nil {
			return nil, nil, nil, err
		}
	}
	bufs := make([][]byte, nbuf)
	for i := range bufs {
		if bufs[i], err = take(sizes[i]); err != nil {
			return nil, nil, nil, err
		}
	}
	return rep, def, bufs, nil
}

// undict replaces indices by dictionary items.
func undict(idx, dict *block) (*block, error) {
	if idx.isVar || idx.dim > 0 || idx.bits%8 != 0 || idx.bits == 0 {
		return nil, errf("dictionary indices are not integers")
	}
	w := idx.bits / 8
	var outOfDict []int
	at := func(i int) (int, error) {
		var v uint64
		switch w {
		case 1:
			v = uint64(idx.data[i])
		case 2:
			v = uint64(le.Uint16(idx.data[2*i:]))
		case 4:
			v = uint64(le.Uint32(idx.data[4*i:]))
		case 8:
			v = le.Uint64(idx.data[8*i:])
		default:
			return 0, errf("dictionary indices of %d bits", idx.bits)
		}
		// Null slots may hold any index; clamp them (they are masked).
		if v >= uint64(dict.n) {
			outOfDict = append(outOfDict, i)
			if dict.n == 0 {
				return -1, nil
			}
			return 0, nil
		}
		return int(v), nil
	}
	out := &block{n: idx.n}
	defer func() { out.outOfDict = outOfDict }()
	switch {
	case dict.isVar:
		out.isVar = true
		out.offsets = make([]int64, idx.n+1)
		var data []byte
		for i := 0; i < idx.n; i++ {
			k, err := at(i)
			if err != nil {
				return nil, err
			}
			if k >= 0 {
				data = append(data, dict.data[dict.offsets[k]:dict.offsets[k+1]]...)
			}
			out.offsets[i+1] = int64(len(data))
		}
		out.data = data
	case dict.dim == 0 && dict.bits%8 == 0 && dict.bits > 0:
		dw := dict.bits / 8
		out.bits = dict.bits
		out.data = alloc(idx.n * dw)
		for i := 0; i < idx.n; i++ {
			k, err := at(i)
			if err != nil {
				return nil, err
			}
			if k >= 0 {
				copy(out.data[i*dw:], dict.data[k*dw:(k+1)*dw])
			}
		}
	case dict.dim == 0 && dict.bits == 1:
		// Booleans: a dictionary of bits (LanceDB's dict:bool:…).
		if uint64(len(dict.data))*8 < uint64(dict.n) {
			return nil, errf("dictionary of %d bits in %d bytes", dict.n, len(dict.data))
		}
		out.bits = 1
		out.data = make([]byte, bitmapLen(idx.n))
		for i := 0; i < idx.n; i++ {
			k, err := at(i)
			if err != nil {
				return nil, err
			}
			if k >= 0 && getBit(dict.data, k) {
				setBit(out.data, i)
			}
		}
	default:
		return nil, errf("unsupported dictionary item layout")
	}
	return out, nil
}

// decodeFullZipPage undoes a full-zip layout: per item a control word
// (rep<<bits_def | def, 0, 1, 2 or 4 bytes) then, for items with a value,
// the value (fixed width, or a length prefix and bytes).
func decodeFullZipPage(fz *pb.FullZipLayout, bufs [][]byte, rows int, leaf DataType) (*leafPage, error) {
	if len(bufs) < 1 {
		return nil, errf("full-zip page without buffers")
	}
	data := bufs[0]
	n := int(fz.GetNumItems())
	if err := checkCount(uint64(n), len(data)); err != nil {
		return nil, err
	}
	codes, err := defCodes(fz.GetLayers())
	if err != nil {
		return nil, err
	}
	lists := make([]bool, len(fz.GetLayers()))
	for i, l := range fz.GetLayers() {
		lists[i] = isListLayer(l)
	}
	br, bd := int(fz.GetBitsRep()), int(fz.GetBitsDef())
	if br > 16 || bd > 16 {
		return nil, errf("full-zip control word of %d+%d bits", br, bd)
	}
	cw := 0
	switch t := br + bd; {
	case t == 0:
	case t <= 8:
		cw = 1
	case t <= 16:
		cw = 2
	default:
		cw = 4
	}
	var fixedBytes, lenBytes int
	switch d := fz.GetDetails().(type) {
	case *pb.FullZipLayout_BitsPerValue:
		if d.BitsPerValue%8 != 0 || d.BitsPerValue == 0 {
			return nil, errf("full-zip values of %d bits", d.BitsPerValue)
		}
		fixedBytes = int(d.BitsPerValue / 8)
	case *pb.FullZipLayout_BitsPerOffset:
		if d.BitsPerOffset != 32 && d.BitsPerOffset != 64 {
			return nil, errf("full-zip lengths of %d bits", d.BitsPerOffset)
		}
		lenBytes = int(d.BitsPerOffset / 8)
	default:
		return nil, errf("full-zip layout without a value width")
	}
	lp := &leafPage{rows: rows, slots: n}
	if br > 0 {
		lp.rep = make([]uint16, n)
	}
	if bd > 0 {
		lp.def = make([]uint16, n)
	}
	var fixed []byte
	var offs []int64
	var vdata []byte
	if fixedBytes > 0 {
		// Every visible value holds fixedBytes of data: sized once, so
		// the values are not copied again as the buffer grows.
		fixed = alloc(min(n, len(data)/fixedBytes) * fixedBytes)[:0]
	} else {
		offs = []int64{0}
	}
	nv := 0
	p := 0
	mask := uint32(1)<<uint(bd) - 1
	for i := 0; i < n; i++ {
		var word uint32
		if cw > 0 {
			if p+cw > len(data) {
				return nil, errf("full-zip data truncated at item %d", i)
			}
			switch cw {
			case 1:
				word = uint32(data[p])
			case 2:
				word = uint32(le.Uint16(data[p:]))
			default:
				word = le.Uint32(data[p:])
			}
			p += cw
		}
		var d uint16
		if bd > 0 {
			d = uint16(word & mask)
			if int(d) >= len(codes) {
				return nil, errf("full-zip definition level %d beyond the layers", d)
			}
			lp.def[i] = codes[d]
		}
		if br > 0 {
			lp.rep[i] = uint16(word >> uint(bd))
		}
		code := uint16(0)
		if bd > 0 {
			code = codes[d]
		}
		if !visibleCode(code, lists) {
			continue
		}
		nv++
		present := code == 0
		if fixedBytes > 0 {
			// Fixed-width items keep their (placeholder) bytes even when null.
			if p+fixedBytes > len(data) {
				return nil, errf("full-zip value %d truncated", i)
			}
			fixed = append(fixed, data[p:p+fixedBytes]...)
			p += fixedBytes
			continue
		}
		if present {
			if p+lenBytes > len(data) {
				return nil, errf("full-zip length %d truncated", i)
			}
			var l uint64
			if lenBytes == 4 {
				l = uint64(le.Uint32(data[p:]))
			} else {
				l = le.Uint64(data[p:])
			}
			p += lenBytes
			if l > uint64(len(data)-p) {
				return nil, errf("full-zip value %d of %d bytes runs past the page", i, l)
			}
			vdata = append(vdata, data[p:p+int(l)]...)
			p += int(l)
		}
		offs = append(offs, int64(len(vdata)))
	}
	var vb *block
	if fixedBytes > 0 {
		vb = &block{n: nv, bits: fixedBytes * 8, data: fixed}
	} else {
		vb = &block{n: nv, isVar: true, offsets: offs, data: vdata}
	}
	if vb, err = perValue(fz.GetValueCompression(), vb); err != nil {
		return nil, err
	}
	lp.values = vb
	return lp, nil
}

// perValue undoes a full-zip value compression, value by value.
func perValue(e *pb.CompressiveEncoding, b *block) (*block, error) {
	switch c := e.GetCompression().(type) {
	case nil:
		return b, nil
	case *pb.CompressiveEncoding_Flat:
		if c.Flat.GetData() != nil {
			return nil, errf("per-value flat compression is not supported")
		}
		return b, nil
	case *pb.CompressiveEncoding_FixedSizeList:
		dim := int(c.FixedSizeList.GetItemsPerValue())
		if c.FixedSizeList.GetHasValidity() {
			return fullZipFSLValid(c.FixedSizeList, b)
		}
		if dim <= 0 || b.isVar || b.bits%dim != 0 {
			return nil, errf("unsupported full-zip fixed-size list")
		}
		child := &block{n: b.n * dim, bits: b.bits / dim, data: b.data}
		return &block{n: b.n, dim: dim, child: child}, nil
	case *pb.CompressiveEncoding_Variable:
		if !b.isVar {
			return nil, errf("variable encoding over fixed-width full-zip values")
		}
		if c.Variable.GetValues() != nil {
			return mapValues(b, func(v []byte) ([]byte, error) { return bufferDecompress(c.Variable.GetValues(), v) })
		}
		return b, nil
	case *pb.CompressiveEncoding_General:
		inner, err := mapValues(b, func(v []byte) ([]byte, error) {
			if len(v) == 0 {
				return v, nil
			}
			return bufferDecompress(c.General.GetCompression(), v)
		})
		if err != nil {
			return nil, err
		}
		return perValue(c.General.GetValues(), inner)
	case *pb.CompressiveEncoding_Fsst:
		inner, err := perValue(c.Fsst.GetValues(), b)
		if err != nil {
			return nil, err
		}
		return unfsst(c.Fsst.GetSymbolTable(), inner)
	case *pb.CompressiveEncoding_PackedStruct:
		inner, err := perValue(c.PackedStruct.GetValues(), b)
		if err != nil {
			return nil, err
		}
		return unpackedFixed(c.PackedStruct, inner)
	case *pb.CompressiveEncoding_VariablePackedStruct:
		return unpackVariable(c.VariablePackedStruct, b)
	}
	return nil, errf("unsupported full-zip value encoding %T", e.GetCompression())
}

func mapValues(b *block, f func([]byte) ([]byte, error)) (*block, error) {
	if !b.isVar {
		return nil, errf("per-value compression of fixed-width values is not supported")
	}
	out := &block{n: b.n, isVar: true, offsets: make([]int64, b.n+1)}
	var data []byte
	for i := 0; i < b.n; i++ {
		v, err := f(b.data[b.offsets[i]:b.offsets[i+1]])
		if err != nil {
			return nil, err
		}
		data = append(data, v...)
		out.offsets[i+1] = int64(len(data))
	}
	out.data = data
	return out, nil
}

// decodeConstantPage undoes a constant (or 2.1 all-null) layout.
func decodeConstantPage(cl *pb.ConstantLayout, bufs [][]byte, rows int, leaf DataType) (*leafPage, error) {
	codes, err := defCodes(cl.GetLayers())
	if err != nil {
		return nil, err
	}
	lists := make([]bool, len(cl.GetLayers()))
	for i, l := range cl.GetLayers() {
		lists[i] = isListLayer(l)
	}
	lp := &leafPage{rows: rows, slots: rows}
	bi := 0
	level := func(n uint64, e *pb.CompressiveEncoding) ([]uint16, error) {
		if bi >= len(bufs) {
			return nil, errf("constant page without its level buffer")
		}
		b := bufs[bi]
		bi++
		if err := checkCount(n, len(b)); err != nil {
			return nil, err
		}
		if e == nil {
			e = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Flat{Flat: &pb.Flat{BitsPerValue: 16}}}
		}
		blk, err := decodeBlock(e, b, int(n))
		if err != nil {
			return nil, err
		}
		return levelsOf(blk)
	}
	// The layout without level counts: levels, when the page has any, are
	// raw u16 buffers whose count is their size. With an inline value the
	// buffers are [rep, def]; without one [value, rep, def] (or [value]
	// alone). An empty level buffer means no such levels.
	var value []byte
	if cl.GetNumRepValues() == 0 && cl.GetNumDefValues() == 0 && (cl.InlineValue != nil && len(bufs) == 2 || cl.InlineValue == nil && len(bufs) == 3) {
		lv := bufs
		if cl.InlineValue == nil {
			value, lv = bufs[0], bufs[1:]
		}
		raw := func(b []byte) ([]uint16, error) {
			if len(b)%2 != 0 {
				return nil, errf("constant page level buffer of %d bytes", len(b))
			}
			out := make([]uint16, len(b)/2)
			for i := range out {
				out[i] = le.Uint16(b[2*i:])
			}
			return out, nil
		}
		if len(lv[0]) > 0 {
			if lp.rep, err = raw(lv[0]); err != nil {
				return nil, err
			}
			lp.slots = len(lp.rep)
		}
		if len(lv[1]) > 0 {
			if lp.def, err = raw(lv[1]); err != nil {
				return nil, err
			}
			if err := mapDefs(lp.def, codes); err != nil {
				return nil, err
			}
			if lp.rep != nil && len(lp.rep) != len(lp.def) {
				return nil, errf("constant page with %d repetition and %d definition levels", len(lp.rep), len(lp.def))
			}
			lp.slots = len(lp.def)
		}
		if lp.rep == nil && lp.slots != rows {
			return nil, errf("constant page of %d rows with %d levels", rows, lp.slots)
		}
		bi = len(bufs)
	}
	if n := cl.GetNumRepValues(); n > 0 {
		if lp.rep, err = level(n, cl.GetRepCompression()); err != nil {
			return nil, err
		}
		lp.slots = int(n)
	}
	if n := cl.GetNumDefValues(); n > 0 {
		if lp.def, err = level(n, cl.GetDefCompression()); err != nil {
			return nil, err
		}
		if err := mapDefs(lp.def, codes); err != nil {
			return nil, err
		}
		lp.slots = int(n)
	} else if cl.InlineValue == nil && value == nil && len(codes) > 1 {
		// All null and no levels stored: every row is null at the
		// innermost nullable layer.
		if err := checkCount(uint64(rows), 1<<24); err != nil {
			return nil, err
		}
		lp.def = make([]uint16, lp.slots)
		for i := range lp.def {
			lp.def[i] = codes[1]
		}
	}
	nv := 0
	if lp.def == nil {
		nv = lp.slots
	} else {
		for _, c := range lp.def {
			if visibleCode(c, lists) {
				nv++
			}
		}
	}
	if cl.InlineValue == nil && (bi < len(bufs) || value != nil) && leaf.IsVariable() {
		// A constant string or binary: its one value is serialized in the
		// page's last buffer (a small header, then the bytes), or its
		// first when level buffers follow it.
		if value == nil {
			value = bufs[len(bufs)-1]
		}
		v, err := constVariable(value)
		if err != nil {
			return nil, err
		}
		lp.values = repeatVar(v, nv)
		return lp, nil
	}
	if cl.InlineValue != nil {
		if len(cl.InlineValue) > 32 {
			return nil, errf("constant value of %d bytes", len(cl.InlineValue))
		}
		if leaf.Kind == KindBool {
			lp.values = boolConst(cl.InlineValue, nv)
		} else if lp.values, err = constBlock(cl.InlineValue, nv); err != nil {
			return nil, err
		}
		if lp.values != nil && leaf.Kind == KindFixedSizeList {
			lp.values = splitFSL(lp.values, leaf)
		}
	} else {
		lp.values = zeroBlock(leaf, nv)
	}
	return lp, nil
}

func boolConst(v []byte, n int) *block {
	out := make([]byte, bitmapLen(n))
	if len(v) > 0 && v[0]&1 == 1 {
		for i := 0; i < n; i++ {
			setBit(out, i)
		}
	}
	return &block{n: n, bits: 1, data: out}
}

// splitFSL views a block of whole fixed-size-list values as list and items.
func splitFSL(b *block, t DataType) *block {
	dim := t.Size
	return &block{n: b.n, dim: dim, child: &block{n: b.n * dim, bits: b.bits / dim, data: b.data}}
}

// zeroBlock is n null placeholders of the leaf's physical shape.
func zeroBlock(t DataType, n int) *block {
	b := zeroShape(t, n)
	b.zero = true
	return b
}

func zeroShape(t DataType, n int) *block {
	switch {
	case t.Kind == KindBool:
		return &block{n: n, bits: 1, data: make([]byte, bitmapLen(n))}
	case t.IsVariable():
		return &block{n: n, isVar: true, offsets: make([]int64, n+1)}
	case t.Kind == KindFixedSizeList:
		return &block{n: n, dim: t.Size, child: &block{n: n * t.Size, bits: 8, data: nil}}
	}
	return &block{n: n, bits: 8 * t.ByteWidth(), data: alloc(n * t.ByteWidth())}
}

// constVariable reads the value of a constant variable-width page: u32
// count of offsets (2), u32 bytes of offsets, u64 bytes of data, the end
// offset(s), then the data.
func constVariable(b []byte) ([]byte, error) {
	if len(b) < 16 {
		return nil, errf("constant value buffer of %d bytes", len(b))
	}
	n := le.Uint64(b[8:])
	if n > uint64(len(b)) {
		return nil, errf("constant value of %d bytes in a %d-byte buffer", n, len(b))
	}
	return b[uint64(len(b))-n:], nil
}

func repeatVar(v []byte, n int) *block {
	out := &block{n: n, isVar: true, offsets: make([]int64, n+1), data: make([]byte, 0, len(v)*n)}
	for i := 0; i < n; i++ {
		out.data = append(out.data, v...)
		out.offsets[i+1] = int64(len(out.data))
	}
	return out
}
