package file

import (
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

func newDirectPage(k dkind, e *pb.CompressiveEncoding, total, chunks int) *directPage {
	d := &directPage{kind: k, total: total}
	switch k {
	case directFlat:
		d.bits = int(e.GetFlat().GetBitsPerValue())
		d.data = alloc(total * d.bits / 8)
	case directInline:
		d.bits = int(e.GetInlineBitpacking().GetUncompressedBitsPerValue())
		// unpackInline writes whole blocks of 1024 values.
		d.data = alloc((total + 1024) * d.bits / 8)
	case directVariable:
		d.bits, _ = flatBits(e.GetVariable().GetOffsets())
		d.offs = make([]int64, 0, total+chunks)
	}
	return d
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
