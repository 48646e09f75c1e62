package index

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/format"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

const (
	btreeFileName = "btree.parquet"
	// btreeRowGroupRows keeps row groups small so that a point lookup,
	// after skipping row groups by their key statistics, decodes only a
	// few thousand entries.
	btreeRowGroupRows = 8192
)

func btreeSchema() *parquet.Schema {
	return parquet.NewSchema("compactord_btree", parquet.Group{
		"key":  parquet.Compressed(parquet.Leaf(parquet.ByteArrayType), &fastSnappy{}),
		"addr": parquet.Compressed(parquet.Uint(64), &fastSnappy{}),
	})
}

// fastSnappy writes standard SNAPPY blocks with the fast encoder;
// parquet-go's codec uses klauspost's slower "better" mode.
type fastSnappy struct{ snappy.Codec }

func (fastSnappy) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

func (fastSnappy) CompressionCodec() format.CompressionCodec { return format.Snappy }

func btreeColumns(s *parquet.Schema) (keyCol, addrCol int, ok bool) {
	k, ok1 := s.Lookup("key")
	a, ok2 := s.Lookup("addr")
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return k.ColumnIndex, a.ColumnIndex, true
}

// btreeWriter streams (key, address) pairs, in key order, into a segment
// file. Values go straight to the two column writers, a batch at a time,
// and a row group is cut every btreeRowGroupRows entries: assembling a
// Parquet row per entry cost half of a segment rewrite.
type btreeWriter struct {
	key             string
	cancel          context.CancelFunc
	w               io.WriteCloser
	cw              countingWriter
	pw              *parquet.Writer
	keyCol, addrCol int
	keys            []parquet.Value
	addrs           []parquet.Value
	arena           []byte
	last            []byte
	inGroup         int
	n               uint64
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newBTreeWriter(ctx context.Context, b storage.Bucket, key string) (*btreeWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := b.NewWriter(ctx, key)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	s := btreeSchema()
	kc, ac, _ := btreeColumns(s)
	bw := &btreeWriter{key: key, cancel: cancel, w: w, keyCol: kc, addrCol: ac}
	bw.cw.w = w
	bw.pw = parquet.NewWriter(&bw.cw, s)
	return bw, nil
}

const btreeBatch = 1024

// add appends one entry. REQUIRES: keys arrive in non-decreasing order.
func (w *btreeWriter) add(k []byte, addr uint64) error {
	if w.n > 0 && bytes.Compare(k, w.last) < 0 {
		return fmt.Errorf("btree %s: keys out of order", w.key)
	}
	w.last = append(w.last[:0], k...)
	// Buffered values must not alias the caller's key, which it may reuse.
	start := len(w.arena)
	w.arena = append(w.arena, k...)
	w.keys = append(w.keys, parquet.ByteArrayValue(w.arena[start:len(w.arena):len(w.arena)]).Level(0, 0, w.keyCol))
	w.addrs = append(w.addrs, parquet.Int64Value(int64(addr)).Level(0, 0, w.addrCol))
	w.n++
	if len(w.keys) == btreeBatch || w.inGroup+len(w.keys) == btreeRowGroupRows {
		return w.flush()
	}
	return nil
}

func (w *btreeWriter) flush() error {
	if len(w.keys) == 0 {
		return nil
	}
	cols := w.pw.ColumnWriters()
	if _, err := cols[w.keyCol].WriteRowValues(w.keys); err != nil {
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	if _, err := cols[w.addrCol].WriteRowValues(w.addrs); err != nil {
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	w.inGroup += len(w.keys)
	w.keys, w.addrs = w.keys[:0], w.addrs[:0]
	w.arena = nil // the column buffers may still reference the old one
	if w.inGroup >= btreeRowGroupRows {
		w.inGroup = 0
		if err := w.pw.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", w.key, err)
		}
	}
	return nil
}

func (w *btreeWriter) close() (int64, error) {
	defer w.cancel()
	if err := w.flush(); err != nil {
		w.abort()
		return 0, err
	}
	if err := w.pw.Close(); err != nil {
		w.abort()
		return 0, fmt.Errorf("finish %s: %w", w.key, err)
	}
	if err := w.w.Close(); err != nil {
		return 0, fmt.Errorf("upload %s: %w", w.key, err)
	}
	return w.cw.n, nil
}

// abort abandons the upload: closing after cancel never publishes it.
func (w *btreeWriter) abort() {
	w.cancel()
	_ = w.w.Close()
}

// keyArena holds many short keys in one allocation.
type keyArena struct {
	data []byte
	ends []uint32
}

func (a *keyArena) reset()   { a.data, a.ends = a.data[:0], a.ends[:0] }
func (a *keyArena) len() int { return len(a.ends) }
func (a *keyArena) add(k []byte) {
	a.data = append(a.data, k...)
	a.ends = append(a.ends, uint32(len(a.data)))
}
func (a *keyArena) get(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = a.ends[i-1]
	}
	return a.data[start:a.ends[i]]
}

// btreeFile reads a btree segment.
type btreeFile struct {
	*parquetFile
	keyCol, addrCol int
}

func openBTree(ctx context.Context, b storage.Bucket, key string) (*btreeFile, error) {
	pf, err := openParquet(ctx, b, key, 0, ErrCorrupt)
	if err != nil {
		return nil, err
	}
	kc, ac, ok := btreeColumns(pf.Schema())
	if !ok || len(pf.Schema().Columns()) != 2 {
		_ = pf.Close()
		return nil, corruptf("%s: not a btree segment (columns %v)", key, pf.Schema().Columns())
	}
	return &btreeFile{parquetFile: pf, keyCol: kc, addrCol: ac}, nil
}

// readRowGroup decodes row group i into keys and addrs (both reset). It
// checks the shape a btree segment must have: both columns the same length
// as the row group, keys in order.
func (t *btreeFile) readRowGroup(i int, keys *keyArena, addrs []uint64) ([]uint64, error) {
	keys.reset()
	addrs = addrs[:0]
	rg := t.RowGroups()[i]
	cols := rg.ColumnChunks()
	buf := make([]parquet.Value, 1024)
	if err := table.ReadColumnValues(cols[t.keyCol], buf, func(vs []parquet.Value) error {
		for _, v := range vs {
			if v.IsNull() {
				return corruptf("%s: null key", t.key)
			}
			keys.add(v.ByteArray())
		}
		return nil
	}, nil); err != nil {
		return nil, t.wrap(err)
	}
	if err := table.ReadColumnValues(cols[t.addrCol], buf, func(vs []parquet.Value) error {
		for _, v := range vs {
			if v.IsNull() {
				return corruptf("%s: null address", t.key)
			}
			addrs = append(addrs, v.Uint64())
		}
		return nil
	}, nil); err != nil {
		return nil, t.wrap(err)
	}
	if int64(keys.len()) != rg.NumRows() || int64(len(addrs)) != rg.NumRows() {
		return nil, corruptf("%s: row group %d has %d keys and %d addresses for %d rows", t.key, i, keys.len(), len(addrs), rg.NumRows())
	}
	for j := 1; j < keys.len(); j++ {
		if bytes.Compare(keys.get(j-1), keys.get(j)) > 0 {
			return nil, corruptf("%s: row group %d: keys out of order", t.key, i)
		}
	}
	return addrs, nil
}

func (t *btreeFile) wrap(err error) error {
	if err == nil || isCorrupt(err) {
		return err
	}
	if storage.IsNotFound(err) {
		return fmt.Errorf("%s is missing: %w", t.key, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, t.key, err)
}

// lookup returns the addresses stored under k. Row groups whose key range
// cannot hold k are skipped on their statistics; a candidate is decoded and
// binary-searched.
func (t *btreeFile) lookup(k []byte) ([]uint64, error) {
	var out []uint64
	var keys keyArena
	var addrs []uint64
	for i, rg := range t.RowGroups() {
		if rg.NumRows() == 0 {
			continue
		}
		if fc, ok := rg.ColumnChunks()[t.keyCol].(*parquet.FileColumnChunk); ok {
			if lo, hi, ok := fc.Bounds(); ok {
				if bytes.Compare(k, lo.ByteArray()) < 0 {
					break // row groups are in key order
				}
				if bytes.Compare(k, hi.ByteArray()) > 0 {
					continue
				}
			}
		}
		var err error
		if addrs, err = t.readRowGroup(i, &keys, addrs); err != nil {
			return nil, err
		}
		j := sort.Search(keys.len(), func(j int) bool { return bytes.Compare(keys.get(j), k) >= 0 })
		for ; j < keys.len() && bytes.Equal(keys.get(j), k); j++ {
			out = append(out, addrs[j])
		}
	}
	return out, nil
}

// btreeCursor walks a btree segment's entries in key order, one row group
// in memory at a time.
type btreeCursor struct {
	t     *btreeFile
	rg    int
	keys  keyArena
	addrs []uint64
	pos   int
}

// next returns the next row group's entries, or false at the end.
func (c *btreeCursor) nextBatch() (bool, error) {
	for c.rg < len(c.t.RowGroups()) {
		i := c.rg
		c.rg++
		var err error
		if c.addrs, err = c.t.readRowGroup(i, &c.keys, c.addrs); err != nil {
			return false, err
		}
		c.pos = 0
		if c.keys.len() > 0 {
			return true, nil
		}
	}
	return false, nil
}
