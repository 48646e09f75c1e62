package file

import (
	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// block is a run of decoded values in physical form (Lance's "data
// block"): fixed width (bits per value; 1 is a bitmap), variable width
// (offsets into data) or a fixed-size list of a child block. It is what
// compressive encodings produce and what the structural layouts assemble
// into Arrays; an encoder would consume the same shape.
type block struct {
	n     int
	bits  int // fixed width: bits per value
	isVar bool
	data  []byte
	// offsets: n+1 entries into data (variable width only).
	offsets []int64
	// dim > 0: a fixed-size list of dim items per value in child, with
	// itemValid (a bitmap of n*dim items) when the items have nulls.
	dim       int
	itemValid []byte
	child     *block
	// fields: a decoded variable packed struct, one block per child.
	fields []*block
	// packed (writer only): the child widths in bits (packedVar: variable)
	// of packed struct rows.
	packed []int
	// fsst (writer only): a variable block's values are FSST-compressed
	// with this symbol table (fsstT parsed), to be written as they are.
	fsst  []byte
	fsstT *fsstTable
	// zero: null placeholders (zeroBlock) whose shape is only a guess from
	// the leaf type; concatBlocks reshapes them like the blocks with data.
	zero bool
	// outOfDict (undict's output only): the values whose dictionary index
	// was out of range, read as entry 0. Null slots may hold any index;
	// Check finds the valid ones among them with the page's levels.
	outOfDict []int
}

// zeroLike is n zero values shaped like t (a fixed-size list's items of
// unknown width stay without data, as zeroBlock makes them).
func zeroLike(t *block, n int) *block {
	switch {
	case t.fields != nil:
		out := &block{n: n, fields: make([]*block, len(t.fields))}
		for i, f := range t.fields {
			out.fields[i] = zeroLike(f, n)
		}
		return out
	case t.dim > 0:
		return &block{n: n, dim: t.dim, child: zeroLike(t.child, n*t.dim)}
	case t.isVar:
		return &block{n: n, isVar: true, offsets: make([]int64, n+1)}
	case t.bits == 1:
		return &block{n: n, bits: 1, data: make([]byte, bitmapLen(n))}
	case t.data == nil:
		return &block{n: n, bits: t.bits}
	}
	return &block{n: n, bits: t.bits, data: alloc(n * t.bits / 8)}
}

func fixedBlock(n, bits int, data []byte) (*block, error) {
	need := (uint64(n)*uint64(bits) + 7) / 8
	if uint64(len(data)) < need {
		return nil, errf("%d values of %d bits need %d bytes, buffer has %d", n, bits, need, len(data))
	}
	return &block{n: n, bits: bits, data: data[:need]}, nil
}

// checkCount rejects value counts that could not fit in the input, before
// anything is allocated for them.
func checkCount(n uint64, input int) error {
	if n > uint64(input)*1024+1<<16 {
		return errf("%d values claimed from %d bytes", n, input)
	}
	return nil
}

// bufferCompression applies a BufferCompression's decompression.
func bufferDecompress(c *pb.BufferCompression, b []byte) ([]byte, error) {
	if c == nil {
		return b, nil
	}
	switch c.GetScheme() {
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED:
		return b, nil
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD:
		return unzstd(b)
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4:
		return unlz4(b)
	}
	return nil, errf("unknown buffer compression %v", c.GetScheme())
}

func flatBits(e *pb.CompressiveEncoding) (int, bool) {
	if f := e.GetFlat(); f != nil {
		return int(f.GetBitsPerValue()), true
	}
	return 0, false
}

// decodeMini decodes the value buffers of one mini-block chunk holding n
// values.
func decodeMini(e *pb.CompressiveEncoding, bufs [][]byte, n int) (*block, error) {
	if e == nil {
		return nil, errf("mini-block without a value encoding")
	}
	need := func(k int) error {
		if len(bufs) < k {
			return errf("%T needs %d buffers, chunk has %d", e.GetCompression(), k, len(bufs))
		}
		return nil
	}
	switch c := e.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		if err := need(1); err != nil {
			return nil, err
		}
		b, err := bufferDecompress(c.Flat.GetData(), bufs[0])
		if err != nil {
			return nil, err
		}
		return fixedBlock(n, int(c.Flat.GetBitsPerValue()), b)
	case *pb.CompressiveEncoding_InlineBitpacking:
		if err := need(1); err != nil {
			return nil, err
		}
		b, err := bufferDecompress(c.InlineBitpacking.GetValues(), bufs[0])
		if err != nil {
			return nil, err
		}
		return unpackInline(int(c.InlineBitpacking.GetUncompressedBitsPerValue()), b, n)
	case *pb.CompressiveEncoding_Variable:
		if err := need(1); err != nil {
			return nil, err
		}
		ob, ok := flatBits(c.Variable.GetOffsets())
		if !ok || (ob != 32 && ob != 64) {
			return nil, errf("variable offsets encoded as %T", c.Variable.GetOffsets().GetCompression())
		}
		b, err := bufferDecompress(c.Variable.GetValues(), bufs[0])
		if err != nil {
			return nil, err
		}
		return chunkVariable(b, n, ob)
	case *pb.CompressiveEncoding_Fsst:
		inner, err := decodeMini(c.Fsst.GetValues(), bufs, n)
		if err != nil {
			return nil, err
		}
		return unfsst(c.Fsst.GetSymbolTable(), inner)
	case *pb.CompressiveEncoding_PackedStruct:
		inner, err := decodeMini(c.PackedStruct.GetValues(), bufs, n)
		if err != nil {
			return nil, err
		}
		return unpackedFixed(c.PackedStruct, inner)
	case *pb.CompressiveEncoding_General:
		if err := need(1); err != nil {
			return nil, err
		}
		b, err := bufferDecompress(c.General.GetCompression(), bufs[0])
		if err != nil {
			return nil, err
		}
		nb := append([][]byte{b}, bufs[1:]...)
		return decodeMini(c.General.GetValues(), nb, n)
	case *pb.CompressiveEncoding_Rle:
		if err := need(2); err != nil {
			return nil, err
		}
		vb, ok := flatBits(c.Rle.GetValues())
		lb, ok2 := flatBits(c.Rle.GetRunLengths())
		if !ok || !ok2 || lb != 8 || vb%8 != 0 || vb == 0 {
			return nil, errf("unsupported rle layout")
		}
		return unrle(bufs[0], bufs[1], vb, n)
	case *pb.CompressiveEncoding_ByteStreamSplit:
		if err := need(1); err != nil {
			return nil, err
		}
		inner, err := decodeMini(c.ByteStreamSplit.GetValues(), bufs, n)
		if err != nil {
			return nil, err
		}
		return unbss(inner)
	case *pb.CompressiveEncoding_FixedSizeList:
		return decodeFSL(c.FixedSizeList, bufs, n, decodeMini)
	case *pb.CompressiveEncoding_Constant:
		return constBlock(c.Constant.GetValue(), n)
	}
	return nil, errf("unsupported mini-block encoding %T", e.GetCompression())
}

