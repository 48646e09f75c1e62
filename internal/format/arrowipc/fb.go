package arrowipc

import (
	"encoding/binary"
	"fmt"
	"math"
)

// fbuf reads a FlatBuffers buffer. Every access is bounds-checked; the first
// failure is kept in err and later reads return zero values, so parsing code
// stays linear and checks err once per message instead of after every field.
type fbuf struct {
	b   []byte
	err error
	// tables counts the tables opened so far; a hostile buffer can make a
	// DAG of shared subtables whose expansion is exponential, so parsing
	// stops once more tables were opened than the buffer could hold.
	tables int
}

func (f *fbuf) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("arrowipc: flatbuffer: "+format, args...)
	}
}

func (f *fbuf) in(p, n int) bool {
	if f.err != nil {
		return false
	}
	if p < 0 || n < 0 || p > len(f.b)-n {
		f.fail("offset %d+%d outside a %d-byte buffer", p, n, len(f.b))
		return false
	}
	return true
}

func (f *fbuf) u8(p int) uint8 {
	if !f.in(p, 1) {
		return 0
	}
	return f.b[p]
}

func (f *fbuf) u16(p int) uint16 {
	if !f.in(p, 2) {
		return 0
	}
	return binary.LittleEndian.Uint16(f.b[p:])
}

func (f *fbuf) u32(p int) uint32 {
	if !f.in(p, 4) {
		return 0
	}
	return binary.LittleEndian.Uint32(f.b[p:])
}

func (f *fbuf) u64(p int) uint64 {
	if !f.in(p, 8) {
		return 0
	}
	return binary.LittleEndian.Uint64(f.b[p:])
}

// tbl is a table located in a buffer: pos is the table start, vt its vtable.
type tbl struct {
	f    *fbuf
	pos  int
	vt   int
	vlen int
}

// table opens the table at p. A failed open yields a table whose fields are
// all absent, with f.err set.
func (f *fbuf) table(p int) tbl {
	f.tables++
	if f.tables > len(f.b)/4+1 {
		f.fail("more tables than a %d-byte buffer can hold", len(f.b))
	}
	soff := int64(int32(f.u32(p)))
	vt := int64(p) - soff
	if f.err != nil {
		return tbl{f: f}
	}
	if vt < 0 || vt > int64(len(f.b)) {
		f.fail("vtable offset %d outside the buffer", vt)
		return tbl{f: f}
	}
	vlen := int(f.u16(int(vt)))
	if vlen < 4 || vlen%2 != 0 || !f.in(int(vt), vlen) {
		f.fail("bad vtable length %d", vlen)
		return tbl{f: f}
	}
	return tbl{f: f, pos: p, vt: int(vt), vlen: vlen}
}

// root opens the root table of the buffer.
func (f *fbuf) root() tbl {
	return f.table(int(f.u32(0)))
}

// field returns the absolute position of slot's value, or -1 when absent.
func (t tbl) field(slot int) int {
	o := 4 + 2*slot
	if t.vlen == 0 || o+2 > t.vlen {
		return -1
	}
	v := int(t.f.u16(t.vt + o))
	if v == 0 {
		return -1
	}
	return t.pos + v
}

func (t tbl) u8(slot int, def uint8) uint8 {
	if p := t.field(slot); p >= 0 {
		return t.f.u8(p)
	}
	return def
}

func (t tbl) boolean(slot int) bool { return t.u8(slot, 0) != 0 }

func (t tbl) i16(slot int, def int16) int16 {
	if p := t.field(slot); p >= 0 {
		return int16(t.f.u16(p))
	}
	return def
}

func (t tbl) i32(slot int, def int32) int32 {
	if p := t.field(slot); p >= 0 {
		return int32(t.f.u32(p))
	}
	return def
}

func (t tbl) i64(slot int, def int64) int64 {
	if p := t.field(slot); p >= 0 {
		return int64(t.f.u64(p))
	}
	return def
}

// ref follows the uoffset stored in slot; -1 when absent.
func (t tbl) ref(slot int) int {
	p := t.field(slot)
	if p < 0 {
		return -1
	}
	o := t.f.u32(p)
	if t.f.err != nil {
		return -1
	}
	if uint64(p)+uint64(o) > uint64(len(t.f.b)) {
		t.f.fail("reference %d+%d outside the buffer", p, o)
		return -1
	}
	return p + int(o)
}

// sub opens the table referenced by slot.
func (t tbl) sub(slot int) (tbl, bool) {
	p := t.ref(slot)
	if p < 0 {
		return tbl{f: t.f}, false
	}
	s := t.f.table(p)
	return s, t.f.err == nil
}

// vec returns the start and length of the vector in slot whose elements are
// elem bytes wide; n is 0 when absent.
func (t tbl) vec(slot, elem int) (start, n int) {
	p := t.ref(slot)
	if p < 0 {
		return 0, 0
	}
	l := t.f.u32(p)
	if t.f.err != nil {
		return 0, 0
	}
	if uint64(l)*uint64(elem) > uint64(len(t.f.b)) || !t.f.in(p+4, int(l)*elem) {
		t.f.fail("vector of %d×%d bytes outside the buffer", l, elem)
		return 0, 0
	}
	return p + 4, int(l)
}

