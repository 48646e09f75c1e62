package arrowipc

import (
	"encoding/binary"
	"fmt"
)

// Message header union tags (Message.fbs).
const (
	hdrSchema          = 1
	hdrDictionaryBatch = 2
	hdrRecordBatch     = 3
)

// metadataV5 is the MetadataVersion this package writes; V4 and V5 are read.
const metadataV5 = 4

// maxDepth bounds field nesting; deeper schemas are rejected rather than
// recursed into.
const maxDepth = 64

// Body compression codecs (Message.fbs CompressionType), plus None.
type Compression int8

const (
	// None writes buffers as they are.
	None Compression = -1
	// LZ4Frame compresses each buffer as an LZ4 frame.
	LZ4Frame Compression = 0
	// ZSTD compresses each buffer as a Zstandard frame (what Lance writes).
	ZSTD Compression = 1
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case LZ4Frame:
		return "lz4_frame"
	case ZSTD:
		return "zstd"
	}
	return fmt.Sprintf("compression#%d", int8(c))
}

func parseMetadata(t tbl, slot int) Metadata {
	start, n := t.vec(slot, 4)
	if n == 0 {
		return nil
	}
	md := make(Metadata, 0, n)
	for i := 0; i < n; i++ {
		kv := t.vecTable(start, i)
		md = append(md, KeyValue{Key: kv.str(0), Value: kv.str(1)})
		if t.f.err != nil {
			return nil
		}
	}
	return md
}

func parseSchema(t tbl) (*Schema, error) {
	if e := t.i16(0, 0); e != 0 {
		return nil, fmt.Errorf("arrowipc: big-endian data is not supported")
	}
	s := &Schema{Metadata: parseMetadata(t, 2)}
	start, n := t.vec(1, 4)
	s.Fields = make([]Field, 0, n)
	for i := 0; i < n; i++ {
		f, err := parseField(t.vecTable(start, i), 0)
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, f)
	}
	if t.f.err != nil {
		return nil, t.f.err
	}
	return s, nil
}

func parseField(t tbl, depth int) (Field, error) {
	if depth > maxDepth {
		return Field{}, fmt.Errorf("arrowipc: fields nested deeper than %d", maxDepth)
	}
	f := Field{Name: t.str(0), Nullable: t.boolean(1), Metadata: parseMetadata(t, 6)}
	tag := TypeID(t.u8(2, 0))
	tt, ok := t.sub(3)
	if t.f.err != nil {
		return f, t.f.err
	}
	if !ok && tag != 0 {
		// Types without parameters may be stored as absent tables.
		tt = tbl{f: t.f}
	}
	dt, err := parseType(tag, tt)
	if err != nil {
		return f, fmt.Errorf("arrowipc: field %q: %w", f.Name, err)
	}
	f.Type = dt
	if d, ok := t.sub(4); ok {
		f.Dict = &DictEncoding{ID: d.i64(0, 0), Ordered: d.boolean(2)}
		if it, ok := d.sub(1); ok {
			f.Dict.IndexType = DataType{ID: Int, BitWidth: int(it.i32(0, 0)), Signed: it.boolean(1)}
		} else {
			f.Dict.IndexType = TInt32
		}
		if bw := f.Dict.IndexType.BitWidth; bw != 8 && bw != 16 && bw != 32 && bw != 64 {
			return f, fmt.Errorf("arrowipc: field %q: dictionary index width %d", f.Name, bw)
		}
		if d.i16(3, 0) != 0 {
			return f, fmt.Errorf("arrowipc: field %q: unknown dictionary kind", f.Name)
		}
	}
	start, n := t.vec(5, 4)
	if n > 0 {
		f.Children = make([]Field, 0, n)
	}
	for i := 0; i < n; i++ {
		c, err := parseField(t.vecTable(start, i), depth+1)
		if err != nil {
			return f, err
		}
		f.Children = append(f.Children, c)
	}
	if t.f.err != nil {
		return f, t.f.err
	}
	want := -1
	switch f.Type.ID {
	case List, LargeList, FixedSizeList:
		want = 1
	case Struct:
	default:
		want = 0
	}
	if want >= 0 && len(f.Children) != want {
		return f, fmt.Errorf("arrowipc: field %q: %s with %d children", f.Name, f.Type, len(f.Children))
	}
	return f, nil
}