func decodeFSL(f *pb.FixedSizeList, bufs [][]byte, n int, inner func(*pb.CompressiveEncoding, [][]byte, int) (*block, error)) (*block, error) {
	dim := int(f.GetItemsPerValue())
	if dim <= 0 || dim > 1<<24 {
		return nil, errf("fixed-size list of %d items", dim)
	}
	if err := checkCount(uint64(n)*uint64(dim), totalLen(bufs)); err != nil {
		return nil, err
	}
	out := &block{n: n, dim: dim}
	if f.GetHasValidity() {
		if len(bufs) < 2 {
			return nil, errf("fixed-size list with validity needs 2 buffers")
		}
		if len(bufs[0]) < bitmapLen(n*dim) {
			return nil, errf("fixed-size list validity of %d bytes for %d items", len(bufs[0]), n*dim)
		}
		out.itemValid = bufs[0]
		bufs = bufs[1:]
	}
	c, err := inner(f.GetValues(), bufs, n*dim)
	if err != nil {
		return nil, err
	}
	out.child = c
	return out, nil
}

func totalLen(bufs [][]byte) int {
	t := 0
	for _, b := range bufs {
		t += len(b)
	}
	return t
}

func constBlock(v []byte, n int) (*block, error) {
	if len(v) == 0 {
		return nil, errf("constant encoding without a value")
	}
	if err := checkCount(uint64(n)*uint64(len(v)), 1<<28); err != nil {
		return nil, err
	}
	out := alloc(n * len(v))
	for i := 0; i < n; i++ {
		copy(out[i*len(v):], v)
	}
	return &block{n: n, bits: 8 * len(v), data: out}, nil
}

