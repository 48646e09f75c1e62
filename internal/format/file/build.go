package file

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
)

// flatKind reports whether arrays of t have no children: fixed width,
// bool, strings and binaries. Those are what WriteRows appends into
// reused buffers and NextView hands out without copying.
func flatKind(t DataType) bool {
	switch t.Kind {
	case KindNull, KindList, KindLargeList, KindFixedSizeList, KindStruct:
		return false
	}
	return t.Kind == KindBool || t.IsVariable() || t.ByteWidth() > 0
}

// fslFlatItem reports whether t, with item field it, is a fixed-size
// list of a fixed-width type (a vector): its rows are d*width bytes each
// in the item array, so it is copied, viewed and written as a fixed-width
// column of that row width, with no per-item work.
func fslFlatItem(t DataType, it *Field) bool {
	return t.Kind == KindFixedSizeList && t.Size > 0 && it != nil && len(it.Children) == 0 &&
		it.Type.Kind != KindBool && flatKind(it.Type) && !it.Type.IsVariable()
}

// fslFlat is fslFlatItem of an array: a fixed-size list whose one child
// is a flat fixed-width array with no null item (null lists are fine:
// the list's own validity is kept per row).
func (a *Array) fslFlat() bool {
	if a.Type.Kind != KindFixedSizeList || a.Type.Size <= 0 || len(a.Children) != 1 {
		return false
	}
	c := a.Children[0]
	if len(c.Children) > 0 || c.fsst != nil || c.Type.Kind == KindBool || !flatKind(c.Type) || c.Type.IsVariable() {
		return false
	}
	return c.Valid == nil || allSet(c.Valid, c.Len)
}

// allSet reports whether the first n bits of b are all 1.
func allSet(b []byte, n int) bool {
	full := n >> 3
	for _, x := range b[:full] {
		if x != 0xff {
			return false
		}
	}
	for k := full << 3; k < n; k++ {
		if !getBit(b, k) {
			return false
		}
	}
	return true
}

// view is rows [from, to) of a flat array sharing a's buffers where it
// can: fixed-width values and string bytes are not copied, the offsets of
// a string view start where row from starts (not at 0), and a bitmap is
// copied only when from is not on a byte boundary (bits past the view's
// length may be set). A fixed-size list of a flat type is viewed the same
// way (its items are rows [from*d, to*d) of the child). Arrays of other
// types are copied (Slice).
func (a *Array) view(from, to int) *Array {
	if a.Type.Kind == KindFixedSizeList && a.Type.Size > 0 && len(a.Children) == 1 {
		if c := a.Children[0]; len(c.Children) == 0 && c.fsst == nil && flatKind(c.Type) {
			n, d := to-from, a.Type.Size
			out := &Array{Type: a.Type, Name: a.Name, Len: n}
			if a.Valid != nil {
				out.Valid = bitsView(a.Valid, from, n)
			}
			out.Children = []*Array{c.view(from*d, to*d)}
			return out
		}
	}
	if !flatKind(a.Type) || len(a.Children) > 0 {
		return a.Slice(from, to)
	}
	n := to - from
	out := &Array{Type: a.Type, Name: a.Name, Len: n}
	if a.Valid != nil {
		out.Valid = bitsView(a.Valid, from, n)
	}
	switch {
	case a.Type.Kind == KindBool:
		out.Values = bitsView(a.Values, from, n)
	case a.Type.IsVariable():
		out.Offsets = a.Offsets[from : to+1]
		out.Values = a.Values
		for k, sg := range a.fsst {
			if a.segEnd(k) > from && sg.row < to || sg.row == from {
				sg.row = max(0, sg.row-from)
				out.fsst = append(out.fsst, sg)
			}
		}
	default:
		w := a.Type.ByteWidth()
		out.Values = a.Values[from*w : to*w]
	}
	return out
}

func bitsView(b []byte, from, n int) []byte {
	if from&7 == 0 {
		return b[from>>3 : from>>3+bitmapLen(n)]
	}
	out := make([]byte, bitmapLen(n))
	copyBits(out, 0, b, from, n)
	return out
}

