package merge

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// DefaultLocateBatchKeys bounds the keys a merge holds at once: its
// memory no longer grows with the job (a 1 M-upsert job held about 400 MiB
// when every record was kept as a decoded row). A job with more distinct
// keys locates its base rows in several passes, each reading the base
// key columns once.
const DefaultLocateBatchKeys = 1 << 21

// locateBatchBytes bounds the encoded keys of one batch (long string keys).
const locateBatchBytes = 64 << 20

// sstCursor streams one SSTable's records in key order without decoding
// them into table rows: the key is encoded from the key columns and the
// row stays in Parquet values.
type sstCursor struct {
	gen  int // position in the job: a higher one is newer
	sst  *pb.SSTable
	file *parquet.File
	rgs  []parquet.RowGroup
	rows parquet.Rows
	buf  []parquet.Row
	n, i int
	eof  bool

	keyCols  []int
	keyTypes []pb.FieldType
	opCol    int
	// tableCols[j] is the SSTable column holding the table's Parquet
	// column j.
	tableCols []int
	nullOK    []bool // by table Parquet column

	count uint64 // records read
	key   []byte // current record's key (owned)
	prev  []byte
	op    memwal.Op
	row   parquet.Row // current record (valid until next)

	// prog gets each batch read: its records, and the SSTable's bytes in
	// proportion (bytesDone so far).
	prog      *progress.Reporter
	read      uint64
	bytesDone int64
}

func openCursor(ctx context.Context, b storage.Bucket, s *pb.Schema, gen int, sst *pb.SSTable) (*sstCursor, error) {
	f, err := table.OpenParquet(ctx, b, sst.Path, int64(sst.Bytes))
	if err != nil {
		return nil, err
	}
	c := &sstCursor{gen: gen, sst: sst, file: f, rgs: f.RowGroups(), buf: make([]parquet.Row, table.ScanBatch), eof: true,
		prog: progress.From(ctx)}
	sch := f.Schema()
	leaf, ok := sch.Lookup(memwal.OpColumn)
	if !ok {
		return nil, fmt.Errorf("sstable %s: %w: no %s column", sst.Path, table.ErrCorrupt, memwal.OpColumn)
	}
	c.opCol = leaf.ColumnIndex
	for _, fi := range table.KeyIndexes(s) {
		fd := s.Fields[fi]
		leaf, ok := sch.Lookup(fd.Name)
		if !ok {
			return nil, fmt.Errorf("sstable %s: %w: no key column %q", sst.Path, table.ErrCorrupt, fd.Name)
		}
		c.keyCols, c.keyTypes = append(c.keyCols, leaf.ColumnIndex), append(c.keyTypes, fd.Type)
	}
	ps := table.ParquetSchema(s)
	c.tableCols = make([]int, len(ps.Columns()))
	c.nullOK = make([]bool, len(ps.Columns()))
	for _, fd := range s.Fields {
		tl, _ := ps.Lookup(fd.Name)
		sl, ok := sch.Lookup(fd.Name)
		if !ok {
			return nil, fmt.Errorf("sstable %s: %w: no column %q", sst.Path, table.ErrCorrupt, fd.Name)
		}
		if !parquet.EqualNodes(tl.Node, sl.Node) {
			return nil, fmt.Errorf("sstable %s: %w: column %q differs from the table's", sst.Path, table.ErrCorrupt, fd.Name)
		}
		c.tableCols[tl.ColumnIndex] = sl.ColumnIndex
		c.nullOK[tl.ColumnIndex] = fd.Nullable
	}
	return c, nil
}

