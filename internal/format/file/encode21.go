package file

import (
	"bytes"
	"errors"
	"math/bits"
	"strings"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// Field metadata keys the writer honours (as LanceDB does).
const (
	metaCompression = "lance-encoding:compression"
	metaStructural  = "lance-encoding:structural-encoding"
)

// errTooBig makes a mini-block page fall back to full-zip: a chunk would
// not fit the chunk header's fields.
var errTooBig = errors.New("mini-block chunk too large")

func flatEnc(bits int) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Flat{Flat: &pb.Flat{BitsPerValue: uint64(bits)}}}
}

func inlineEnc(bits int) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_InlineBitpacking{InlineBitpacking: &pb.InlineBitpacking{UncompressedBitsPerValue: uint64(bits)}}}
}

func variableEnc(offBits int) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Variable{Variable: &pb.Variable{Offsets: flatEnc(offBits)}}}
}

// isIntLike reports whether a kind's values are integers that bitpacking
// may narrow.
func isIntLike(k Kind) bool {
	switch k {
	case KindInt8, KindInt16, KindInt32, KindInt64, KindUint8, KindUint16, KindUint32, KindUint64,
		KindDate32, KindDate64, KindTime32, KindTime64, KindDuration, KindTimestamp:
		return true
	}
	return false
}

// bufferCodec is the general-purpose compression a field asks for.
func bufferCodec(f *Field) (pb.CompressionScheme, error) {
	switch strings.ToLower(f.Metadata[metaCompression]) {
	case "", "none", "fsst":
		return pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED, nil
	case "zstd":
		return pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, nil
	case "lz4":
		return pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, nil
	}
	return 0, errf("unknown %s %q", metaCompression, f.Metadata[metaCompression])
}

// encodePage21 chooses a layout for one page of a leaf column and encodes
// it: constant for all-null or single-valued pages, full-zip for wide
// values (or when the field asks for it), mini-block otherwise.
func (w *Writer) encodePage21(leaf *Field, s *shredded) ([][]byte, *pb.PageLayout, error) {
	if s.values.packed != nil {
		// Packed structs as LanceDB writes them: fixed-width rows in
		// mini-block (full-zip when wide), variable rows full-zip (2.2).
		if s.values.isVar {
			if w.opts.Version == V2_1 {
				return nil, nil, errf("packed struct %q with variable-width children needs format 2.2", leaf.Name)
			}
			return fullZipPage(leaf, s)
		}
		if wideValues(leaf, s.values) || strings.ToLower(leaf.Metadata[metaStructural]) == "fullzip" {
			return fullZipPage(leaf, s)
		}
		codec, err := bufferCodec(leaf)
		if err != nil {
			return nil, nil, err
		}
		return miniBlockPage(leaf, s, w.opts.Version, codec, w.scratch())
	}
	if l := constantPage(leaf, s, w.opts.Version); l != nil {
		return nil, l, nil
	}
	mode := strings.ToLower(leaf.Metadata[metaStructural])
	codec, err := bufferCodec(leaf)
	if err != nil {
		return nil, nil, err
	}
	if leaf.Type.DictIndex != KindNull {
		// An Arrow dictionary field is mini-block with a dictionary
		// whatever its values, as LanceDB writes it: its reader wants the
		// indices at the declared key width.
		return miniBlockPage(leaf, plainValues(s), w.opts.Version, codec, w.scratch())
	}
	wide := wideValues(leaf, s.values)
	if mode == "fullzip" || wide && mode != "miniblock" {
		return fullZipPage(leaf, plainValues(s))
	}
	bufs, l, err := miniBlockPage(leaf, s, w.opts.Version, codec, w.scratch())
	if errors.Is(err, errTooBig) {
		return fullZipPage(leaf, plainValues(s))
	}
	return bufs, l, err
}

// plainValues is s with FSST-compressed values expanded (full-zip pages
// store values as they are).
func plainValues(s *shredded) *shredded {
	v := s.values
	if v.fsst == nil {
		return s
	}
	out := &block{n: v.n, isVar: true, offsets: make([]int64, v.n+1)}
	for i := 0; i < v.n; i++ {
		c := v.data[v.offsets[i]:v.offsets[i+1]]
		l, err := v.fsstT.expandedLen(c)
		if err != nil {
			c = c[:len(c)-1] // a dangling escape expands to nothing
			l, _ = v.fsstT.expandedLen(c)
		}
		pos := len(out.data)
		out.data = append(out.data, make([]byte, l)...)
		v.fsstT.expand(out.data, pos, c)
		out.offsets[i+1] = int64(len(out.data))
	}
	c := *s
	c.values = out
	return &c
}

