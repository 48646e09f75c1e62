package arrowipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ReadOptions tunes decoding. The zero value is sensible.
type ReadOptions struct {
	// MaxDecompressed caps the bytes all compressed buffers of one input may
	// expand to. 0 means DefaultRatio × the input size (at least 1 MiB), so
	// a small hostile input cannot make the reader allocate gigabytes.
	MaxDecompressed int64
}

// DefaultRatio is the default expansion budget per input byte. Real column
// data rarely compresses better than 100×; a sorted run of row offsets, the
// best case in Lance deletion files, is around 50×.
const DefaultRatio = 1024

func (o *ReadOptions) budget(n int) int64 {
	if o != nil && o.MaxDecompressed > 0 {
		return o.MaxDecompressed
	}
	return max(int64(n)*DefaultRatio, 1<<20)
}

// Stream is a decoded IPC stream or file.
type Stream struct {
	Schema  *Schema
	Batches []*Batch
}

// ReadStream decodes a whole IPC stream: a schema message, then dictionary
// and record batch messages, up to the end-of-stream marker or the end of
// the input. A stream with a schema and no batches (a MemWAL fence sentinel)
// is valid and yields no batches.
func ReadStream(data []byte, opt *ReadOptions) (*Stream, error) {
	d := newDecoder(data, opt)
	msg, body, n, err := d.next(0)
	if err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, errors.New("arrowipc: empty stream")
	}
	if msg.kind != hdrSchema {
		return nil, fmt.Errorf("arrowipc: stream starts with message type %d, not a schema", msg.kind)
	}
	_ = body
	s, err := parseSchema(msg.t)
	if err != nil {
		return nil, err
	}
	d.setSchema(s)
	out := &Stream{Schema: s}
	for off := n; off < len(data); {
		msg, body, n, err := d.next(off)
		if err != nil {
			return nil, err
		}
		if msg == nil {
			break
		}
		off += n
		b, err := d.handle(msg, body)
		if err != nil {
			return nil, err
		}
		if b != nil {
			out.Batches = append(out.Batches, b)
		}
	}
	return out, nil
}

var fileMagic = []byte("ARROW1")