func parseType(tag TypeID, t tbl) (DataType, error) {
	dt := DataType{ID: tag}
	switch tag {
	case Null, Binary, Utf8, Bool, List, Struct, LargeBinary, LargeUtf8, LargeList:
	case Int:
		dt.BitWidth, dt.Signed = int(t.i32(0, 0)), t.boolean(1)
		switch dt.BitWidth {
		case 8, 16, 32, 64:
		default:
			return dt, fmt.Errorf("int of %d bits", dt.BitWidth)
		}
	case Float:
		switch t.i16(0, 0) {
		case 0:
			dt.BitWidth = 16
		case 1:
			dt.BitWidth = 32
		case 2:
			dt.BitWidth = 64
		default:
			return dt, fmt.Errorf("unknown float precision")
		}
	case Decimal:
		dt.Precision, dt.Scale, dt.BitWidth = t.i32(0, 0), t.i32(1, 0), int(t.i32(2, 128))
		if dt.BitWidth != 128 && dt.BitWidth != 256 {
			return dt, fmt.Errorf("decimal of %d bits", dt.BitWidth)
		}
	case Date:
		switch TimeUnit(t.i16(0, 1)) {
		case DateDay:
			dt.Unit, dt.BitWidth = DateDay, 32
		case DateMillisecond:
			dt.Unit, dt.BitWidth = DateMillisecond, 64
		default:
			return dt, fmt.Errorf("unknown date unit")
		}
	case Time:
		dt.Unit, dt.BitWidth = TimeUnit(t.i16(0, 1)), int(t.i32(1, 32))
		if dt.Unit > Nanosecond || (dt.Unit <= Millisecond) != (dt.BitWidth == 32) || (dt.BitWidth != 32 && dt.BitWidth != 64) {
			return dt, fmt.Errorf("time of unit %d and %d bits", dt.Unit, dt.BitWidth)
		}
	case Timestamp:
		dt.Unit, dt.TZ, dt.BitWidth = TimeUnit(t.i16(0, 0)), t.str(1), 64
		if dt.Unit > Nanosecond {
			return dt, fmt.Errorf("unknown timestamp unit")
		}
	case FixedSizeBinary:
		dt.Size = t.i32(0, 0)
		if dt.Size < 0 {
			return dt, fmt.Errorf("fixed-size binary of width %d", dt.Size)
		}
	case FixedSizeList:
		dt.Size = t.i32(0, 0)
		if dt.Size < 0 {
			return dt, fmt.Errorf("fixed-size list of size %d", dt.Size)
		}
	case 0:
		return dt, fmt.Errorf("no type")
	default:
		return dt, fmt.Errorf("unsupported type (union tag %d)", tag)
	}
	return dt, t.f.err
}

// message is a parsed Message header.
type message struct {
	kind    uint8
	bodyLen int64
	t       tbl // the header table
}

func parseMessage(b []byte) (message, error) {
	f := &fbuf{b: b}
	m := f.root()
	v := m.i16(0, 0)
	kind := m.u8(1, 0)
	h, _ := m.sub(2)
	bl := m.i64(3, 0)
	if f.err != nil {
		return message{}, f.err
	}
	if v < 3 || v > metadataV5 {
		return message{}, fmt.Errorf("arrowipc: unsupported metadata version %d", v+1)
	}
	if bl < 0 {
		return message{}, fmt.Errorf("arrowipc: negative body length %d", bl)
	}
	return message{kind: kind, bodyLen: bl, t: h}, nil
}

// node and buf are the FieldNode and Buffer structs of a RecordBatch.
type node struct{ length, nulls int64 }
type buf struct{ offset, length int64 }

// recordBatch is a parsed RecordBatch header.
type recordBatch struct {
	length int64
	nodes  []node
	bufs   []buf
	codec  Compression
}

func parseRecordBatch(t tbl) (recordBatch, error) {
	rb := recordBatch{length: t.i64(0, 0), codec: None}
	start, n := t.vec(1, 16)
	rb.nodes = make([]node, n)
	for i := range rb.nodes {
		p := start + 16*i
		rb.nodes[i] = node{int64(t.f.u64(p)), int64(t.f.u64(p + 8))}
	}
	start, n = t.vec(2, 16)
	rb.bufs = make([]buf, n)
	for i := range rb.bufs {
		p := start + 16*i
		rb.bufs[i] = buf{int64(t.f.u64(p)), int64(t.f.u64(p + 8))}
	}
	if c, ok := t.sub(3); ok {
		rb.codec = Compression(int8(c.u8(0, 0)))
		if rb.codec != LZ4Frame && rb.codec != ZSTD {
			return rb, fmt.Errorf("arrowipc: unknown compression codec %d", rb.codec)
		}
		if c.u8(1, 0) != 0 {
			return rb, fmt.Errorf("arrowipc: unknown body compression method")
		}
	}
	if _, n := t.vec(4, 8); n > 0 {
		return rb, fmt.Errorf("arrowipc: variadic buffers (view types) are not supported")
	}
	if t.f.err != nil {
		return rb, t.f.err
	}
	if rb.length < 0 {
		return rb, fmt.Errorf("arrowipc: negative batch length %d", rb.length)
	}
	return rb, nil
}