// fullZipBound reports whether encodePage21 will write the page full-zip.
func fullZipBound(leaf *Field, s *shredded) bool {
	mode := strings.ToLower(leaf.Metadata[metaStructural])
	return s.values.packed != nil && s.values.isVar || mode == "fullzip" || wideValues(leaf, s.values) && mode != "miniblock"
}

// wideValues reports values of 256 bytes or more on average, which LanceDB
// stores full-zip.
func wideValues(leaf *Field, v *block) bool {
	switch {
	case v.isVar:
		return v.n > 0 && (v.offsets[v.n]-v.offsets[0])/int64(v.n) >= 256
	case v.dim > 0:
		return v.dim*v.child.bits/8 >= 256
	}
	return v.bits/8 >= 256
}

// constantPage is a constant layout for a page whose rows are all null (at
// the innermost layer) or all one small fixed-width value, or nil.
func constantPage(leaf *Field, s *shredded, ver Version) *pb.PageLayout {
	if s.rep != nil || s.rows == 0 {
		return nil
	}
	if s.def != nil {
		for _, d := range s.def {
			if d != 1 {
				return nil
			}
		}
		return &pb.PageLayout{Layout: &pb.PageLayout_ConstantLayout{ConstantLayout: &pb.ConstantLayout{Layers: s.layers}}}
	}
	v := s.values
	if s.def != nil || ver.Less(V2_2) {
		// Lance 2.1 accepts only the all-null constant form.
		return nil
	}
	if v.isVar || v.dim > 0 || v.bits < 8 || v.bits > 256 || leaf.Type.Kind == KindNull || s.rows < 2 {
		return nil
	}
	if leaf.Type.DictIndex != KindNull {
		// LanceDB cannot read a dictionary of numbers back from an inline
		// constant ("Value data for Dictionary … should contain 1 child
		// data array"); it writes a one-item dictionary page itself.
		return nil
	}
	w := v.bits / 8
	first := v.data[:w]
	for i := 1; i < v.n; i++ {
		if !bytes.Equal(v.data[i*w:(i+1)*w], first) {
			return nil
		}
	}
	return &pb.PageLayout{Layout: &pb.PageLayout_ConstantLayout{ConstantLayout: &pb.ConstantLayout{
		Layers: s.layers, InlineValue: append([]byte(nil), first...)}}}
}

// visibleLevels marks the raw definition levels whose slots carry a value.
func visibleLevels(layers []pb.RepDefLayer) []bool {
	codes, _ := defCodes(layers)
	lists := make([]bool, len(layers))
	for i, l := range layers {
		lists[i] = isListLayer(l)
	}
	out := make([]bool, len(codes))
	for i, c := range codes {
		out[i] = visibleCode(c, lists)
	}
	return out
}

// valueEncoder encodes ranges of a page's visible values as the value
// buffers of mini-block chunks.
type valueEncoder struct {
	enc      *pb.CompressiveEncoding
	nbuf     int
	perChunk func(lo, hi int) int // values in the next chunk starting at lo (hi: end of page)
	encode   func(lo, hi int) [][]byte
	dict     []byte
	ndict    int
	dictEnc  *pb.CompressiveEncoding
}

// flatChunk is LanceDB's chunk size for fixed-width values: the largest
// power of two (at most 4096) whose bytes stay under 8 KiB.
func flatChunk(bitsPerValue int) int {
	n := 1
	size := (bitsPerValue + 7) / 8
	if bitsPerValue < 8 {
		n, size = 8/bitsPerValue, 1
	}
	for 2*size < 8186 && 2*n <= 4096 {
		n *= 2
		size *= 2
	}
	return n
}

func fixedChunks(per int) func(lo, hi int) int {
	return func(lo, hi int) int { return min(per, hi-lo) }
}