// ReadFile decodes an IPC file through its footer: the footer's schema, then
// every dictionary block and every record batch block in footer order.
func ReadFile(data []byte, opt *ReadOptions) (*Stream, error) {
	if len(data) < 6+2+4+6 || !bytes.Equal(data[:6], fileMagic) || !bytes.Equal(data[len(data)-6:], fileMagic) {
		return nil, errors.New("arrowipc: not an Arrow IPC file (missing ARROW1 magic)")
	}
	flen := int64(int32(binary.LittleEndian.Uint32(data[len(data)-10:])))
	fend := int64(len(data) - 10)
	if flen <= 0 || flen > fend-8 {
		return nil, fmt.Errorf("arrowipc: footer length %d does not fit a %d-byte file", flen, len(data))
	}
	f := &fbuf{b: data[fend-flen : fend]}
	ft := f.root()
	st, ok := ft.sub(1)
	if f.err != nil {
		return nil, f.err
	}
	if !ok {
		return nil, errors.New("arrowipc: file footer has no schema")
	}
	s, err := parseSchema(st)
	if err != nil {
		return nil, err
	}
	d := newDecoder(data[:fend-flen], opt)
	d.setSchema(s)
	out := &Stream{Schema: s}
	for _, slot := range []int{2, 3} {
		start, n := ft.vec(slot, 24)
		for i := 0; i < n; i++ {
			p := start + 24*i
			off, mlen, blen := int64(f.u64(p)), int64(int32(f.u32(p+8))), int64(f.u64(p+16))
			if f.err != nil {
				return nil, f.err
			}
			if off < 8 || mlen <= 0 || blen < 0 || off > int64(len(d.data)) || mlen > int64(len(d.data))-off || blen > int64(len(d.data))-off-mlen {
				return nil, fmt.Errorf("arrowipc: file block %d (offset %d, %d+%d bytes) outside the file", i, off, mlen, blen)
			}
			msg, body, _, err := d.next(int(off))
			if err != nil {
				return nil, err
			}
			if msg == nil {
				return nil, fmt.Errorf("arrowipc: file block %d is an end-of-stream marker", i)
			}
			if want := uint8(hdrDictionaryBatch + (slot-2)*(hdrRecordBatch-hdrDictionaryBatch)); msg.kind != want {
				return nil, fmt.Errorf("arrowipc: file block %d holds message type %d, want %d", i, msg.kind, want)
			}
			b, err := d.handle(msg, body)
			if err != nil {
				return nil, err
			}
			if b != nil {
				out.Batches = append(out.Batches, b)
			}
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return out, nil
}

// decoder holds the state shared by the messages of one input.
type decoder struct {
	data   []byte
	budget int64
	schema *Schema
	dicts  map[int64]*Array
	// dictFields maps a dictionary id to the field whose values it holds.
	dictFields map[int64]*Field
}

func newDecoder(data []byte, opt *ReadOptions) *decoder {
	return &decoder{data: data, budget: opt.budget(len(data)), dicts: map[int64]*Array{}}
}

func (d *decoder) setSchema(s *Schema) {
	d.schema = s
	d.dictFields = map[int64]*Field{}
	var walk func(fs []Field)
	walk = func(fs []Field) {
		for i := range fs {
			if fs[i].Dict != nil {
				d.dictFields[fs[i].Dict.ID] = &fs[i]
			}
			walk(fs[i].Children)
		}
	}
	walk(s.Fields)
}

// next frames the message at off. It returns nil at an end-of-stream marker,
// and the message, its body and the bytes consumed otherwise.
func (d *decoder) next(off int) (*message, []byte, int, error) {
	data := d.data
	rest := len(data) - off
	if rest < 4 {
		if rest == 0 {
			return nil, nil, 0, nil
		}
		return nil, nil, 0, fmt.Errorf("arrowipc: %d stray bytes at offset %d", rest, off)
	}
	p := off
	mlen := int64(int32(binary.LittleEndian.Uint32(data[p:])))
	p += 4
	if mlen == -1 { // continuation marker (format 0.15 and later)
		if rest < 8 {
			return nil, nil, 0, fmt.Errorf("arrowipc: truncated message length at offset %d", off)
		}
		mlen = int64(int32(binary.LittleEndian.Uint32(data[p:])))
		p += 4
	}
	if mlen == 0 {
		return nil, nil, p - off, nil
	}
	if mlen < 0 || mlen > int64(len(data)-p) {
		return nil, nil, 0, fmt.Errorf("arrowipc: message length %d at offset %d exceeds the %d bytes left", mlen, off, len(data)-p)
	}
	m, err := parseMessage(data[p : p+int(mlen)])
	if err != nil {
		return nil, nil, 0, err
	}
	p += int(mlen)
	if m.bodyLen > int64(len(data)-p) {
		return nil, nil, 0, fmt.Errorf("arrowipc: message body of %d bytes at offset %d exceeds the %d bytes left", m.bodyLen, off, len(data)-p)
	}
	body := data[p : p+int(m.bodyLen)]
	p += int(m.bodyLen)
	return &m, body, p - off, nil
}

// handle decodes a dictionary or record batch message; it returns the batch
// for record batches and nil for dictionaries.
func (d *decoder) handle(m *message, body []byte) (*Batch, error) {
	switch m.kind {
	case hdrRecordBatch:
		rb, err := parseRecordBatch(m.t)
		if err != nil {
			return nil, err
		}
		return d.batch(rb, body, d.schema.Fields)
	case hdrDictionaryBatch:
		id := m.t.i64(0, 0)
		delta := m.t.boolean(2)
		dt, ok := m.t.sub(1)
		if m.t.f.err != nil {
			return nil, m.t.f.err
		}
		if !ok {
			return nil, fmt.Errorf("arrowipc: dictionary %d has no data", id)
		}
		f := d.dictFields[id]
		if f == nil {
			return nil, fmt.Errorf("arrowipc: dictionary %d is not used by any field", id)
		}
		if delta {
			return nil, fmt.Errorf("arrowipc: delta dictionary batches are not supported (dictionary %d)", id)
		}
		rb, err := parseRecordBatch(dt)
		if err != nil {
			return nil, err
		}
		vf := *f
		vf.Dict = nil
		b, err := d.batch(rb, body, []Field{vf})
		if err != nil {
			return nil, fmt.Errorf("arrowipc: dictionary %d: %w", id, err)
		}
		d.dicts[id] = b.Columns[0]
		return nil, nil
	case hdrSchema:
		return nil, errors.New("arrowipc: a second schema message in one stream")
	}
	return nil, fmt.Errorf("arrowipc: unsupported message type %d", m.kind)
}

// batchReader walks a record batch's nodes and buffers in schema order.
type batchReader struct {
	d     *decoder
	rb    recordBatch
	body  []byte
	ni    int
	bi    int
	codec Compression
}

func (d *decoder) batch(rb recordBatch, body []byte, fields []Field) (*Batch, error) {
	r := &batchReader{d: d, rb: rb, body: body, codec: rb.codec}
	b := &Batch{Len: int(rb.length), Columns: make([]*Array, len(fields))}
	if rb.length > int64(math.MaxInt32)*64 {
		return nil, fmt.Errorf("arrowipc: batch length %d", rb.length)
	}
	for i := range fields {
		a, err := r.array(&fields[i], 0)
		if err != nil {
			return nil, fmt.Errorf("arrowipc: column %q: %w", fields[i].Name, err)
		}
		if int64(a.Len) != rb.length {
			return nil, fmt.Errorf("arrowipc: column %q has %d rows, the batch %d", fields[i].Name, a.Len, rb.length)
		}
		b.Columns[i] = a
	}
	if r.ni != len(rb.nodes) || r.bi != len(rb.bufs) {
		return nil, fmt.Errorf("arrowipc: batch has %d nodes and %d buffers, the schema uses %d and %d", len(rb.nodes), len(rb.bufs), r.ni, r.bi)
	}
	return b, nil
}

func (r *batchReader) node() (node, error) {
	if r.ni >= len(r.rb.nodes) {
		return node{}, errors.New("fewer field nodes than fields")
	}
	n := r.rb.nodes[r.ni]
	r.ni++
	if n.length < 0 || n.nulls < 0 || n.nulls > n.length {
		return n, fmt.Errorf("field node with length %d and %d nulls", n.length, n.nulls)
	}
	// Every array but Null needs at least a bit per value of some buffer, and
	// Null arrays allocate nothing, so this only rejects absurd lengths.
	if n.length > math.MaxInt32*64 {
		return n, fmt.Errorf("field node length %d", n.length)
	}
	return n, nil
}

// buffer returns the next buffer, decompressed, checking that it holds at
// least need bytes (need < 0: no minimum is known).
func (r *batchReader) buffer(need int64) ([]byte, error) { return r.bufferUpTo(need, need) }

// bufferUpTo is buffer with a separate bound on what a compressed buffer may
// expand to (upTo+slack; upTo < 0: only the input budget applies).
func (r *batchReader) bufferUpTo(need, upTo int64) ([]byte, error) {
	if r.bi >= len(r.rb.bufs) {
		return nil, errors.New("fewer buffers than the schema needs")
	}
	b := r.rb.bufs[r.bi]
	r.bi++
	if b.offset < 0 || b.length < 0 || b.offset > int64(len(r.body)) || b.length > int64(len(r.body))-b.offset {
		return nil, fmt.Errorf("buffer %d (offset %d, %d bytes) outside the %d-byte body", r.bi-1, b.offset, b.length, len(r.body))
	}
	raw := r.body[b.offset : b.offset+b.length]
	out := raw
	if r.codec != None && len(raw) > 0 {
		var err error
		if out, err = r.decompress(raw, upTo); err != nil {
			return nil, fmt.Errorf("buffer %d: %w", r.bi-1, err)
		}
	}
	if need > 0 && int64(len(out)) < need {
		return nil, fmt.Errorf("buffer %d has %d bytes, needs %d", r.bi-1, len(out), need)
	}
	return out, nil
}

// slack is how far a decompressed buffer may exceed what its node needs:
// writers pad buffers to 8 or 64 bytes.
const slack = 64

func (r *batchReader) decompress(raw []byte, need int64) ([]byte, error) {
	if len(raw) < 8 {
		return nil, fmt.Errorf("compressed buffer of %d bytes has no length prefix", len(raw))
	}
	ul := int64(binary.LittleEndian.Uint64(raw))
	src := raw[8:]
	if ul == -1 {
		return src, nil
	}
	if ul < 0 {
		return nil, fmt.Errorf("uncompressed length %d", ul)
	}
	if need >= 0 && ul > need+slack {
		return nil, fmt.Errorf("uncompressed length %d, but the column needs %d bytes", ul, need)
	}
	if ul > r.d.budget {
		return nil, fmt.Errorf("decompressing %d more bytes exceeds the budget of %d bytes for this input", ul, r.d.budget)
	}
	r.d.budget -= ul
	switch r.codec {
	case ZSTD:
		return unzstd(src, int(ul))
	case LZ4Frame:
		return unlz4(src, int(ul))
	}
	return nil, fmt.Errorf("unknown codec %d", r.codec)
}

var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(err) // only on invalid options
	}
	return d
})