// chunkVariable reads a mini-block variable-width buffer: n+1 offsets
// (absolute within the buffer) followed by the bytes.
func chunkVariable(b []byte, n, ob int) (*block, error) {
	w := ob / 8
	if uint64(len(b)) < uint64(n+1)*uint64(w) {
		return nil, errf("variable chunk of %d bytes cannot hold %d offsets", len(b), n+1)
	}
	offs := make([]int64, n+1)
	data, err := chunkOffsets(b, n, ob, offs)
	if err != nil {
		return nil, err
	}
	return &block{n: n, isVar: true, offsets: offs, data: data}, nil
}

// chunkOffsets reads the n+1 offsets of a variable-width chunk buffer into
// offs (made relative to the first) and returns the values' bytes.
func chunkOffsets(b []byte, n, ob int, offs []int64) ([]byte, error) {
	w := ob / 8
	if uint64(len(b)) < uint64(n+1)*uint64(w) {
		return nil, errf("variable chunk of %d bytes cannot hold %d offsets", len(b), n+1)
	}
	// Offsets must not decrease, so none is below the first and only the
	// last can pass the chunk's end: one comparison per offset.
	offs = offs[:n+1]
	var base, prev uint64
	if w == 4 {
		src := b[:4*(n+1)]
		base = uint64(le.Uint32(src))
		prev = base
		for i := range offs {
			o := uint64(le.Uint32(src[4*i:]))
			if o < prev {
				return nil, errf("variable chunk offset %d out of order or range", o)
			}
			offs[i] = int64(o - base)
			prev = o
		}
	} else {
		src := b[:8*(n+1)]
		base = le.Uint64(src)
		prev = base
		for i := range offs {
			o := le.Uint64(src[8*i:])
			if o < prev {
				return nil, errf("variable chunk offset %d out of order or range", o)
			}
			offs[i] = int64(o - base)
			prev = o
		}
	}
	if prev > uint64(len(b)) {
		return nil, errf("variable chunk offset %d out of order or range", prev)
	}
	return b[base:prev], nil
}

// unpackInline decodes inline bitpacking: per 1024 values a header word
// (the bit width, one value of the uncompressed width) then the packed
// words; the last block is padded to 1024 values.
func unpackInline(w int, b []byte, n int) (*block, error) {
	if w != 8 && w != 16 && w != 32 && w != 64 {
		return nil, errf("inline bitpacking of %d-bit values", w)
	}
	if err := checkCount(uint64(n), len(b)); err != nil {
		return nil, err
	}
	bpv := w / 8
	out := alloc((n + 1023) / 1024 * 1024 * bpv)
	if err := unpackInlineInto(w, b, n, out); err != nil {
		return nil, err
	}
	return &block{n: n, bits: w, data: out[:n*bpv]}, nil
}

// unpackInlineInto is unpackInline into out, which has room for n values
// rounded up to whole blocks of 1024.
func unpackInlineInto(w int, b []byte, n int, out []byte) error {
	bpv := w / 8
	blocks := (n + 1023) / 1024
	if len(out) < blocks*1024*bpv {
		return errf("internal: inline bitpacking output too small")
	}
	pos := 0
	for k := 0; k < blocks; k++ {
		if pos+bpv > len(b) {
			return errf("inline bitpacking truncated at block %d", k)
		}
		var bw uint64
		switch bpv {
		case 1:
			bw = uint64(b[pos])
		case 2:
			bw = uint64(le.Uint16(b[pos:]))
		case 4:
			bw = uint64(le.Uint32(b[pos:]))
		default:
			bw = le.Uint64(b[pos:])
		}
		pos += bpv
		if bw > uint64(w) {
			return errf("inline bitpacking width %d for %d-bit values", bw, w)
		}
		sz := int(bw) * 1024 / 8
		if pos+sz > len(b) {
			return errf("inline bitpacking block %d truncated", k)
		}
		unpackFL(w, int(bw), b[pos:pos+sz], out[k*1024*bpv:])
		pos += sz
	}
	return nil
}