func newValueEncoder(leaf *Field, v *block, sc *encScratch) *valueEncoder {
	switch {
	case v.dim > 0:
		cb := v.child.bits
		e := &valueEncoder{nbuf: 1}
		inner := flatEnc(cb)
		e.enc = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{
			ItemsPerValue: uint64(v.dim), Values: inner, HasValidity: v.itemValid != nil}}}
		if v.itemValid != nil {
			e.nbuf = 2
		}
		e.perChunk = fixedChunks(max(2, flatChunk(v.dim*cb+v.dim)))
		e.encode = func(lo, hi int) [][]byte {
			var out [][]byte
			if v.itemValid != nil {
				vb := make([]byte, bitmapLen((hi-lo)*v.dim))
				copyBits(vb, 0, v.itemValid, lo*v.dim, (hi-lo)*v.dim)
				out = append(out, vb)
			}
			return append(out, fixedRange(v.child, lo*v.dim, hi*v.dim))
		}
		return e
	case v.isVar && v.fsst != nil:
		// Values compressed with a source page's table are kept so.
		e := variableEncoder(leaf, v, sc)
		e.enc = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Fsst{Fsst: &pb.Fsst{Values: e.enc, SymbolTable: v.fsst}}}
		return e
	case v.isVar:
		if e := dictEncoder(v, isLarge(leaf.Type.Kind), sc); e != nil {
			return e
		}
		if mode := strings.ToLower(leaf.Metadata[metaCompression]); mode != "none" {
			if c, tab, ok := fsstBlock(v, mode == "fsst", sc); ok {
				e := variableEncoder(leaf, c, sc)
				e.enc = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Fsst{Fsst: &pb.Fsst{Values: e.enc, SymbolTable: tab}}}
				return e
			}
		}
		return variableEncoder(leaf, v, sc)
	case v.packed != nil:
		bw := v.bits
		return &valueEncoder{nbuf: 1, enc: packedFixedEnc(v.packed, flatEnc(bw)), perChunk: fixedChunks(max(2, flatChunk(bw))), encode: func(lo, hi int) [][]byte {
			return [][]byte{fixedRange(v, lo, hi)}
		}}
	case v.bits == 1:
		return &valueEncoder{nbuf: 1, enc: flatEnc(1), perChunk: fixedChunks(4096), encode: func(lo, hi int) [][]byte {
			b := make([]byte, bitmapLen(hi-lo))
			copyBits(b, 0, v.data, lo, hi-lo)
			return [][]byte{b}
		}}
	}
	bw := v.bits
	if isIntLike(leaf.Type.Kind) && (bw == 8 || bw == 16 || bw == 32 || bw == 64) && v.n > 0 {
		if inlineSize(bw, v.data, v.n) < v.n*bw/8*9/10 {
			return &valueEncoder{nbuf: 1, enc: inlineEnc(bw), perChunk: fixedChunks(1024), encode: func(lo, hi int) [][]byte {
				sc.vals = packInline(sc.vals[:0], bw, v.data[lo*bw/8:hi*bw/8], hi-lo)
				return [][]byte{sc.vals}
			}}
		}
	}
	return &valueEncoder{nbuf: 1, enc: flatEnc(bw), perChunk: fixedChunks(max(2, flatChunk(bw))), encode: func(lo, hi int) [][]byte {
		return [][]byte{fixedRange(v, lo, hi)}
	}}
}

// variableEncoder stores variable-width values as they are: per chunk
// offsets (u32, or u64 for large types) then the bytes.
func variableEncoder(leaf *Field, v *block, sc *encScratch) *valueEncoder {
	ob := 32
	if v.offsets[v.n]-v.offsets[0] > 1<<31-1 || leaf.Type.Kind == KindLargeUtf8 || leaf.Type.Kind == KindLargeBinary {
		ob = 64
	}
	e := &valueEncoder{nbuf: 1, enc: variableEnc(ob)}
	e.perChunk = func(lo, hi int) int {
		size := func(m int) int64 { return v.offsets[lo+m] - v.offsets[lo] + int64(ob/8*(m+1)) }
		if hi-lo <= 4096 && size(hi-lo) <= 8186 {
			return hi - lo
		}
		m := 4096
		for m > 2 && (m >= hi-lo || size(m) > 8186) {
			m /= 2
		}
		return min(m, hi-lo)
	}
	e.encode = func(lo, hi int) [][]byte {
		m := hi - lo
		w := ob / 8
		base := v.offsets[lo]
		need := w*(m+1) + int(v.offsets[hi]-base) + w
		if cap(sc.vals) < need {
			sc.vals = make([]byte, 0, max(need, 16<<10))
		}
		out := sc.vals[:0]
		start := int64(w * (m + 1))
		for i := lo; i <= hi; i++ {
			o := start + v.offsets[i] - base
			if w == 4 {
				out = le.AppendUint32(out, uint32(o))
			} else {
				out = le.AppendUint64(out, uint64(o))
			}
		}
		out = append(out, v.data[base:v.offsets[hi]]...)
		for len(out)%w != 0 {
			out = append(out, 0) // Lance wants whole offset words
		}
		sc.vals = out
		return [][]byte{out}
	}
	return e
}

func fixedRange(b *block, lo, hi int) []byte {
	if b.bits == 1 {
		out := make([]byte, bitmapLen(hi-lo))
		copyBits(out, 0, b.data, lo, hi-lo)
		return out
	}
	w := b.bits / 8
	return b.data[lo*w : hi*w]
}

