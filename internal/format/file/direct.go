package file

import (
	"sync"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// dkind is a mini-block value encoding whose chunks decodePage writes
// straight into one page buffer (directPage) rather than into a block per
// chunk joined afterwards.
type dkind int

const (
	directNone     dkind = iota
	directFlat           // flat, whole bytes per value, no buffer compression
	directInline         // inline bitpacking without buffer compression
	directVariable       // variable width (optionally under FSST): offsets only
)

func plainBuffer(c *pb.BufferCompression) bool {
	return c == nil || c.GetScheme() == pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED
}

// directOf is the direct decoding of chunks encoded as e with nbuf value
// buffers, or directNone.
func directOf(e *pb.CompressiveEncoding, nbuf int) dkind {
	if nbuf != 1 || e == nil {
		return directNone
	}
	switch c := e.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		if b := int(c.Flat.GetBitsPerValue()); b >= 8 && b%8 == 0 && plainBuffer(c.Flat.GetData()) {
			return directFlat
		}
	case *pb.CompressiveEncoding_InlineBitpacking:
		switch c.InlineBitpacking.GetUncompressedBitsPerValue() {
		case 8, 16, 32, 64:
			if plainBuffer(c.InlineBitpacking.GetValues()) {
				return directInline
			}
		}
	case *pb.CompressiveEncoding_Variable:
		if ob, ok := flatBits(c.Variable.GetOffsets()); ok && (ob == 32 || ob == 64) && plainBuffer(c.Variable.GetValues()) {
			return directVariable
		}
	}
	return directNone
}

// directPage receives a page's chunks in order.
type directPage struct {
	kind  dkind
	bits  int // fixed: bits per value; variable: offset bits
	n     int // values added
	total int
	data  []byte  // fixed: the page's values (inline: plus a block of slack)
	offs  []int64 // variable: each chunk's n+1 offsets, one after another
}

func newDirectPage(k dkind, e *pb.CompressiveEncoding, total, chunks int, rb *decodeBufs) *directPage {
	d := &directPage{kind: k, total: total}
	switch k {
	case directFlat:
		d.bits = int(e.GetFlat().GetBitsPerValue())
		d.data = rb.bytes(total * d.bits / 8)
	case directInline:
		d.bits = int(e.GetInlineBitpacking().GetUncompressedBitsPerValue())
		// unpackInline writes whole blocks of 1024 values.
		d.data = rb.bytes((total + 1024) * d.bits / 8)
	case directVariable:
		d.bits, _ = flatBits(e.GetVariable().GetOffsets())
		d.offs = rb.int64s(total + chunks)[:0]
	}
	return d
}

// decodeBufs are buffers of a column's decoded windows that a Stream
// handing out views gets back when the next window replaces them; the
// decoder takes them instead of allocating (and zeroing) fresh ones.
// Every byte of a taken buffer is overwritten before it is read. Only
// buffers it lent out (the last few) are taken back, so memory that
// belongs to anything else (file metadata, a constant page) never is.
type decodeBufs struct {
	// keepFSST: the column's FSST-compressed pages stay compressed
	// (Stream.KeepFSST).
	keepFSST bool
	b        [][]byte
	i64      [][]int64
	lentB    [][]byte
	lentI64  [][]int64
}

const decodeBufsMax = 4

// bytes is n bytes (8-byte aligned, contents undefined); nil rb: fresh.
func (rb *decodeBufs) bytes(n int) []byte {
	if rb == nil {
		return alloc(n)
	}
	var out []byte
	for i, b := range rb.b {
		if cap(b) >= n {
			rb.b = append(rb.b[:i], rb.b[i+1:]...)
			out = b[:n]
			break
		}
	}
	if out == nil {
		out = sparePool.bytes(n)
	}
	if out == nil {
		out = alloc(n + n/8)[:n]
	}
	if len(rb.lentB) >= 2*decodeBufsMax {
		rb.lentB = append(rb.lentB[:0], rb.lentB[1:]...)
	}
	rb.lentB = append(rb.lentB, out)
	return out
}

// int64s is n int64s, contents undefined; nil rb: fresh.
func (rb *decodeBufs) int64s(n int) []int64 {
	if rb == nil {
		return make([]int64, n)
	}
	var out []int64
	for i, b := range rb.i64 {
		if cap(b) >= n {
			rb.i64 = append(rb.i64[:i], rb.i64[i+1:]...)
			out = b[:n]
			break
		}
	}
	if out == nil {
		out = sparePool.int64s(n)
	}
	if out == nil {
		out = make([]int64, n, n+n/8)
	}
	if len(rb.lentI64) >= 2*decodeBufsMax {
		rb.lentI64 = append(rb.lentI64[:0], rb.lentI64[1:]...)
	}
	rb.lentI64 = append(rb.lentI64, out)
	return out
}

