package file

// FSST (Fast Static Symbol Table, Boncz, Neumann, Leis 2020) as Lance
// stores it: a symbol table of up to 255 symbols of 1-8 bytes in the page's
// encoding description, and values whose bytes are codes (a symbol's index,
// or 255 followed by a literal byte).
//
// Serialized table (fsstTableSize bytes once written): a u64 header (low
// byte: the symbol count n; bit 24: compression on; high 32 bits: the magic
// "FSST"), n symbols as little-endian u64s, then their n lengths.

import "bytes"

const (
	fsstMagic      = 0x46535354
	fsstEscape     = 255
	fsstTableBytes = 8 + 256*8 + 256
)

// fsstTable is a decoded FSST symbol table.
type fsstTable struct {
	sym [256]uint64
	n   [256]uint8
	// raw: the encoder switched compression off; values are stored as is.
	raw bool
}

// parseFSST reads Lance's serialized symbol table: a u64 header (low byte:
// the number of symbols; bit 24: compression on), the symbols as u64s, then
// their lengths right after them. Codes past the table expand to nothing.
func parseFSST(b []byte) (*fsstTable, error) {
	if len(b) < 8 {
		return nil, errf("fsst symbol table of %d bytes", len(b))
	}
	info := le.Uint64(b)
	if info>>32 != fsstMagic {
		return nil, errf("fsst symbol table without its magic")
	}
	t := &fsstTable{raw: info&(1<<24) == 0}
	ns := int(info & 255)
	if len(b) < 8+ns*9 {
		return nil, errf("fsst symbol table of %d bytes for %d symbols", len(b), ns)
	}
	for i := 0; i < ns; i++ {
		t.sym[i] = le.Uint64(b[8+8*i:])
		t.n[i] = b[8+8*ns+i]
		if t.n[i] > 8 {
			return nil, errf("fsst symbol %d has length %d", i, t.n[i])
		}
	}
	// Code 255 is always the escape: one literal byte follows.
	t.sym[fsstEscape], t.n[fsstEscape] = 0, 0
	return t, nil
}

// expandedLen is the decoded length of one compressed value; an escape
// without its literal is an error.
func (t *fsstTable) expandedLen(src []byte) (int, error) {
	n := 0
	lens := &t.n
	i := 0
	for i < len(src) {
		if i+8 <= len(src) {
			// Eight codes at a time while none is an escape (no 0xff byte).
			w := le.Uint64(src[i : i+8])
			if x := ^w; (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
				n += int(lens[byte(w)]) + int(lens[byte(w>>8)]) + int(lens[byte(w>>16)]) + int(lens[byte(w>>24)]) +
					int(lens[byte(w>>32)]) + int(lens[byte(w>>40)]) + int(lens[byte(w>>48)]) + int(lens[byte(w>>56)])
				i += 8
				continue
			}
		}
		c := src[i]
		i++
		if c == fsstEscape {
			if i >= len(src) {
				return 0, errf("fsst: escape at the end of a value")
			}
			i++
			n++
			continue
		}
		n += int(lens[c])
	}
	return n, nil
}

// checkFSSTValues reports a value of b (FSST codes, one value per
// offset range) that ends in an escape code without the literal byte it
// escapes: expansion would have to drop it or fail. Only values holding an
// escape byte at all are walked code by code; the search for one is
// bytes.IndexByte's.
func checkFSSTValues(b *block) error {
	data, offs := b.data, b.offsets
	if len(offs) < b.n+1 {
		return errf("fsst: %d offsets for %d values", len(offs), b.n)
	}
	prev := int64(0)
	if b.n > 0 {
		prev = offs[0]
	}
	for i := 1; i <= b.n; i++ {
		if offs[i] < prev || offs[i] > int64(len(data)) {
			return errf("fsst: value %d has offsets %d..%d of %d bytes", i-1, prev, offs[i], len(data))
		}
		prev = offs[i]
	}
	if b.n == 0 {
		return nil
	}
	i := 0 // the value holding position pos
	for pos := offs[0]; pos < offs[b.n]; {
		k := bytes.IndexByte(data[pos:offs[b.n]], fsstEscape)
		if k < 0 {
			return nil
		}
		at := pos + int64(k)
		for offs[i+1] <= at {
			i++
		}
		j, end := offs[i], offs[i+1]
		for j < end {
			if data[j] == fsstEscape {
				j++
			}
			j++
		}
		if j > end {
			return errf("fsst: value %d ends in an escape without its byte", i)
		}
		pos = end
	}
	return nil
}

// expand decodes src (already checked by expandedLen) into out from pos and
// returns the new position. A symbol is stored as one 8-byte word and the
// cursor advanced by its length; within 8 bytes of the end of out the
// bytes are written one by one, so out needs no slack.
func (t *fsstTable) expand(out []byte, pos int, src []byte) int {
	sym, lens := &t.sym, &t.n
	fast := len(out) - 8
	i := 0
	for i < len(src) {
		c := src[i]
		i++
		if c == fsstEscape {
			if i >= len(src) {
				return pos
			}
			out[pos] = src[i]
			pos++
			i++
			continue
		}
		if pos <= fast {
			le.PutUint64(out[pos:pos+8], sym[c])
			pos += int(lens[c])
			continue
		}
		s, l := sym[c], int(lens[c])
		for k := 0; k < l; k++ {
			out[pos] = byte(s >> (8 * k))
			pos++
		}
	}
	return pos
}

// unfsstBlocks decodes FSST-compressed variable-width blocks (the chunks
// of one page, in order) into one block: a first pass takes every value's
// decoded length from the table and sets the offsets, so the output is
// allocated once at its exact size; the second expands each block's bytes
// in one run.
func unfsstBlocks(table []byte, ins []*block) (*block, error) {
	return unfsstBlocksInto(table, ins, nil)
}

// unfsstBlocksInto is unfsstBlocks with the output's buffers from rb.
func unfsstBlocksInto(table []byte, ins []*block, rb *decodeBufs) (*block, error) {
	t, err := parseFSST(table)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, in := range ins {
		if !in.isVar {
			return nil, errf("fsst over a fixed-width block")
		}
		n += in.n
	}
	if t.raw && len(ins) > 0 {
		return concatBlocks(ins, DataType{})
	}
	out := &block{n: n, isVar: true, offsets: rb.int64s(n + 1)}
	out.offsets[0] = 0
	var total int64
	at := 1
	for _, in := range ins {
		if len(in.offsets) != in.n+1 {
			return nil, errf("fsst block of %d values has %d offsets", in.n, len(in.offsets))
		}
		for i := 0; i < in.n; i++ {
			lo, hi := in.offsets[i], in.offsets[i+1]
			if lo < 0 || hi < lo || hi > int64(len(in.data)) {
				return nil, errf("fsst value %d outside its chunk", i)
			}
			l, err := t.expandedLen(in.data[lo:hi])
			if err != nil {
				return nil, err
			}
			total += int64(l)
			out.offsets[at] = total
			at++
		}
	}
	out.data = rb.bytes(int(total))
	pos := 0
	for _, in := range ins {
		if in.n == 0 {
			continue
		}
		// Values are contiguous and each ends on a whole code (checked
		// above), so a block expands as one run.
		pos = t.expand(out.data, pos, in.data[in.offsets[0]:in.offsets[in.n]])
	}
	if int64(pos) != total {
		return nil, errf("fsst decoded %d bytes, want %d", pos, total)
	}
	return out, nil
}