// arrowDictEncoder encodes the values of an Arrow dictionary field: the
// distinct values (first-use order) as the page's dictionary and indices
// bitpacked at the declared index type's width. Null slots (isNull, nil
// when there are none) point at item 0 rather than adding their
// placeholder value to the dictionary, so a key type holds as many
// distinct values as it does in LanceDB's own files.
func arrowDictEncoder(leaf *Field, v *block, isNull func(int) bool, sc *encScratch) (*valueEncoder, error) {
	ix := leaf.Type.DictIndex
	// A dictionary of numbers has fixed-width values: its dictionary is
	// a flat buffer of the distinct values at their width.
	// Booleans (one bit each) are keyed by a byte of 0 or 1.
	w, boolean := 0, false
	if !v.isVar {
		boolean = leaf.Type.Kind == KindBool && v.bits == 1
		if v.dim != 0 || v.fields != nil || !boolean && (v.bits%8 != 0 || v.bits == 0 || v.bits != 8*leaf.Type.ByteWidth()) {
			return nil, errf("dictionary field %q: values of %d bits for %s items", leaf.Name, v.bits, leaf.Type.Kind)
		}
		w = max(1, v.bits/8)
	}
	bw := dictIndexBits(ix)
	ids := make(map[string]uint64)
	var items [][]byte
	idx := alloc(bw / 8 * v.n)
	nulls := false
	for i := 0; i < v.n; i++ {
		if isNull != nil && isNull(i) {
			// Index 0, set below once there is an item.
			nulls = true
			putUint(idx[i*bw/8:], bw, 0)
			continue
		}
		var s []byte
		switch {
		case boolean:
			s = bitBytes[0:1]
			if getBit(v.data, i) {
				s = bitBytes[1:2]
			}
		case w > 0:
			s = v.data[i*w : (i+1)*w]
		default:
			s = v.data[v.offsets[i]:v.offsets[i+1]]
		}
		id, ok := ids[string(s)]
		if !ok {
			id = uint64(len(items))
			ids[string(s)] = id
			items = append(items, s)
		}
		putUint(idx[i*bw/8:], bw, id)
	}
	if nulls && len(items) == 0 {
		// Every slot is null: item 0 must still exist.
		items = append(items, make([]byte, w))
	}
	if uint64(len(items)) > dictIndexLimit(ix) {
		return nil, errf("field %q: %d distinct values do not fit a %s dictionary index", leaf.Name, len(items), ix)
	}
	var dict []byte
	var denc *pb.CompressiveEncoding
	if boolean {
		dict = make([]byte, bitmapLen(len(items)))
		for k, it := range items {
			if it[0] == 1 {
				setBit(dict, k)
			}
		}
		denc = flatEnc(1)
	} else if w > 0 {
		dict = make([]byte, 0, w*len(items))
		for _, it := range items {
			dict = append(dict, it...)
		}
		denc = flatEnc(8 * w)
	} else {
		dict, denc = dictItemsBlock(items, isLarge(leaf.Type.Kind))
	}
	return &valueEncoder{nbuf: 1, enc: inlineEnc(bw), perChunk: fixedChunks(1024),
		encode: func(lo, hi int) [][]byte {
			sc.vals = packInline(sc.vals[:0], bw, idx[lo*bw/8:hi*bw/8], hi-lo)
			return [][]byte{sc.vals}
		},
		dict: dict, ndict: len(items), dictEnc: denc}, nil
}

// dictItemsBlock lays out dictionary items as a variable block: offset
// width, start of the bytes, offsets, bytes. LanceDB wants 64-bit offsets
// for large strings and binaries, 32-bit ones otherwise.
func dictItemsBlock(items [][]byte, large bool) ([]byte, *pb.CompressiveEncoding) {
	ob := 32
	if large {
		ob = 64
	}
	nd := len(items)
	n := 0
	for _, it := range items {
		n += len(it)
	}
	// The header is two words of the offset width.
	start := ob/4 + ob/8*(nd+1)
	dict := make([]byte, 0, start+n)
	if large {
		dict = le.AppendUint64(dict, uint64(ob))
		dict = le.AppendUint64(dict, uint64(start))
	} else {
		dict = le.AppendUint32(dict, uint32(ob))
		dict = le.AppendUint32(dict, uint32(start))
	}
	var o uint64
	put := func(o uint64) {
		if large {
			dict = le.AppendUint64(dict, o)
		} else {
			dict = le.AppendUint32(dict, uint32(o))
		}
	}
	put(0)
	for _, it := range items {
		o += uint64(len(it))
		put(o)
	}
	for _, it := range items {
		dict = append(dict, it...)
	}
	return dict, variableEnc(ob)
}