// unpackOutOfLine decodes out-of-line bitpacking: whole 1024-value blocks
// packed at cb bits, then the tail either packed and padded or raw.
func unpackOutOfLine(w, cb int, b []byte, n int) (*block, error) {
	if w != 8 && w != 16 && w != 32 && w != 64 || cb < 0 || cb > w {
		return nil, errf("out-of-line bitpacking %d of %d bits", cb, w)
	}
	bpv := w / 8
	if err := checkCount(uint64(n), len(b)); err != nil {
		return nil, err
	}
	blockBytes := 1024 * cb / 8
	whole, tail := n/1024, n%1024
	out := alloc((whole + 1) * 1024 * bpv)
	for k := 0; k < whole; k++ {
		if (k+1)*blockBytes > len(b) {
			return nil, errf("out-of-line bitpacking truncated at block %d", k)
		}
		unpackFL(w, cb, b[k*blockBytes:], out[k*1024*bpv:])
	}
	if tail > 0 {
		rest := b[whole*blockBytes:]
		switch {
		case len(rest) == tail*bpv:
			copy(out[whole*1024*bpv:], rest)
		case len(rest) >= blockBytes:
			unpackFL(w, cb, rest, out[whole*1024*bpv:])
		default:
			return nil, errf("out-of-line bitpacking tail of %d bytes for %d values", len(rest), tail)
		}
	}
	return &block{n: n, bits: w, data: out[:n*bpv]}, nil
}

func unrle(vals, lens []byte, vb, n int) (*block, error) {
	w := vb / 8
	if len(vals) < len(lens)*w {
		return nil, errf("rle has %d run lengths but %d value bytes", len(lens), len(vals))
	}
	if err := checkCount(uint64(n), len(lens)*255+1); err != nil {
		return nil, err
	}
	out := alloc(n * w)
	pos := 0
	for r, l := range lens {
		for k := 0; k < int(l) && pos < n; k++ {
			copy(out[pos*w:(pos+1)*w], vals[r*w:(r+1)*w])
			pos++
		}
		if pos >= n {
			break
		}
	}
	if pos != n {
		return nil, errf("rle runs cover %d values, want %d", pos, n)
	}
	return &block{n: n, bits: vb, data: out}, nil
}

func unbss(in *block) (*block, error) {
	if in.isVar || in.dim > 0 || in.bits%8 != 0 {
		return nil, errf("byte stream split over a non-fixed block")
	}
	w := in.bits / 8
	out := alloc(in.n * w)
	for b := 0; b < w; b++ {
		s := in.data[b*in.n : (b+1)*in.n]
		for i, v := range s {
			out[i*w+b] = v
		}
	}
	return &block{n: in.n, bits: in.bits, data: out}, nil
}

func unfsst(table []byte, in *block) (*block, error) {
	return unfsstBlocks(table, []*block{in})
}

// decodeBlock decodes a whole buffer holding n values: levels, dictionaries.
func decodeBlock(e *pb.CompressiveEncoding, b []byte, n int) (*block, error) {
	if e == nil {
		return nil, errf("buffer without an encoding")
	}
	switch c := e.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		d, err := bufferDecompress(c.Flat.GetData(), b)
		if err != nil {
			return nil, err
		}
		return fixedBlock(n, int(c.Flat.GetBitsPerValue()), d)
	case *pb.CompressiveEncoding_InlineBitpacking:
		d, err := bufferDecompress(c.InlineBitpacking.GetValues(), b)
		if err != nil {
			return nil, err
		}
		return unpackInline(int(c.InlineBitpacking.GetUncompressedBitsPerValue()), d, n)
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		cb, ok := flatBits(c.OutOfLineBitpacking.GetValues())
		if !ok {
			return nil, errf("out-of-line bitpacking values encoded as %T", c.OutOfLineBitpacking.GetValues().GetCompression())
		}
		return unpackOutOfLine(int(c.OutOfLineBitpacking.GetUncompressedBitsPerValue()), cb, b, n)
	case *pb.CompressiveEncoding_General:
		d, err := bufferDecompress(c.General.GetCompression(), b)
		if err != nil {
			return nil, err
		}
		return decodeBlock(c.General.GetValues(), d, n)
	case *pb.CompressiveEncoding_Variable:
		return blockVariable(b, n)
	case *pb.CompressiveEncoding_Constant:
		return constBlock(c.Constant.GetValue(), n)
	case *pb.CompressiveEncoding_Rle:
		return blockRle(c.Rle, b, n)
	case *pb.CompressiveEncoding_Fsst:
		inner, err := decodeBlock(c.Fsst.GetValues(), b, n)
		if err != nil {
			return nil, err
		}
		return unfsst(c.Fsst.GetSymbolTable(), inner)
	case *pb.CompressiveEncoding_FixedSizeList:
		return decodeFSL(c.FixedSizeList, [][]byte{b}, n, func(e *pb.CompressiveEncoding, bufs [][]byte, n int) (*block, error) {
			return decodeBlock(e, bufs[0], n)
		})
	}
	return nil, errf("unsupported block encoding %T", e.GetCompression())
}