// NextView is Next without copying what it need not: the batch's flat
// columns (fixed width, bool, strings and binaries) are views of the
// stream's decoded pages, valid until the next call, and a string
// column's offsets need not start at 0. Pass such a batch to
// Writer.WriteRows, which copies what it keeps; Writer.Write keeps the
// arrays it is given and must not get one.
func (s *Stream) NextView() (*Batch, error) {
	return s.next1(true)
}

// colBuilder accumulates the rows of a flat top-level field for its next
// page in buffers kept across pages, so a writer fed by WriteRows
// allocates a page's worth of memory once, not per batch and per page.
type colBuilder struct {
	t    DataType
	name string
	// item is the item field when t is a fixed-size list of a
	// fixed-width type (fslFlatItem): the builder then holds rows of
	// t.Size items, their values back to back, and no list-level work.
	item   *Field
	n      int
	nulls  int
	valid  []byte // bitmap of n rows once any input had one
	values []byte // alloc'd (8-byte aligned)
	nv     int    // bytes of values used (variable types)
	offs   []int64
	hint   int // the writer's page bytes
	// fsst: the symbol table the rows' values are compressed with (fsstT
	// parsed), or nil.
	fsst  []byte
	fsstT *fsstTable
}

// valueBufs and offsetBufs hold the buffers of builders whose writer was
// closed, so a compaction writing file after file reuses a page's worth
// of memory per column instead of allocating (and zeroing) it per file.
var (
	valueBufs  sync.Pool // *[]byte from alloc
	offsetBufs sync.Pool // *[]int64
)

// grow makes room for at least need bytes of values: the first time a
// page's worth (hint) plus slack for the batch that crosses it, reused
// from an earlier writer when one was released.
func (c *colBuilder) grow(need int) {
	if need <= len(c.values) {
		return
	}
	if len(c.values) == 0 {
		want := max(need, c.hint/8)
		if v, ok := valueBufs.Get().(*[]byte); ok && cap(*v) >= want {
			c.values = (*v)[:cap(*v)]
			if need <= len(c.values) {
				return
			}
		} else {
			c.values = alloc(want)
			return
		}
	}
	// A page is flushed once it passes hint bytes, so growing straight to
	// a page plus a batch's slack saves the copies of doubling up to it.
	size := 2 * len(c.values)
	if len(c.values) < c.hint {
		size = c.hint + c.hint/4
	}
	nb := alloc(max(need, size))
	copy(nb, c.values[:c.used()])
	c.values = nb
}

// used is the bytes of values holding rows.
func (c *colBuilder) used() int {
	switch {
	case c.t.Kind == KindBool:
		return bitmapLen(c.n)
	case c.t.IsVariable():
		return c.nv
	}
	return c.n * c.rowWidth()
}

// rowWidth is the bytes of one row of a fixed-width builder: the type's
// width, or a fixed-size list's items' together.
func (c *colBuilder) rowWidth() int {
	if c.item != nil {
		return c.t.Size * c.item.Type.ByteWidth()
	}
	return c.t.ByteWidth()
}

// takes reports whether a's rows can be appended to the builder:
// always, but for a fixed-size list, which must have no null item.
func (c *colBuilder) takes(a *Array) bool {
	return c.item == nil || a.fslFlat()
}

// release hands the builder's buffers to the next writer.
func (c *colBuilder) release() {
	if len(c.values) > 0 {
		v := c.values
		valueBufs.Put(&v)
	}
	if cap(c.offs) > 0 {
		o := c.offs[:0]
		offsetBufs.Put(&o)
	}
	*c = colBuilder{t: c.t, name: c.name, item: c.item, hint: c.hint}
}

// growBits makes a bitmap hold n bits (new bytes zeroed).
func growBits(b []byte, n int) []byte {
	k := bitmapLen(n)
	if k <= len(b) {
		return b
	}
	if k <= cap(b) {
		old := len(b)
		b = b[:k]
		clear(b[old:])
		return b
	}
	nb := make([]byte, k, max(k, 2*cap(b), 512))
	copy(nb, b)
	return nb
}

func putBit(b []byte, i int, v bool) {
	m := byte(1) << (i & 7)
	if v {
		b[i>>3] |= m
	} else {
		b[i>>3] &^= m
	}
}