// bitBytes are the keys of a boolean dictionary's two items.
var bitBytes = []byte{0, 1}

func isLarge(k Kind) bool { return k == KindLargeUtf8 || k == KindLargeBinary }

// dictEncoder encodes low-cardinality strings as a dictionary (items in a
// page buffer, bitpacked u32 indices in the chunks), as LanceDB does, or
// returns nil when the values are too diverse.
func dictEncoder(v *block, large bool, sc *encScratch) *valueEncoder {
	if v.n < 100 {
		return nil
	}
	limit := min(v.n/10, 4096)
	ids := make(map[string]uint32)
	var items [][]byte
	var itemBytes int
	// The distinct values are counted before the indices are allocated:
	// most string pages are too diverse and stop early.
	for i := 0; i < v.n; i++ {
		s := v.data[v.offsets[i]:v.offsets[i+1]]
		if _, ok := ids[string(s)]; !ok {
			if len(ids) >= limit {
				return nil
			}
			ids[string(s)] = uint32(len(items))
			items = append(items, s)
			itemBytes += len(s)
		}
	}
	if itemBytes+len(items)*4 > int(v.offsets[v.n]-v.offsets[0])/2 {
		return nil
	}
	idx := alloc(4 * v.n)
	for i := 0; i < v.n; i++ {
		le.PutUint32(idx[4*i:], ids[string(v.data[v.offsets[i]:v.offsets[i+1]])])
	}
	nd := len(items)
	dict, denc := dictItemsBlock(items, large)
	return &valueEncoder{nbuf: 1, enc: inlineEnc(32), perChunk: fixedChunks(1024),
		encode: func(lo, hi int) [][]byte {
			sc.vals = packInline(sc.vals[:0], 32, idx[4*lo:4*hi], hi-lo)
			return [][]byte{sc.vals}
		},
		dict: dict, ndict: nd, dictEnc: denc}
}

type chunkSpan struct{ vlo, vhi, slo, shi int }