// next moves to the next record; false at the end (check err).
func (c *sstCursor) next(ctx context.Context) (bool, error) {
	for c.i >= c.n {
		if c.eof {
			if c.rows != nil {
				_ = c.rows.Close()
				c.rows = nil
			}
			if len(c.rgs) == 0 {
				if c.count != c.sst.Rows {
					return false, fmt.Errorf("sstable %s: %w: holds %d rows, shard manifest says %d", c.sst.Path, table.ErrCorrupt, c.count, c.sst.Rows)
				}
				return false, nil
			}
			c.rows, c.rgs, c.eof = c.rgs[0].Rows(), c.rgs[1:], false
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, err := c.rows.ReadRows(c.buf)
		c.n, c.i = n, 0
		if n > 0 {
			c.read += uint64(n)
			b := int64(c.sst.Bytes)
			if c.read < c.sst.Rows {
				b = int64(float64(c.sst.Bytes) * float64(c.read) / float64(c.sst.Rows))
			}
			c.prog.Add(int64(n), b-c.bytesDone)
			c.bytesDone = b
		}
		if errors.Is(err, io.EOF) {
			c.eof = true
		} else if err != nil {
			return false, fmt.Errorf("read %s: %w", c.sst.Path, err)
		}
	}
	c.row = c.buf[c.i]
	c.i++
	switch op := c.row[c.opCol].ByteArray(); string(op) {
	case "upsert":
		c.op = memwal.Upsert
	case "delete":
		c.op = memwal.Delete
	default:
		return false, fmt.Errorf("sstable %s: %w: row %d has %s %q", c.sst.Path, table.ErrCorrupt, c.count, memwal.OpColumn, op)
	}
	c.prev, c.key = c.key, c.prev[:0]
	for i, col := range c.keyCols {
		v := c.row[col]
		if t := c.keyTypes[i]; (t == pb.FieldType_FIELD_TYPE_INT64 || t == pb.FieldType_FIELD_TYPE_TIMESTAMP) && !v.IsNull() {
			c.key = appendInt64Key(c.key, v.Int64())
		} else {
			c.key = table.AppendKey(c.key, table.DecodeValue(t, v))
		}
	}
	if c.count > 0 && bytes.Compare(c.key, c.prev) <= 0 {
		return false, fmt.Errorf("sstable %s: %w: keys not strictly ascending at row %d", c.sst.Path, table.ErrCorrupt, c.count)
	}
	c.count++
	return true, nil
}

func (c *sstCursor) close() {
	if c.rows != nil {
		_ = c.rows.Close()
	}
}

// cursorHeap orders cursors by key, the newest generation first on equal
// keys.
type cursorHeap []*sstCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].gen > h[j].gen
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*sstCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// keyBatch is the folded records of one locate pass: encoded keys back to
// back and their ops.
type keyBatch struct {
	arena []byte
	ends  []int
	ops   []memwal.Op
}

func (k *keyBatch) len() int { return len(k.ends) }

func (k *keyBatch) add(key []byte, op memwal.Op) {
	k.arena = append(k.arena, key...)
	k.ends = append(k.ends, len(k.arena))
	k.ops = append(k.ops, op)
}

func (k *keyBatch) reset() { k.arena, k.ends, k.ops = k.arena[:0], k.ends[:0], k.ops[:0] }

// keys returns the batch's keys as substrings of one string (one copy, no
// allocation per key).
func (k *keyBatch) keys() []string {
	all := string(k.arena)
	out := make([]string, len(k.ends))
	lo := 0
	for i, hi := range k.ends {
		out[i] = all[lo:hi]
		lo = hi
	}
	return out
}

// upsertWriter writes upserted rows, already in Parquet values, into
// fragments of at most maxRows rows.
type upsertWriter struct {
	ctx     context.Context
	b       storage.Bucket
	s       *pb.Schema
	maxRows uint64
	cur     *table.FragmentWriter
	frags   []*pb.Fragment
	files   []string
	pending []parquet.Row
	free    []parquet.Row
}

// add appends the table columns of src (an SSTable row laid out by c).
func (w *upsertWriter) add(c *sstCursor, src parquet.Row) error {
	var row parquet.Row
	if n := len(w.free); n > 0 {
		row, w.free = w.free[n-1][:0], w.free[:n-1]
	}
	for j, col := range c.tableCols {
		v := src[col]
		if v.IsNull() && !c.nullOK[j] {
			return fmt.Errorf("sstable %s: %w: row %d has a null in a required column", c.sst.Path, table.ErrCorrupt, c.count-1)
		}
		row = append(row, v.Level(v.RepetitionLevel(), v.DefinitionLevel(), j))
	}
	w.pending = append(w.pending, row)
	if len(w.pending) == table.ScanBatch {
		return w.flush()
	}
	return nil
}