// appendRows appends rows of a (ascending or not; nil: all of a) and
// returns the bytes added, as arrayBytes counts them.
func (c *colBuilder) appendRows(a *Array, rows []int) int {
	n := a.Len
	if rows != nil {
		n = len(rows)
	}
	if n == 0 {
		return 0
	}
	at := func(i int) int {
		if rows == nil {
			return i
		}
		return rows[i]
	}
	base := c.n
	if a.Valid != nil || c.valid != nil {
		if c.valid == nil {
			c.valid = growBits(nil, base+n)
			for i := 0; i < base; i++ {
				setBit(c.valid, i)
			}
		}
		c.valid = growBits(c.valid, base+n)
		for i := 0; i < n; i++ {
			v := a.Valid == nil || getBit(a.Valid, at(i))
			putBit(c.valid, base+i, v)
			if !v {
				c.nulls++
			}
		}
	}
	added := 0
	switch {
	case a.Type.Kind == KindBool:
		c.grow(bitmapLen(base + n))
		for i := 0; i < n; i++ {
			putBit(c.values, base+i, getBit(a.Values, at(i)))
		}
		added = bitmapLen(n)
	case a.Type.IsVariable():
		if len(c.offs) == 0 {
			if c.offs == nil {
				if o, ok := offsetBufs.Get().(*[]int64); ok {
					c.offs = *o
				} else {
					// Strings of 8 bytes fill a page at this many rows.
					c.offs = make([]int64, 0, c.hint/16+1)
				}
			}
			c.offs = append(c.offs, 0)
		}
		total := 0
		if rows == nil {
			total = int(a.Offsets[a.Len] - a.Offsets[0])
		} else {
			for _, r := range rows {
				total += int(a.Offsets[r+1] - a.Offsets[r])
			}
		}
		c.grow(c.nv + total)
		// Room for the rows' offsets, written in place below.
		c.offs = slices.Grow(c.offs, n)
		if rows == nil {
			o0 := a.Offsets[0]
			copy(c.values[c.nv:], a.Values[o0:a.Offsets[a.Len]])
			d := int64(c.nv) - o0
			for _, o := range a.Offsets[1 : a.Len+1] {
				c.offs = append(c.offs, o+d)
			}
			c.nv += total
		} else {
			// Runs of adjacent rows are copied with one copy each (a
			// compaction keeps most rows, in order).
			for i := 0; i < len(rows); {
				j := i + 1
				for j < len(rows) && rows[j] == rows[j-1]+1 {
					j++
				}
				r0, r1 := rows[i], rows[j-1]+1
				s := a.Offsets[r0]
				d := int64(c.nv) - s
				c.nv += copy(c.values[c.nv:], a.Values[s:a.Offsets[r1]])
				at := len(c.offs)
				c.offs = c.offs[:at+r1-r0]
				dst := c.offs[at:]
				for k, o := range a.Offsets[r0+1 : r1+1] {
					dst[k] = o + d
				}
				i = j
			}
		}
		added = total + 8*n
	case c.item != nil:
		// A vector's rows: runs of adjacent rows (a compaction keeps most
		// rows, in order) are copied with one copy each.
		w := c.rowWidth()
		src := a.Children[0].Values
		c.grow((base + n) * w)
		dst := c.values[base*w : (base+n)*w]
		if rows == nil {
			copy(dst, src[:n*w])
		} else {
			at := 0
			for i := 0; i < len(rows); {
				j := i + 1
				for j < len(rows) && rows[j] == rows[j-1]+1 {
					j++
				}
				at += copy(dst[at:], src[rows[i]*w:(rows[j-1]+1)*w])
				i = j
			}
		}
		added = n * w
	default:
		w := a.Type.ByteWidth()
		c.grow((base + n) * w)
		dst := c.values[base*w : (base+n)*w]
		switch {
		case rows == nil:
			copy(dst, a.Values[:n*w])
		case w == 8:
			d, s := viewAs[uint64](dst, n), viewAs[uint64](a.Values, a.Len)
			for i, r := range rows {
				d[i] = s[r]
			}
		case w == 4:
			d, s := viewAs[uint32](dst, n), viewAs[uint32](a.Values, a.Len)
			for i, r := range rows {
				d[i] = s[r]
			}
		default:
			for i, r := range rows {
				copy(dst[i*w:(i+1)*w], a.Values[r*w:(r+1)*w])
			}
		}
		added = n * w
	}
	c.n += n
	if a.Valid != nil || c.valid != nil {
		added += bitmapLen(n)
	}
	return added
}