// miniBlockPage encodes a page as mini-block chunks: buffers [chunk sizes,
// chunks, dictionary?, repetition index?].
//
// The chunk buffer and the values' scratch come from sc and stay valid
// until sc's next page (the writer writes a page before it encodes the
// next).
func miniBlockPage(leaf *Field, s *shredded, v Version, codec pb.CompressionScheme, sc *encScratch) ([][]byte, *pb.PageLayout, error) {
	if sc == nil {
		sc = &encScratch{}
	}
	vals := s.values
	n := vals.n
	// Slot of each visible value (only needed with levels).
	var visSlot []int
	if s.def != nil || s.rep != nil {
		vis := visibleLevels(s.layers)
		visSlot = make([]int, 0, n)
		for i := 0; i < s.slots; i++ {
			d := uint16(0)
			if s.def != nil {
				d = s.def[i]
			}
			if int(d) < len(vis) && vis[d] {
				visSlot = append(visSlot, i)
			}
		}
		if len(visSlot) != n {
			return nil, nil, errf("internal: %d visible slots for %d values", len(visSlot), n)
		}
	}
	var ve *valueEncoder
	if leaf.Type.DictIndex != KindNull {
		// A visible slot with a non-zero definition level is a null
		// item (or inside a null struct): its value is a placeholder.
		var isNull func(i int) bool
		if s.def != nil {
			isNull = func(i int) bool { return s.def[visSlot[i]] != 0 }
		}
		var err error
		if ve, err = arrowDictEncoder(leaf, vals, isNull, sc); err != nil {
			return nil, nil, err
		}
	} else {
		ve = newValueEncoder(leaf, vals, sc)
	}
	var spans []chunkSpan
	for lo := 0; lo < n || (n == 0 && len(spans) == 0); {
		m := ve.perChunk(lo, n)
		sp := chunkSpan{vlo: lo, vhi: lo + m, slo: lo, shi: lo + m}
		if visSlot != nil {
			sp.slo = 0
			if len(spans) > 0 {
				sp.slo = spans[len(spans)-1].shi
			}
			if lo+m < n {
				sp.shi = visSlot[lo+m]
			} else {
				sp.shi = s.slots
			}
		}
		spans = append(spans, sp)
		lo += m
		if m == 0 {
			break
		}
	}
	large := v != V2_1
	// Room for the values and the chunk headers, so the page is not
	// copied while it grows.
	est := 24 * len(spans)
	switch {
	case ve.dict != nil:
		est += 4 * vals.n
	case vals.isVar:
		est += int(vals.offsets[vals.n]-vals.offsets[0]) + 8*(vals.n+len(spans))
	case vals.dim > 0:
		est += (vals.n*vals.dim*vals.child.bits+7)/8 + bitmapLen(vals.n*vals.dim)
	default:
		est += (vals.n*vals.bits + 7) / 8
	}
	if s.def != nil || s.rep != nil {
		est += s.slots / 2
	}
	if cap(sc.chunks) < est {
		sc.chunks = make([]byte, 0, est)
	}
	chunks := sc.chunks[:0]
	meta := sc.meta[:0]
	var repIndex []byte
	for c, sp := range spans {
		m := sp.vhi - sp.vlo
		last := c == len(spans)-1
		if !last && (m < 2 || m&(m-1) != 0) {
			return nil, nil, errf("internal: chunk of %d values", m)
		}
		vb := ve.encode(sp.vlo, sp.vhi)
		if codec != pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED {
			cb, err := compressBuffer(codec, vb[0])
			if err != nil {
				return nil, nil, err
			}
			vb = append([][]byte{cb}, vb[1:]...)
		}
		var repB, defB []byte
		nlev := 0
		if s.rep != nil || s.def != nil {
			nlev = sp.shi - sp.slo
			if nlev > 0xffff {
				return nil, nil, errTooBig
			}
		}
		if s.rep != nil {
			repB = packLevels(s.rep[sp.slo:sp.shi], levelBits(s.maxRep))
		}
		if s.def != nil {
			defB = packLevels(s.def[sp.slo:sp.shi], levelBits(s.maxDef))
		}
		var hb [80]byte
		hdr := le.AppendUint16(hb[:0], uint16(nlev))
		for _, b := range [][]byte{repB, defB} {
			if b != nil {
				if len(b) > 0xffff {
					return nil, nil, errTooBig
				}
				hdr = le.AppendUint16(hdr, uint16(len(b)))
			}
		}
		if s.rep == nil && repB != nil || s.def == nil && defB != nil {
			return nil, nil, errf("internal: levels")
		}
		for _, b := range vb {
			if large {
				if uint64(len(b)) > 1<<32-1 {
					return nil, nil, errTooBig
				}
				hdr = le.AppendUint32(hdr, uint32(len(b)))
			} else {
				if len(b) > 0xffff {
					return nil, nil, errTooBig
				}
				hdr = le.AppendUint16(hdr, uint16(len(b)))
			}
		}
		start := len(chunks)
		chunks = append(chunks, hdr...)
		chunks = pad8(chunks, start)
		if s.rep != nil {
			chunks = pad8(append(chunks, repB...), start)
		}
		if s.def != nil {
			chunks = pad8(append(chunks, defB...), start)
		}
		for _, b := range vb {
			chunks = pad8(append(chunks, b...), start)
		}
		size := len(chunks) - start
		logN := 0
		if !last {
			logN = bits.TrailingZeros(uint(m))
		}
		word := uint64(size/8-1)<<4 | uint64(logN)
		if large {
			if word > 1<<32-1 {
				return nil, nil, errTooBig
			}
			meta = le.AppendUint32(meta, uint32(word))
		} else {
			if word > 0xffff {
				return nil, nil, errTooBig
			}
			meta = le.AppendUint16(meta, uint16(word))
		}
		if s.rep != nil {
			repIndex = appendRepIndex(repIndex, s, spans, c)
		}
	}
	enc := ve.enc
	if codec != pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED {
		enc = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_General{General: &pb.General{
			Compression: &pb.BufferCompression{Scheme: codec}, Values: enc}}}
	}
	ml := &pb.MiniBlockLayout{
		ValueCompression: enc,
		Layers:           s.layers,
		NumBuffers:       uint64(ve.nbuf),
		NumItems:         uint64(n),
		HasLargeChunk:    large,
	}
	if s.rep != nil {
		ml.RepCompression = outOfLineEnc(16, levelBits(s.maxRep))
		ml.RepetitionIndexDepth = 1
	}
	if s.def != nil {
		ml.DefCompression = outOfLineEnc(16, levelBits(s.maxDef))
	}
	sc.chunks, sc.meta = chunks, meta
	bufs := [][]byte{meta, chunks}
	if ve.dict != nil {
		ml.Dictionary = ve.dictEnc
		ml.NumDictionaryItems = uint64(ve.ndict)
		bufs = append(bufs, ve.dict)
	}
	if s.rep != nil {
		bufs = append(bufs, repIndex)
	}
	return bufs, &pb.PageLayout{Layout: &pb.PageLayout_MiniBlockLayout{MiniBlockLayout: ml}}, nil
}