// blockRle reads a run-length block: a u64 byte length of the values, the
// run values, then one u8 length per run.
func blockRle(r *pb.Rle, b []byte, n int) (*block, error) {
	vb, ok := flatBits(r.GetValues())
	lb, ok2 := flatBits(r.GetRunLengths())
	if !ok || !ok2 || lb != 8 || vb%8 != 0 || vb == 0 {
		return nil, errf("unsupported rle block layout")
	}
	if len(b) < 8 {
		return nil, errf("rle block of %d bytes", len(b))
	}
	vlen := le.Uint64(b)
	if vlen > uint64(len(b)-8) {
		return nil, errf("rle block values length %d beyond %d bytes", vlen, len(b))
	}
	return unrle(b[8:8+vlen], b[8+vlen:], vb, n)
}

// blockVariable reads a variable-width block buffer: the offset width
// (u32, or u64 for 64-bit offsets), the position of the bytes, the offsets,
// then the bytes.
func blockVariable(b []byte, n int) (*block, error) {
	if len(b) < 8 {
		return nil, errf("variable block of %d bytes", len(b))
	}
	bits := le.Uint32(b)
	var start uint64
	var offStart int
	switch bits {
	case 32:
		start, offStart = uint64(le.Uint32(b[4:])), 8
	case 64:
		if len(b) < 16 {
			return nil, errf("variable block of %d bytes", len(b))
		}
		start, offStart = le.Uint64(b[8:]), 16
	default:
		return nil, errf("variable block with %d-bit offsets", bits)
	}
	w := int(bits / 8)
	if start > uint64(len(b)) || start < uint64(offStart) || (start-uint64(offStart))/uint64(w) < uint64(n+1) {
		return nil, errf("variable block: bytes start %d", start)
	}
	data := b[start:]
	offs := make([]int64, n+1)
	var base uint64
	for i := 0; i <= n; i++ {
		var o uint64
		if w == 4 {
			o = uint64(le.Uint32(b[offStart+4*i:]))
		} else {
			o = le.Uint64(b[offStart+8*i:])
		}
		if i == 0 {
			base = o
		}
		if o < base || o-base > uint64(len(data)) || (i > 0 && int64(o-base) < offs[i-1]) {
			return nil, errf("variable block offset %d out of order or range", o)
		}
		offs[i] = int64(o - base)
	}
	return &block{n: n, isVar: true, offsets: offs, data: data[base : base+uint64(offs[n])]}, nil
}

// levels converts a decoded block to u16 levels.
func levelsOf(b *block) ([]uint16, error) {
	if b.isVar || b.dim > 0 {
		return nil, errf("levels are not fixed width")
	}
	out := make([]uint16, b.n)
	switch b.bits {
	case 16:
		for i := range out {
			out[i] = le.Uint16(b.data[2*i:])
		}
	case 8:
		for i := range out {
			out[i] = uint16(b.data[i])
		}
	case 1:
		for i := range out {
			if getBit(b.data, i) {
				out[i] = 1
			}
		}
	default:
		return nil, errf("levels of %d bits", b.bits)
	}
	return out, nil
}
