package arrowipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Writer writes an IPC stream or file. Buffers are padded to 8 bytes, the
// alignment the format requires; a compressed buffer that would not shrink is
// stored raw behind the -1 prefix, as arrow-rs and Arrow C++ do.
type Writer struct {
	w      io.Writer
	schema *Schema
	codec  Compression
	file   bool
	off    int64
	blocks []block
	err    error
	closed bool
	body   []byte // reused between batches
}

type block struct {
	offset  int64
	metaLen int32
	bodyLen int64
}

func newWriter(w io.Writer, s *Schema, codec Compression, file bool) (*Writer, error) {
	if codec != None && codec != LZ4Frame && codec != ZSTD {
		return nil, fmt.Errorf("arrowipc: unknown codec %d", codec)
	}
	sw := &Writer{w: w, schema: s, codec: codec, file: file}
	if file {
		sw.write([]byte("ARROW1\x00\x00"))
	}
	st, err := buildSchema(s)
	if err != nil {
		return nil, err
	}
	sw.message(buildMessage(hdrSchema, st, 0), nil)
	return sw, sw.err
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(b)
	w.off += int64(n)
	w.err = err
}

var pad8 [8]byte

// message writes one framed message and returns its metadata length.
func (w *Writer) message(meta, body []byte) int32 {
	ml := (len(meta) + 8 + 7) &^ 7 // prefix + flatbuffer, padded to 8
	var pre [8]byte
	binary.LittleEndian.PutUint32(pre[:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(pre[4:], uint32(ml-8))
	w.write(pre[:])
	w.write(meta)
	w.write(pad8[:ml-8-len(meta)])
	w.write(body)
	return int32(ml)
}

// Write appends one record batch. Its columns must match the schema.
func (w *Writer) Write(b *Batch) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("arrowipc: write after close")
	}
	if len(b.Columns) != len(w.schema.Fields) {
		return fmt.Errorf("arrowipc: batch has %d columns, the schema %d", len(b.Columns), len(w.schema.Fields))
	}
	e := encoder{codec: w.codec, body: w.body[:0]}
	for i, c := range b.Columns {
		if c.Len != b.Len {
			return fmt.Errorf("arrowipc: column %q has %d rows, the batch %d", w.schema.Fields[i].Name, c.Len, b.Len)
		}
		if err := e.array(&w.schema.Fields[i], c); err != nil {
			return fmt.Errorf("arrowipc: column %q: %w", w.schema.Fields[i].Name, err)
		}
	}
	w.body = e.body
	meta := buildMessage(hdrRecordBatch, buildRecordBatch(int64(b.Len), e.nodes, e.bufs, w.codec), int64(len(e.body)))
	off := w.off
	ml := w.message(meta, e.body)
	w.blocks = append(w.blocks, block{off, ml, int64(len(e.body))})
	return w.err
}

// Close ends the stream with the end-of-stream marker and, for files, writes
// the footer. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.write([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0})
	if !w.file {
		return w.err
	}
	st, err := buildSchema(w.schema)
	if err != nil {
		return err
	}
	bb := make([]byte, 0, 24*len(w.blocks))
	for _, b := range w.blocks {
		bb = binary.LittleEndian.AppendUint64(bb, uint64(b.offset))
		bb = binary.LittleEndian.AppendUint32(bb, uint32(b.metaLen))
		bb = append(bb, 0, 0, 0, 0)
		bb = binary.LittleEndian.AppendUint64(bb, uint64(b.bodyLen))
	}
	var fw fbw
	footer := fw.finish(fbTable{sc16(0, metadataV5), rf(1, st), rf(2, fbStructs{0, nil}), rf(3, fbStructs{len(w.blocks), bb})})
	w.write(footer)
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(footer)))
	w.write(l[:])
	w.write(fileMagic)
	return w.err
}

// WriteStream encodes s and batches as an IPC stream.
func WriteStream(s *Schema, batches []*Batch, codec Compression) ([]byte, error) {
	return writeAll(s, batches, codec, false)
}

// WriteFile encodes s and batches as an IPC file.
func WriteFile(s *Schema, batches []*Batch, codec Compression) ([]byte, error) {
	return writeAll(s, batches, codec, true)
}

func writeAll(s *Schema, batches []*Batch, codec Compression, file bool) ([]byte, error) {
	var out bytes.Buffer
	w, err := newWriter(&out, s, codec, file)
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// encoder lays out one batch body.
type encoder struct {
	codec Compression
	body  []byte
	nodes []node
	bufs  []buf
}

var zstdEnc = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic(err) // only on invalid options
	}
	return e
})

var lz4Writers = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}