// pad8 pads the chunk that starts at start to a multiple of 8 bytes.
func pad8(b []byte, start int) []byte {
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

func outOfLineEnc(w, cb int) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_OutOfLineBitpacking{OutOfLineBitpacking: &pb.OutOfLineBitpacking{
		UncompressedBitsPerValue: uint64(w), Values: flatEnc(cb)}}}
}

func levelBits(m uint16) int { return max(1, bits.Len16(m)) }

// packLevels writes u16 levels with out-of-line bitpacking at cb bits, as
// LanceDB does: whole 1024-level blocks, then the tail packed in a padded
// block when that is smaller than leaving it raw.
func packLevels(l []uint16, cb int) []byte {
	raw := alloc(2 * (len(l) + 1024))
	for i, v := range l {
		le.PutUint16(raw[2*i:], v)
	}
	whole, tail := len(l)/1024, len(l)%1024
	out := make([]byte, 0, (whole+1)*cb*128)
	for k := 0; k < whole; k++ {
		out = packFL(out, 16, cb, raw[k*2048:])
	}
	if tail > 0 {
		if cb*(1024-tail) < (16-cb)*tail {
			out = packFL(out, 16, cb, raw[whole*2048:]) // zero padded
		} else {
			out = append(out, raw[whole*2048:(whole*1024+tail)*2]...)
		}
	}
	return out
}

// appendRepIndex adds chunk c's entry to a mini-block repetition index:
// the rows that end in the chunk and, when its last row continues into
// the next chunk, the number of that row's levels in this chunk.
func appendRepIndex(dst []byte, s *shredded, spans []chunkSpan, c int) []byte {
	sp := spans[c]
	starts := 0
	lastStart := -1
	for i := sp.slo; i < sp.shi; i++ {
		if s.rep[i] == s.maxRep {
			starts++
			lastStart = i
		}
	}
	trailer := c < len(spans)-1 && spans[c+1].slo < s.slots && s.rep[spans[c+1].slo] != s.maxRep
	preamble := c > 0 && sp.slo < s.slots && s.rep[sp.slo] != s.maxRep
	ends := starts
	if trailer {
		ends--
	}
	if preamble {
		ends++
	}
	partial := 0
	if trailer {
		if lastStart < 0 {
			lastStart = sp.slo
		}
		partial = sp.shi - lastStart
	}
	return le.AppendUint64(le.AppendUint64(dst, uint64(ends)), uint64(partial))
}