func unzstd(src []byte, n int) ([]byte, error) {
	out, err := zstdDec().DecodeAll(src, make([]byte, 0, n))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("zstd: %d bytes decompressed, the prefix says %d", len(out), n)
	}
	return out, nil
}

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

func unlz4(src []byte, n int) ([]byte, error) {
	zr := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(zr)
	zr.Reset(bytes.NewReader(src))
	out := make([]byte, n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	var one [1]byte
	if k, err := zr.Read(one[:]); k != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return nil, fmt.Errorf("lz4: more than the %d bytes the prefix says", n)
	}
	return out, nil
}

func bitmapBytes(n int64) int64 { return (n + 7) / 8 }

// validity reads a validity buffer for a node.
func (r *batchReader) validity(n node) ([]byte, error) {
	need := int64(0)
	if n.nulls > 0 {
		need = bitmapBytes(n.length)
	}
	b, err := r.bufferUpTo(need, bitmapBytes(n.length))
	if err != nil {
		return nil, err
	}
	if n.nulls == 0 {
		return nil, nil
	}
	// A wrong null count would make callers that trust it (skipping the
	// bitmap when it is 0, say) read garbage as values.
	if c := countNulls(b, int(n.length)); int64(c) != n.nulls {
		return nil, fmt.Errorf("field node says %d nulls, its validity bitmap %d", n.nulls, c)
	}
	return b, nil
}