// release hands every buffer rb holds to sparePool, the window it lent
// last included (a: the stream's cached window, whose view is no longer
// valid): the stream has ended.
func (rb *decodeBufs) release(a *Array) {
	if a != nil {
		rb.give(a)
	}
	for _, b := range rb.b {
		sparePool.putBytes(b)
	}
	for _, b := range rb.i64 {
		sparePool.putInt64s(b)
	}
	rb.b, rb.i64, rb.lentB, rb.lentI64 = nil, nil, nil, nil
}

// sparePool keeps the decode buffers of ended streams for the next
// stream's columns: a compaction reads its source files one after
// another, and fresh buffers for each are page faults (first touch of
// new heap) and zeroing, a large part of the system time. It holds at
// most spareMax bytes.
var sparePool spares

const spareMax = 64 << 20

type spares struct {
	mu   sync.Mutex
	b    [][]byte
	i64  [][]int64
	held int
}

func (p *spares) bytes(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, b := range p.b {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.b[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := p.b[best]
	p.b = append(p.b[:best], p.b[best+1:]...)
	p.held -= cap(b)
	return b[:n]
}

func (p *spares) int64s(n int) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, b := range p.i64 {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.i64[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := p.i64[best]
	p.i64 = append(p.i64[:best], p.i64[best+1:]...)
	p.held -= 8 * cap(b)
	return b[:n]
}

func (p *spares) putBytes(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cap(b) == 0 || p.held+cap(b) > spareMax {
		return
	}
	p.b = append(p.b, b[:cap(b)])
	p.held += cap(b)
}

// DropSpareBuffers lets the garbage collector have the decode buffers
// kept for the next stream. A long-lived process calls it when a batch of
// reads (a compaction) is over, so that up to spareMax bytes do not stay
// resident while it idles; a stream running meanwhile only loses reuse.
func DropSpareBuffers() {
	sparePool.mu.Lock()
	defer sparePool.mu.Unlock()
	sparePool.b, sparePool.i64, sparePool.held = nil, nil, 0
}

func (p *spares) putInt64s(b []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cap(b) == 0 || p.held+8*cap(b) > spareMax {
		return
	}
	p.i64 = append(p.i64, b[:cap(b)])
	p.held += 8 * cap(b)
}

// give takes back the buffers of an array nothing else references, those
// of them it lent.
func (rb *decodeBufs) give(a *Array) {
	if a.Type.Kind == KindFixedSizeList && len(a.Children) == 1 {
		// A vector column's values are its items'.
		a = a.Children[0]
	}
	if len(a.Values) > 0 {
		for i, b := range rb.lentB {
			if &b[:1][0] == &a.Values[:1][0] {
				rb.lentB = append(rb.lentB[:i], rb.lentB[i+1:]...)
				if len(rb.b) < decodeBufsMax {
					rb.b = append(rb.b, b[:cap(b)])
				}
				break
			}
		}
	}
	if len(a.Offsets) > 0 {
		rb.giveInt64s(a.Offsets)
	}
}

// giveInt64s takes back o if it lent it.
func (rb *decodeBufs) giveInt64s(o []int64) {
	if rb == nil || len(o) == 0 {
		return
	}
	for i, b := range rb.lentI64 {
		if &b[:1][0] == &o[0] {
			rb.lentI64 = append(rb.lentI64[:i], rb.lentI64[i+1:]...)
			if len(rb.i64) < decodeBufsMax {
				rb.i64 = append(rb.i64, b[:cap(b)])
			}
			return
		}
	}
}

// add decodes one chunk of n values from its value buffer b. Variable
// chunks come back as blocks (views of b and of the shared offsets) for
// the FSST expansion or concatenation; fixed ones are written in place.
func (d *directPage) add(b []byte, n int) (*block, error) {
	if n > d.total-d.n {
		return nil, errf("mini-block chunks hold more than the page's %d values", d.total)
	}
	at := d.n
	d.n += n
	switch d.kind {
	case directFlat:
		w := d.bits / 8
		if len(b) < n*w {
			return nil, errf("%d values of %d bits need %d bytes, buffer has %d", n, d.bits, n*w, len(b))
		}
		copy(d.data[at*w:], b[:n*w])
		return nil, nil
	case directInline:
		return nil, unpackInlineInto(d.bits, b, n, d.data[at*d.bits/8:])
	}
	lo := len(d.offs)
	if cap(d.offs)-lo < n+1 {
		return nil, errf("mini-block variable chunks hold more offsets than the page's values")
	}
	offs := d.offs[lo : lo+n+1]
	d.offs = d.offs[:lo+n+1]
	data, err := chunkOffsets(b, n, d.bits, offs)
	if err != nil {
		return nil, err
	}
	return &block{n: n, isVar: true, offsets: offs, data: data}, nil
}

// fixed is the page's fixed-width block once every chunk was added.
func (d *directPage) fixed() *block {
	return &block{n: d.total, bits: d.bits, data: d.data[:d.total*d.bits/8]}
}