// fullZipPage encodes a page as full-zip: per slot a control word
// (rep<<bits_def | def) and, for visible values, the value (fixed width,
// or a u32 length and the bytes); buffer 1 is the byte offset of every
// row (variable-width values, or any value with repetition).
func fullZipPage(leaf *Field, s *shredded) ([][]byte, *pb.PageLayout, error) {
	v := s.values
	if !v.isVar && v.dim == 0 && v.bits == 1 {
		// A byte per bool.
		b := alloc(v.n)
		for i := 0; i < v.n; i++ {
			if getBit(v.data, i) {
				b[i] = 1
			}
		}
		v = &block{n: v.n, bits: 8, data: b}
	}
	br, bd := bits.Len16(s.maxRep), bits.Len16(s.maxDef)
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
	vis := visibleLevels(s.layers)
	fz := &pb.FullZipLayout{BitsRep: uint32(br), BitsDef: uint32(bd), NumItems: uint32(s.slots), NumVisibleItems: uint32(v.n), Layers: s.layers}
	fixed := 0
	switch {
	case v.isVar && v.packed != nil:
		fz.Details = &pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 32}
		fz.ValueCompression = packedVarEnc(v.packed)
	case v.packed != nil:
		fixed = v.bits / 8
		fz.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(v.bits)}
		fz.ValueCompression = packedFixedEnc(v.packed, flatEnc(v.bits))
	case v.isVar:
		// Lance 12 reads a large type's full-zip lengths only as 64-bit
		// ("expected 64-bit offsets" on a large_binary written with 32).
		ob := 32
		if isLarge(leaf.Type.Kind) {
			ob = 64
		}
		fz.Details = &pb.FullZipLayout_BitsPerOffset{BitsPerOffset: uint32(ob)}
		fz.ValueCompression = variableEnc(ob)
	case v.dim > 0 && v.itemValid != nil:
		// Per value: the items' validity bitmap, then the items.
		cb := v.child.bits
		if cb%8 != 0 && cb != 1 {
			return nil, nil, errf("full-zip fixed-size list of %d-bit items", cb)
		}
		vb, items := (v.dim+7)/8, (v.dim*cb+7)/8
		fixed = vb + items
		rows := alloc(v.n * fixed)
		for r := 0; r < v.n; r++ {
			row := rows[r*fixed : (r+1)*fixed]
			copyBits(row[:vb], 0, v.itemValid, r*v.dim, v.dim)
			if cb == 1 {
				copyBits(row[vb:], 0, v.child.data, r*v.dim, v.dim)
			} else {
				copy(row[vb:], v.child.data[r*items:(r+1)*items])
			}
		}
		fz.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(8 * fixed)}
		fz.ValueCompression = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{
			ItemsPerValue: uint64(v.dim), Values: flatEnc(cb), HasValidity: true}}}
		v = &block{n: v.n, bits: 8 * fixed, data: rows}
	case v.dim > 0:
		fixed = v.dim * v.child.bits / 8
		fz.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(8 * fixed)}
		fz.ValueCompression = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{
			ItemsPerValue: uint64(v.dim), Values: flatEnc(v.child.bits)}}}
		if v.child.bits%8 != 0 {
			return nil, nil, errf("full-zip fixed-size list of %d-bit items", v.child.bits)
		}
		v = &block{n: v.n, bits: 8 * fixed, data: v.child.data}
	default:
		fixed = v.bits / 8
		fz.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(v.bits)}
		fz.ValueCompression = flatEnc(v.bits)
	}
	if s.slots > 1<<32-1 {
		return nil, nil, errf("page of %d slots", s.slots)
	}
	needIndex := v.isVar || s.rep != nil
	if fixed > 0 && cw == 0 && !needIndex && s.slots == v.n {
		// No control words: the page is its values back to back, as
		// they are (a vector column without nulls).
		return [][]byte{v.data[:v.n*fixed]}, &pb.PageLayout{Layout: &pb.PageLayout_FullZipLayout{FullZipLayout: fz}}, nil
	}
	var data []byte
	if fixed > 0 {
		data = make([]byte, 0, s.slots*cw+v.n*fixed)
	}
	var rowStarts []uint64
	vi := 0
	for i := 0; i < s.slots; i++ {
		var r, d uint16
		if s.rep != nil {
			r = s.rep[i]
		}
		if s.def != nil {
			d = s.def[i]
		}
		if needIndex && (s.rep == nil || r == s.maxRep) {
			rowStarts = append(rowStarts, uint64(len(data)))
		}
		word := uint32(r)<<uint(bd) | uint32(d)
		switch cw {
		case 1:
			data = append(data, byte(word))
		case 2:
			data = le.AppendUint16(data, uint16(word))
		case 4:
			data = le.AppendUint32(data, word)
		}
		if int(d) >= len(vis) || !vis[d] {
			continue
		}
		if fixed > 0 {
			data = append(data, v.data[vi*fixed:(vi+1)*fixed]...)
		} else if d == 0 {
			val := v.data[v.offsets[vi]:v.offsets[vi+1]]
			if fz.GetBitsPerOffset() == 64 {
				data = le.AppendUint64(data, uint64(len(val)))
			} else if uint64(len(val)) > 1<<32-1 {
				return nil, nil, errf("value of %d bytes", len(val))
			} else {
				data = le.AppendUint32(data, uint32(len(val)))
			}
			data = append(data, val...)
		}
		vi++
	}
	if vi != v.n {
		return nil, nil, errf("internal: full-zip wrote %d of %d values", vi, v.n)
	}
	bufs := [][]byte{data}
	if needIndex {
		rowStarts = append(rowStarts, uint64(len(data)))
		bufs = append(bufs, bytePack(rowStarts, uint64(len(data))))
	}
	return bufs, &pb.PageLayout{Layout: &pb.PageLayout_FullZipLayout{FullZipLayout: fz}}, nil
}

// bytePack writes integers at the narrowest of 1, 2, 4 or 8 bytes that
// holds maxv.
func bytePack(vs []uint64, maxv uint64) []byte {
	w := 8
	switch {
	case maxv <= 0xff:
		w = 1
	case maxv <= 0xffff:
		w = 2
	case maxv <= 0xffffffff:
		w = 4
	}
	out := make([]byte, 0, w*len(vs))
	for _, x := range vs {
		switch w {
		case 1:
			out = append(out, byte(x))
		case 2:
			out = le.AppendUint16(out, uint16(x))
		case 4:
			out = le.AppendUint32(out, uint32(x))
		default:
			out = le.AppendUint64(out, x)
		}
	}
	return out
}