// Building.

func buildMetadata(md Metadata) fbObj {
	v := make(fbTables, len(md))
	for i, kv := range md {
		v[i] = fbTable{rf(0, fbStr(kv.Key)), rf(1, fbStr(kv.Value))}
	}
	return v
}

func buildType(dt DataType) (fbTable, error) {
	switch dt.ID {
	case Null, Binary, Utf8, Bool, List, Struct, LargeBinary, LargeUtf8, LargeList:
		return fbTable{}, nil
	case Int:
		return fbTable{sc32(0, int32(dt.BitWidth)), scBool(1, dt.Signed)}, nil
	case Float:
		p := map[int]int16{16: 0, 32: 1, 64: 2}[dt.BitWidth]
		return fbTable{sc16(0, p)}, nil
	case Decimal:
		return fbTable{sc32(0, dt.Precision), sc32(1, dt.Scale), sc32(2, int32(dt.BitWidth))}, nil
	case Date:
		return fbTable{sc16(0, int16(dt.Unit))}, nil
	case Time:
		return fbTable{sc16(0, int16(dt.Unit)), sc32(1, int32(dt.BitWidth))}, nil
	case Timestamp:
		t := fbTable{sc16(0, int16(dt.Unit))}
		if dt.TZ != "" {
			t = append(t, rf(1, fbStr(dt.TZ)))
		}
		return t, nil
	case FixedSizeBinary, FixedSizeList:
		return fbTable{sc32(0, dt.Size)}, nil
	}
	return nil, fmt.Errorf("arrowipc: cannot write type %s", dt)
}

func buildField(f *Field) (fbObj, error) {
	tt, err := buildType(f.Type)
	if err != nil {
		return nil, fmt.Errorf("%w (field %q)", err, f.Name)
	}
	t := fbTable{rf(0, fbStr(f.Name)), scBool(1, f.Nullable), sc8(2, uint8(f.Type.ID)), rf(3, tt)}
	if f.Dict != nil {
		return nil, fmt.Errorf("arrowipc: writing dictionary-encoded fields is not supported (field %q)", f.Name)
	}
	ch := make(fbTables, len(f.Children))
	for i := range f.Children {
		if ch[i], err = buildField(&f.Children[i]); err != nil {
			return nil, err
		}
	}
	t = append(t, rf(5, ch))
	if len(f.Metadata) > 0 {
		t = append(t, rf(6, buildMetadata(f.Metadata)))
	}
	return t, nil
}

func buildSchema(s *Schema) (fbTable, error) {
	fs := make(fbTables, len(s.Fields))
	for i := range s.Fields {
		var err error
		if fs[i], err = buildField(&s.Fields[i]); err != nil {
			return nil, err
		}
	}
	t := fbTable{sc16(0, 0), rf(1, fs)}
	if len(s.Metadata) > 0 {
		t = append(t, rf(2, buildMetadata(s.Metadata)))
	}
	return t, nil
}

func buildMessage(kind uint8, header fbObj, bodyLen int64) []byte {
	var w fbw
	return w.finish(fbTable{sc16(0, metadataV5), sc8(1, kind), rf(2, header), sc64(3, bodyLen)})
}

func buildRecordBatch(length int64, nodes []node, bufs []buf, codec Compression) fbTable {
	nb := make([]byte, 0, 16*len(nodes))
	for _, n := range nodes {
		nb = binary.LittleEndian.AppendUint64(nb, uint64(n.length))
		nb = binary.LittleEndian.AppendUint64(nb, uint64(n.nulls))
	}
	bb := make([]byte, 0, 16*len(bufs))
	for _, b := range bufs {
		bb = binary.LittleEndian.AppendUint64(bb, uint64(b.offset))
		bb = binary.LittleEndian.AppendUint64(bb, uint64(b.length))
	}
	t := fbTable{sc64(0, length), rf(1, fbStructs{len(nodes), nb}), rf(2, fbStructs{len(bufs), bb})}
	if codec != None {
		t = append(t, rf(3, fbTable{sc8(0, uint8(codec)), sc8(1, 0)}))
	}
	return t
}