func (w *upsertWriter) flush() error {
	for len(w.pending) > 0 {
		if w.cur == nil {
			fw, err := table.NewFragmentWriter(w.ctx, w.b, w.s)
			if err != nil {
				return err
			}
			w.cur = fw
			w.files = append(w.files, fw.Key())
		}
		n := min(uint64(len(w.pending)), w.maxRows-w.cur.Rows())
		if err := w.cur.WriteParquetRows(w.pending[:n]); err != nil {
			return err
		}
		w.free = append(w.free, w.pending[:n]...)
		w.pending = append(w.pending[:0], w.pending[n:]...)
		if w.cur.Rows() >= w.maxRows {
			if err := w.roll(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *upsertWriter) roll() error {
	if w.cur == nil {
		return nil
	}
	f, err := w.cur.Close()
	w.cur = nil
	if err != nil {
		return err
	}
	w.frags = append(w.frags, f)
	return nil
}

func (w *upsertWriter) close() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.roll()
}

// abort abandons the current fragment (its file stays in files, removed
// by the caller).
func (w *upsertWriter) abort() {
	if w.cur != nil {
		_, _ = w.cur.Close()
		w.cur = nil
	}
}

// fold merges the job's SSTables by key (a later generation's record of a
// key replaces an earlier one), writes every winning upsert, key-sorted,
// as it streams past, and locates the base rows the winning records
// supersede, one batch of keys at a time. It fills res's counters and
// returns the deletion marks by fragment, the new fragments, and every
// file written (even on error).
func (mg *Merger) fold(ctx context.Context, base *pb.Manifest, job Job, res *Result, keys *commit.KeySetBuilder) (map[uint32]*roaring.Bitmap, []*pb.Fragment, []string, error) {
	s := base.Schema
	w := &upsertWriter{ctx: ctx, b: mg.t.Bucket, s: s, maxRows: uint64(max(1, mg.t.MaxRowsPerFragment))}
	defer w.abort()
	var curs []*sstCursor
	defer func() {
		for _, c := range curs {
			c.close()
		}
	}()
	h := cursorHeap{}
	for gen, sst := range job.SSTables {
		c, err := openCursor(ctx, mg.t.Bucket, s, gen, sst)
		if err != nil {
			return nil, nil, w.files, fmt.Errorf("merge shard %q generation %d: %w", job.Shard, sst.Generation, err)
		}
		curs = append(curs, c)
		ok, err := c.next(ctx)
		if err != nil {
			return nil, nil, w.files, fmt.Errorf("merge shard %q generation %d: %w", job.Shard, sst.Generation, err)
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)

	marks := map[uint32]*roaring.Bitmap{}
	var batch keyBatch
	var loc Locator
	limit := mg.cfg.LocateBatchKeys
	if limit <= 0 {
		limit = DefaultLocateBatchKeys
	}
	locate := func(last bool) error {
		if batch.len() == 0 {
			return nil
		}
		if loc == nil {
			// A job that fits one batch chooses by its key count, as
			// before; a larger one is past any index lookup's bound.
			n := batch.len()
			if !last {
				n = math.MaxInt
			}
			loc = mg.locator(base, n)
			res.Lookup = loc.Name()
		}
		ks, err := NewKeySet(batch.keys())
		if err != nil {
			return err
		}
		found := make([]bool, batch.len())
		err = loc.Locate(ctx, mg.t.Bucket, base, ks, func(frag, off uint32, i int) error {
			if i < 0 || i >= len(found) {
				return fmt.Errorf("locator %s reported key index %d of %d", loc.Name(), i, len(found))
			}
			bm := marks[frag]
			if bm == nil {
				bm = roaring.New()
				marks[frag] = bm
			}
			bm.Add(off)
			found[i] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("merge shard %q: find base rows: %w", job.Shard, err)
		}
		for i, op := range batch.ops {
			switch {
			case op == memwal.Upsert && found[i]:
				res.Updated++
			case op == memwal.Upsert:
				res.Inserted++
			case found[i]:
				res.Deleted++
			}
		}
		batch.reset()
		return nil
	}
	var key []byte
	for h.Len() > 0 {
		top := h[0]
		if top.op == memwal.Upsert {
			if err := w.add(top, top.row); err != nil {
				return nil, nil, w.files, fmt.Errorf("merge shard %q: write fragments: %w", job.Shard, err)
			}
		}
		batch.add(top.key, top.op)
		keys.Add(top.key)
		// Advance every cursor at this key: the newest record won.
		key = append(key[:0], top.key...)
		for h.Len() > 0 && bytes.Equal(h[0].key, key) {
			c := h[0]
			ok, err := c.next(ctx)
			if err != nil {
				return nil, nil, w.files, fmt.Errorf("merge shard %q generation %d: %w", job.Shard, c.sst.Generation, err)
			}
			if ok {
				heap.Fix(&h, 0)
			} else {
				heap.Pop(&h)
			}
		}
		if batch.len() >= limit || len(batch.arena) >= locateBatchBytes {
			if err := locate(h.Len() == 0); err != nil {
				return nil, nil, w.files, err
			}
		}
	}
	if err := locate(true); err != nil {
		return nil, nil, w.files, err
	}
	for _, c := range curs {
		res.SSTableRows += c.count
	}
	if err := w.close(); err != nil {
		return nil, nil, w.files, fmt.Errorf("merge shard %q: write fragments: %w", job.Shard, err)
	}
	return marks, w.frags, w.files, nil
}