func (e *encoder) put(b []byte) {
	start := len(e.body)
	switch {
	case len(b) == 0:
	case e.codec == None:
		e.body = append(e.body, b...)
	default:
		e.body = binary.LittleEndian.AppendUint64(e.body, uint64(len(b)))
		before := len(e.body)
		switch e.codec {
		case ZSTD:
			e.body = zstdEnc().EncodeAll(b, e.body)
		case LZ4Frame:
			var bb bytes.Buffer
			zw := lz4Writers.Get().(*lz4.Writer)
			zw.Reset(&bb)
			_, err1 := zw.Write(b)
			err2 := zw.Close()
			lz4Writers.Put(zw)
			if err1 != nil || err2 != nil {
				bb.Reset() // falls back to raw below
				bb.Write(make([]byte, len(b)+1))
			}
			e.body = append(e.body, bb.Bytes()...)
		}
		if len(e.body)-before >= len(b) {
			e.body = e.body[:before-8]
			e.body = binary.LittleEndian.AppendUint64(e.body, ^uint64(0))
			e.body = append(e.body, b...)
		}
	}
	e.bufs = append(e.bufs, buf{int64(start), int64(len(e.body) - start)})
	for len(e.body)%8 != 0 {
		e.body = append(e.body, 0)
	}
}

func (e *encoder) array(f *Field, a *Array) error {
	if f.Dict != nil {
		return errors.New("dictionary-encoded columns cannot be written")
	}
	if a.Type.ID != f.Type.ID {
		return fmt.Errorf("array of type %s for a field of type %s", a.Type, f.Type)
	}
	n := int64(a.Len)
	if f.Type.ID == Null {
		e.nodes = append(e.nodes, node{n, n})
		return nil
	}
	nulls := int64(0)
	if a.Validity != nil {
		if len(a.Validity) < int(bitmapBytes(n)) {
			return fmt.Errorf("validity of %d bytes for %d rows", len(a.Validity), n)
		}
		nulls = int64(countNulls(a.Validity, a.Len))
	}
	e.nodes = append(e.nodes, node{n, nulls})
	if nulls > 0 {
		e.put(a.Validity[:bitmapBytes(n)])
	} else {
		e.put(nil)
	}
	need := func(b []byte, k int64) ([]byte, error) {
		if int64(len(b)) < k {
			return nil, fmt.Errorf("%d value bytes for %d rows of %s", len(b), n, f.Type)
		}
		return b[:k], nil
	}
	switch f.Type.ID {
	case Bool:
		v, err := need(a.Values, bitmapBytes(n))
		if err != nil {
			return err
		}
		e.put(v)
	case Int, Float, Decimal, Date, Time, Timestamp, FixedSizeBinary:
		v, err := need(a.Values, n*int64(f.Type.ByteWidth()))
		if err != nil {
			return err
		}
		e.put(v)
	case Utf8, Binary, List:
		if len(a.Offsets) != a.Len+1 {
			return fmt.Errorf("%d offsets for %d rows", len(a.Offsets), n)
		}
		e.put(bytesOf(a.Offsets))
		if f.Type.ID == List {
			if err := checkOffsets32(a.Offsets, int64(lenChild(a))); err != nil {
				return err
			}
			return e.child(f, a, int64(a.Offsets[a.Len]))
		}
		if err := checkOffsets32(a.Offsets, int64(len(a.Values))); err != nil {
			return err
		}
		e.put(a.Values[:a.Offsets[a.Len]])
	case LargeUtf8, LargeBinary, LargeList:
		if len(a.LargeOffsets) != a.Len+1 {
			return fmt.Errorf("%d offsets for %d rows", len(a.LargeOffsets), n)
		}
		e.put(bytesOf(a.LargeOffsets))
		if f.Type.ID == LargeList {
			if err := checkOffsets64(a.LargeOffsets, int64(lenChild(a))); err != nil {
				return err
			}
			return e.child(f, a, a.LargeOffsets[a.Len])
		}
		if err := checkOffsets64(a.LargeOffsets, int64(len(a.Values))); err != nil {
			return err
		}
		e.put(a.Values[:a.LargeOffsets[a.Len]])
	case FixedSizeList:
		return e.child(f, a, n*int64(f.Type.Size))
	case Struct:
		if len(a.Children) != len(f.Children) {
			return fmt.Errorf("struct with %d children for a field with %d", len(a.Children), len(f.Children))
		}
		for i := range f.Children {
			if int64(a.Children[i].Len) != n {
				return fmt.Errorf("struct child %q has %d rows, the struct %d", f.Children[i].Name, a.Children[i].Len, n)
			}
			if err := e.array(&f.Children[i], a.Children[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cannot write type %s", f.Type)
	}
	return nil
}

func lenChild(a *Array) int {
	if len(a.Children) == 1 {
		return a.Children[0].Len
	}
	return 0
}

// child writes a list's child, which must have exactly want values (the IPC
// format has no slicing, so a longer child would be sent whole).
func (e *encoder) child(f *Field, a *Array, want int64) error {
	if len(a.Children) != 1 || len(f.Children) != 1 {
		return errors.New("a list needs exactly one child")
	}
	if int64(a.Children[0].Len) != want {
		return fmt.Errorf("list child has %d values, the offsets need %d", a.Children[0].Len, want)
	}
	return e.array(&f.Children[0], a.Children[0])
}