// vecTable opens element i of a vector of tables starting at start.
func (t tbl) vecTable(start, i int) tbl {
	p := start + 4*i
	return t.f.table(p + int(t.f.u32(p)))
}

func (t tbl) str(slot int) string {
	start, n := t.vec(slot, 1)
	if n == 0 {
		return ""
	}
	return string(t.f.b[start : start+n])
}

// fbw builds a FlatBuffers buffer front to back: a table is written before
// the objects it references, whose uoffsets (always forward) are patched in
// once they are placed. This is simpler than the usual back-to-front builder
// and gives the same wire format.
type fbw struct{ b []byte }

// fbObj is something that can be placed in the buffer.
type fbObj interface {
	place(w *fbw) int // writes the object and returns its position
}

// fbVal is one table field: a scalar of size bytes, or a reference.
type fbVal struct {
	slot int
	size int // 1, 2, 4 or 8 for scalars
	bits uint64
	ref  fbObj
}

type fbTable []fbVal

func sc8(slot int, v uint8) fbVal   { return fbVal{slot: slot, size: 1, bits: uint64(v)} }
func sc16(slot int, v int16) fbVal  { return fbVal{slot: slot, size: 2, bits: uint64(uint16(v))} }
func sc32(slot int, v int32) fbVal  { return fbVal{slot: slot, size: 4, bits: uint64(uint32(v))} }
func sc64(slot int, v int64) fbVal  { return fbVal{slot: slot, size: 8, bits: uint64(v)} }
func rf(slot int, o fbObj) fbVal    { return fbVal{slot: slot, size: 4, ref: o} }
func scBool(slot int, v bool) fbVal { return sc8(slot, b2u8(v)) }

func b2u8(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

func (w *fbw) pad(align int) {
	for len(w.b)%align != 0 {
		w.b = append(w.b, 0)
	}
}

func (w *fbw) putU32(p int, v uint32) { binary.LittleEndian.PutUint32(w.b[p:], v) }

func (t fbTable) place(w *fbw) int {
	slots := 0
	for _, f := range t {
		slots = max(slots, f.slot+1)
	}
	w.pad(2)
	v := len(w.b)
	vs := 4 + 2*slots
	tp := v + vs
	for tp%4 != 0 {
		tp++
	}
	// Lay the fields out biggest first, each aligned absolutely.
	offs := make([]int, len(t))
	p := tp + 4
	for _, size := range [...]int{8, 4, 2, 1} {
		for i, f := range t {
			if f.size != size {
				continue
			}
			for p%size != 0 {
				p++
			}
			offs[i] = p
			p += size
		}
	}
	end := p
	w.b = append(w.b, make([]byte, end-v)...)
	binary.LittleEndian.PutUint16(w.b[v:], uint16(vs))
	binary.LittleEndian.PutUint16(w.b[v+2:], uint16(end-tp))
	binary.LittleEndian.PutUint32(w.b[tp:], uint32(tp-v))
	for i, f := range t {
		binary.LittleEndian.PutUint16(w.b[v+4+2*f.slot:], uint16(offs[i]-tp))
		q := w.b[offs[i]:]
		switch f.size {
		case 1:
			q[0] = byte(f.bits)
		case 2:
			binary.LittleEndian.PutUint16(q, uint16(f.bits))
		case 4:
			binary.LittleEndian.PutUint32(q, uint32(f.bits))
		case 8:
			binary.LittleEndian.PutUint64(q, f.bits)
		}
	}
	for i, f := range t {
		if f.ref != nil {
			c := f.ref.place(w)
			w.putU32(offs[i], uint32(c-offs[i]))
		}
	}
	return tp
}

type fbStr string

func (s fbStr) place(w *fbw) int {
	w.pad(4)
	p := len(w.b)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(s)))
	w.b = append(w.b, s...)
	w.b = append(w.b, 0)
	return p
}

// fbTables is a vector of references to tables (or strings).
type fbTables []fbObj

func (v fbTables) place(w *fbw) int {
	w.pad(4)
	p := len(w.b)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(v)))
	slots := len(w.b)
	w.b = append(w.b, make([]byte, 4*len(v))...)
	for i, o := range v {
		c := o.place(w)
		w.putU32(slots+4*i, uint32(c-(slots+4*i)))
	}
	return p
}

// fbStructs is a vector of 8-byte-aligned structs given as raw bytes.
type fbStructs struct {
	n    int
	data []byte
}

func (v fbStructs) place(w *fbw) int {
	w.pad(4)
	if len(w.b)%8 == 0 {
		w.b = append(w.b, 0, 0, 0, 0)
	}
	p := len(w.b)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(v.n))
	w.b = append(w.b, v.data...)
	return p
}

// finish writes root as the buffer's root table and returns the bytes.
func (w *fbw) finish(root fbObj) []byte {
	w.b = append(w.b[:0], 0, 0, 0, 0)
	p := root.place(w)
	w.putU32(0, uint32(p))
	return w.b
}

var _ = math.MaxInt32