func (r *batchReader) array(f *Field, depth int) (*Array, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	n, err := r.node()
	if err != nil {
		return nil, err
	}
	t := f.Type
	if f.Dict != nil {
		t = f.Dict.IndexType
	}
	a := &Array{Type: t, Len: int(n.length), NullCount: int(n.nulls)}
	if t.ID == Null {
		a.NullCount = a.Len // V5 Null arrays have no buffers
		return a, nil
	}
	if a.Validity, err = r.validity(n); err != nil {
		return nil, err
	}
	switch t.ID {
	case Bool:
		if a.Values, err = r.buffer(bitmapBytes(n.length)); err != nil {
			return nil, err
		}
	case Int, Float, Decimal, Date, Time, Timestamp, FixedSizeBinary:
		w := int64(t.ByteWidth())
		if w > 0 && n.length > (math.MaxInt64/w) {
			return nil, fmt.Errorf("%d values of %d bytes", n.length, w)
		}
		if a.Values, err = r.buffer(n.length * w); err != nil {
			return nil, err
		}
	case Utf8, Binary:
		ob, err := r.buffer((n.length + 1) * 4)
		if err != nil {
			return nil, err
		}
		if n.length == 0 && len(ob) == 0 {
			a.Offsets = []int32{0}
		} else {
			a.Offsets = view[int32](ob, a.Len+1)
		}
		lo, hi := int64(a.Offsets[0]), int64(a.Offsets[a.Len])
		if a.Values, err = r.buffer(hi); err != nil {
			return nil, err
		}
		if err := checkOffsets32(a.Offsets, int64(len(a.Values))); err != nil {
			return nil, err
		}
		_ = lo
	case LargeUtf8, LargeBinary:
		ob, err := r.buffer((n.length + 1) * 8)
		if err != nil {
			return nil, err
		}
		if n.length == 0 && len(ob) == 0 {
			a.LargeOffsets = []int64{0}
		} else {
			a.LargeOffsets = view[int64](ob, a.Len+1)
		}
		if a.Values, err = r.buffer(max(a.LargeOffsets[a.Len], 0)); err != nil {
			return nil, err
		}
		if err := checkOffsets64(a.LargeOffsets, int64(len(a.Values))); err != nil {
			return nil, err
		}
	case List:
		ob, err := r.buffer((n.length + 1) * 4)
		if err != nil {
			return nil, err
		}
		if n.length == 0 && len(ob) == 0 {
			a.Offsets = []int32{0}
		} else {
			a.Offsets = view[int32](ob, a.Len+1)
		}
		c, err := r.array(&f.Children[0], depth+1)
		if err != nil {
			return nil, err
		}
		if err := checkOffsets32(a.Offsets, int64(c.Len)); err != nil {
			return nil, err
		}
		a.Children = []*Array{c}
	case LargeList:
		ob, err := r.buffer((n.length + 1) * 8)
		if err != nil {
			return nil, err
		}
		if n.length == 0 && len(ob) == 0 {
			a.LargeOffsets = []int64{0}
		} else {
			a.LargeOffsets = view[int64](ob, a.Len+1)
		}
		c, err := r.array(&f.Children[0], depth+1)
		if err != nil {
			return nil, err
		}
		if err := checkOffsets64(a.LargeOffsets, int64(c.Len)); err != nil {
			return nil, err
		}
		a.Children = []*Array{c}
	case FixedSizeList:
		c, err := r.array(&f.Children[0], depth+1)
		if err != nil {
			return nil, err
		}
		if int64(c.Len) < n.length*int64(t.Size) {
			return nil, fmt.Errorf("fixed-size list of %d×%d values has a child of %d", n.length, t.Size, c.Len)
		}
		a.Children = []*Array{c}
	case Struct:
		a.Children = make([]*Array, len(f.Children))
		for i := range f.Children {
			c, err := r.array(&f.Children[i], depth+1)
			if err != nil {
				return nil, err
			}
			if int64(c.Len) < n.length {
				return nil, fmt.Errorf("struct of %d rows has a %d-row child %q", n.length, c.Len, f.Children[i].Name)
			}
			a.Children[i] = c
		}
	default:
		return nil, fmt.Errorf("unsupported type %s", t)
	}
	if f.Dict != nil {
		dict := r.d.dicts[f.Dict.ID]
		if dict == nil {
			return nil, fmt.Errorf("dictionary %d used before it was sent", f.Dict.ID)
		}
		if err := checkIndices(a, f.Dict.IndexType, dict.Len); err != nil {
			return nil, err
		}
		a.Dict = dict
	}
	return a, nil
}