// array is the accumulated rows, sharing the builder's buffers (valid
// until reset).
func (c *colBuilder) array() *Array {
	out := &Array{Type: c.t, Name: c.name, Len: c.n}
	if c.nulls > 0 {
		out.Valid = c.valid[:bitmapLen(c.n)]
	}
	switch {
	case c.t.Kind == KindBool:
		out.Values = c.values[:bitmapLen(c.n)]
	case c.t.IsVariable():
		out.Offsets = c.offs[:c.n+1]
		out.Values = c.values[:c.nv]
		if c.fsst != nil {
			out.fsst = []fsstSeg{{tab: c.fsst, t: c.fsstT}}
		}
	case c.item != nil:
		out.Children = []*Array{{Type: c.item.Type, Name: c.item.Name, Len: c.n * c.t.Size, Values: c.values[:c.n*c.rowWidth()]}}
	default:
		out.Values = c.values[:c.n*c.t.ByteWidth()]
	}
	return out
}

// reset empties the builder and keeps its buffers.
func (c *colBuilder) reset() {
	c.n, c.nulls, c.nv = 0, 0, 0
	c.fsst, c.fsstT = nil, nil
	if c.valid != nil {
		c.valid = c.valid[:0]
	}
	c.offs = c.offs[:0]
}

// WriteRows adds the given rows of b (row indices into b, in the order to
// write them; nil: all of b's rows), copying them: b may be reused or be
// a NextView batch afterwards. A flat top-level column (fixed width, bool,
// string, binary), or a fixed-size list of a fixed-width type without
// null items (a vector), is appended to buffers the writer reuses from
// page to page; other columns are gathered (Array.Take) and buffered as
// Write does.
func (w *Writer) WriteRows(b *Batch, rows []int) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("lance file: write after close")
	}
	if len(b.Columns) != len(w.schema.Fields) {
		return fmt.Errorf("lance file: batch has %d columns, schema %d", len(b.Columns), len(w.schema.Fields))
	}
	n := b.NumRows
	if rows != nil {
		n = len(rows)
		for _, r := range rows {
			if r < 0 || r >= b.NumRows {
				return fmt.Errorf("lance file: row %d of a batch of %d", r, b.NumRows)
			}
		}
	}
	for i, a := range b.Columns {
		if a == nil {
			return fmt.Errorf("lance file: column %d is nil", i)
		}
		if a.Len != b.NumRows {
			return fmt.Errorf("lance file: column %q has %d rows, batch %d", w.schema.Fields[i].Name, a.Len, b.NumRows)
		}
		if err := checkArray(w.schema.Fields[i], a, 0); err != nil {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	for i, a := range b.Columns {
		f := w.schema.Fields[i]
		p := w.pending[i]
		if p.rows == 0 {
			p.first = w.rows
		}
		vec := fslFlatItem(f.Type, firstChild(f))
		if vec && !a.fslFlat() && p.build != nil && p.build.n > 0 {
			// Null items: this batch takes the general path, after the
			// builder's rows.
			if err := w.flushField(i); err != nil {
				w.err = err
				return err
			}
			p.first = w.rows
		}
		if (!flatKind(f.Type) || len(f.Children) > 0) && !(vec && a.fslFlat()) {
			if rows != nil {
				a = a.Take(rows)
			} else {
				a = a.Slice(0, a.Len)
			}
			p.arrs = append(p.arrs, a)
			p.bytes += arrayBytes(a)
			p.rows += n
		} else {
			if p.build == nil {
				p.build = &colBuilder{t: f.Type, name: f.Name, hint: w.fieldPageBytes(f)}
				if vec {
					p.build.item = f.Children[0]
				}
			}
			if vec && slices.ContainsFunc(p.arrs, func(x *Array) bool { return !x.fslFlat() }) {
				// Rows buffered by Write with null items go out as their
				// own page first.
				if err := w.flushField(i); err != nil {
					w.err = err
					return err
				}
				p.first = w.rows
			}
			if a.fsst != nil || p.build.fsst != nil {
				if err := w.appendFSST(i, a, rows); err != nil {
					w.err = err
					return err
				}
			} else {
				// Rows buffered by Write go first, in the builder.
				for _, x := range p.arrs {
					p.build.appendRows(x, nil)
				}
				p.arrs = p.arrs[:0]
				p.bytes += p.build.appendRows(a, rows)
				p.rows += n
			}
		}
		if p.bytes >= w.fieldPageBytes(f) {
			if err := w.flushField(i); err != nil {
				w.err = err
				return err
			}
		}
	}
	w.rows += uint64(n)
	return nil
}

// appendFSST is WriteRows' append of a flat string or binary column when
// the rows or the builder's are FSST-compressed: a page holds rows of one
// symbol table (or none), so the buffered page is written out whenever
// the next rows' table differs, and the rows are appended as they are.
// Rows not in ascending order across segments are expanded instead.
func (w *Writer) appendFSST(i int, a *Array, rows []int) error {
	p := w.pending[i]
	type part struct {
		a    *Array
		rows []int
		seg  *fsstSeg
	}
	var parts []part
	switch {
	case a.fsst == nil:
		parts = []part{{a: a, rows: rows}}
	case rows == nil:
		for k := range a.fsst {
			parts = append(parts, part{a: a.view(a.fsst[k].row, a.segEnd(k)), seg: &a.fsst[k]})
		}
	case len(a.fsst) == 1:
		parts = []part{{a: a, rows: rows, seg: &a.fsst[0]}}
	case slices.IsSorted(rows):
		lo := 0
		for k := range a.fsst {
			end := a.segEnd(k)
			hi := lo
			for hi < len(rows) && rows[hi] < end {
				hi++
			}
			if hi > lo {
				parts = append(parts, part{a: a, rows: rows[lo:hi], seg: &a.fsst[k]})
			}
			lo = hi
		}
	default:
		parts = []part{{a: a.expandFSST(), rows: rows}}
	}
	done := uint64(0)
	for _, pt := range parts {
		m := pt.a.Len
		if pt.rows != nil {
			m = len(pt.rows)
		}
		if m == 0 {
			continue
		}
		var tab []byte
		var t *fsstTable
		if pt.seg != nil {
			tab, t = pt.seg.tab, pt.seg.t
		}
		if p.rows > 0 && (len(p.arrs) > 0 || p.build.fsstT != t && !bytes.Equal(p.build.fsst, tab)) {
			if err := w.flushField(i); err != nil {
				return err
			}
		}
		if p.rows == 0 {
			p.first = w.rows + done
		}
		for _, x := range p.arrs {
			p.build.appendRows(x, nil)
		}
		p.arrs = p.arrs[:0]
		if p.build.n == 0 {
			p.build.fsst, p.build.fsstT = tab, t
		}
		p.bytes += p.build.appendRows(pt.a, pt.rows)
		p.rows += m
		done += uint64(m)
	}
	return nil
}

// encScratch holds the buffers a writer encodes its pages in: the chunk
// buffer and chunk sizes of a mini-block page, one chunk's values, and
// FSST's compressed copy of a page with its encoder. Pages are written
// before the next is encoded, so one set serves every page of a writer,
// and through scratchPool the files written after it.
type encScratch struct {
	chunks, meta, vals []byte
	fsst               []byte
	fsstOffs           []int64
	fsstEnc            *fsstEncoder
	fsstCounts         fsstCounts
}

var scratchPool sync.Pool // *encScratch

// scratch is the writer's encoding buffers, taken from the pool on first
// use and returned by Close.
func (w *Writer) scratch() *encScratch {
	if w.sc == nil {
		if sc, ok := scratchPool.Get().(*encScratch); ok {
			w.sc = sc
		} else {
			w.sc = &encScratch{}
		}
	}
	return w.sc
}

func (w *Writer) releaseScratch() {
	if w.sc != nil {
		scratchPool.Put(w.sc)
		w.sc = nil
	}
}

// firstChild is f's first child field, or nil.
func firstChild(f *Field) *Field {
	if len(f.Children) == 0 {
		return nil
	}
	return f.Children[0]
}