func checkOffsets32(o []int32, limit int64) error {
	prev := o[0]
	if prev < 0 {
		return fmt.Errorf("negative offset %d", prev)
	}
	for _, v := range o[1:] {
		if v < prev {
			return fmt.Errorf("offsets decrease (%d after %d)", v, prev)
		}
		prev = v
	}
	if int64(prev) > limit {
		return fmt.Errorf("offset %d past the %d available", prev, limit)
	}
	return nil
}

func checkOffsets64(o []int64, limit int64) error {
	prev := o[0]
	if prev < 0 {
		return fmt.Errorf("negative offset %d", prev)
	}
	for _, v := range o[1:] {
		if v < prev {
			return fmt.Errorf("offsets decrease (%d after %d)", v, prev)
		}
		prev = v
	}
	if prev > limit {
		return fmt.Errorf("offset %d past the %d available", prev, limit)
	}
	return nil
}

// checkIndices rejects dictionary indices outside the dictionary, so that
// lookups by callers cannot go out of range.
func checkIndices(a *Array, it DataType, n int) error {
	for i := 0; i < a.Len; i++ {
		if !a.IsValid(i) {
			continue
		}
		var v int64
		p := a.Values
		switch it.BitWidth {
		case 8:
			v = int64(p[i])
			if it.Signed {
				v = int64(int8(p[i]))
			}
		case 16:
			u := binary.LittleEndian.Uint16(p[2*i:])
			v = int64(u)
			if it.Signed {
				v = int64(int16(u))
			}
		case 32:
			u := binary.LittleEndian.Uint32(p[4*i:])
			v = int64(u)
			if it.Signed {
				v = int64(int32(u))
			}
		case 64:
			v = int64(binary.LittleEndian.Uint64(p[8*i:]))
		}
		if v < 0 || v >= int64(n) {
			return fmt.Errorf("dictionary index %d outside a %d-entry dictionary", v, n)
		}
	}
	return nil
}
