package lancewal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Generation is a flushed MemTable.
type Generation struct {
	Generation uint64
	// Path is the generation's directory under the shard ("{rand8}_gen_{N}").
	Path string
	// Rows is the rows written (one per key: the newest write wins);
	// Tombstones how many of them are deletes.
	Rows, Tombstones int
	// CoversWAL is the last WAL position the generation covers.
	CoversWAL uint64
}

// Flush writes the MemTable as the shard's next generation, as LanceDB
// flushes one: a one-fragment Lance dataset of the table's columns plus
// _tombstone (one row per key, the newest write), a copy of each
// maintained btree, vector or full-text index, the _pk_index btree (format 2.0) and
// bloom_filter.bin; then the shard manifest that lists it and moves the
// WAL replay position past the entries it covers. Nothing is flushed if
// no row is buffered (nil, nil).
//
// Flush freezes the MemTable and hands writes a new one at once: Upserts
// and Deletes proceed while the generation is built and written (the
// copy of a vector index, an HNSW graph, takes seconds). MemTables frozen
// earlier and not yet flushed (by the background flush, or by a flush
// that failed) are flushed first, each as its own generation in freeze
// order; Flush returns the generation holding the newest rows it
// flushed. A failed flush leaves the frozen rows buffered (Buffered
// counts them) for the next Flush or Close to write.
func (w *Writer) Flush(ctx context.Context) (*Generation, error) {
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	target := w.freeze()
	w.mu.Unlock()
	if target == nil {
		return nil, nil
	}
	return w.flushThrough(ctx, target)
}

// frozenMem is a MemTable that takes no more writes, waiting to become
// the shard's next generation.
type frozenMem struct {
	mem *memtable
	// coversWAL is the last WAL position whose rows it holds: its
	// generation moves the replay position there.
	coversWAL uint64
	done      chan struct{} // closed once its generation is published
	gen       *Generation   // set before done is closed
}

// freeze moves the active MemTable (if it holds rows) to the flush queue
// and returns the newest frozen MemTable, or nil when nothing waits for a
// flush.
// REQUIRES: w.mu held.
func (w *Writer) freeze() *frozenMem {
	if w.mem.rows > 0 {
		// INVARIANT: every WAL entry below nextWAL is in this MemTable or
		// in one frozen before it (write appends and adds under w.mu).
		w.frozen = append(w.frozen, &frozenMem{mem: w.mem, coversWAL: w.nextWAL - 1, done: make(chan struct{})})
		w.frozenBytes += w.mem.bytes
		w.mem = newMemtable(w.st)
	}
	if len(w.frozen) == 0 {
		return nil
	}
	return w.frozen[len(w.frozen)-1]
}

// flushThrough flushes the frozen MemTables, oldest first, until target's
// generation is published (by this call or by another flush) and returns
// that generation.
func (w *Writer) flushThrough(ctx context.Context, target *frozenMem) (*Generation, error) {
	// One flush at a time: generation numbers, manifest versions and
	// replay positions advance in freeze order.
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for {
		select {
		case <-target.done:
			return target.gen, nil
		default:
		}
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return nil, err
		}
		// target is not published, so the queue holds it: a frozen
		// MemTable leaves the queue only when published, under flushMu.
		head := w.frozen[0]
		w.mu.Unlock()
		if err := w.flushOne(ctx, head); err != nil {
			return nil, err
		}
	}
}

// flushOne writes f, the oldest frozen MemTable, as the shard's next
// generation and publishes it. It holds w.mu only to publish, so writes
// go on while the generation is built.
// REQUIRES: w.flushMu held; f is w.frozen[0].
func (w *Writer) flushOne(ctx context.Context, f *frozenMem) error {
	// w.manifest changes only here, under flushMu: reading it without
	// w.mu is safe.
	cur := w.manifest
	// Fencing is checked before the work (one request: any newer manifest
	// starts with the next version): a fenced writer's rows belong to the
	// new owner's replay, not to a generation.
	next := memwal.ShardManifestKey(w.shard, cur.GetVersion()+1)
	switch _, err := w.t.b.Attributes(ctx, next); {
	case err == nil:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.fail(ctx, fmt.Errorf("shard manifest version %d exists", cur.GetVersion()+1))
	case !storage.IsNotFound(err):
		return fmt.Errorf("lancewal: %s: %w", next, err)
	}
	gen := cur.GetCurrentGeneration()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	path := fmt.Sprintf("%s_gen_%d", hex.EncodeToString(rnd[:]), gen)
	gb := storage.Sub(w.t.b, memwal.GenerationDir(w.shard, path))
	g, err := w.writeGeneration(ctx, gb, gen, f.mem)
	if err != nil {
		return fmt.Errorf("lancewal: flush generation %d of shard %s: %w", gen, w.shard, err)
	}
	g.Path = path
	g.CoversWAL = f.coversWAL

	m := proto.Clone(cur).(*pb.ShardManifest)
	m.Version++
	m.ReplayAfterWalEntryPosition = g.CoversWAL
	m.WalEntryPositionLastSeen = g.CoversWAL
	m.CurrentGeneration = gen + 1
	m.Sstables = append(m.Sstables, &pb.SsTable{Generation: gen, Path: path, InMemoryBytes: proto.Uint64(uint64(f.mem.bytes)),
		PhysicalRows: proto.Uint64(uint64(g.Rows)), PrimaryKeyBytes: proto.Uint64(uint64(f.mem.pkBytes))})
	w.mu.Lock()
	err = w.err // abandoned or fenced while the generation was built
	w.mu.Unlock()
	if err != nil {
		return err
	}
	// The put runs without w.mu: writes wait for no request of the flush.
	if err := w.putManifest(ctx, m); err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		// The generation's directory is unreferenced: no reader sees it.
		if storage.IsAlreadyExists(err) {
			return w.fail(ctx, fmt.Errorf("shard manifest version %d is taken", m.GetVersion()))
		}
		return fmt.Errorf("lancewal: publish generation %d of shard %s: %w", gen, w.shard, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.manifest = m
	w.frozen = w.frozen[1:]
	w.frozenBytes -= f.mem.bytes
	f.gen = g
	close(f.done)
	w.signal()
	return nil
}

// startBackground starts the background flush of the frozen MemTables
// unless it runs already.
// REQUIRES: w.mu held; the writer is neither closing nor unusable.
func (w *Writer) startBackground() {
	if w.bgRunning || len(w.frozen) == 0 {
		return
	}
	w.bgRunning = true
	w.bgErr = nil
	w.bg.Add(1)
	go w.background()
}

// background flushes frozen MemTables until none is left or a flush
// fails; a failure stays in bgErr and the rows stay frozen (the next
// Flush, Close or full MemTable retries them).
func (w *Writer) background() {
	defer w.bg.Done()
	for {
		w.mu.Lock()
		if w.err != nil || len(w.frozen) == 0 {
			w.bgRunning = false
			w.signal()
			w.mu.Unlock()
			return
		}
		target := w.frozen[len(w.frozen)-1]
		w.mu.Unlock()
		if _, err := w.flushThrough(w.bgCtx, target); err != nil {
			w.mu.Lock()
			w.bgErr, w.bgRunning = err, false
			w.signal()
			w.mu.Unlock()
			return
		}
	}
}

// signal wakes the writes waiting for a flush to make room.
// REQUIRES: w.mu held.
func (w *Writer) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// latest returns, per key, the position of its newest write, in WAL order.
func (m *memtable) latest() (batch []int, row []int) {
	type pos struct{ b, r int }
	last := make(map[any]pos, m.rows)
	for bi, b := range m.batches {
		for r := 0; r < b.n; r++ {
			last[b.key(r)] = pos{bi, r}
		}
	}
	ps := make([]pos, 0, len(last))
	for _, p := range last {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].b != ps[j].b {
			return ps[i].b < ps[j].b
		}
		return ps[i].r < ps[j].r
	})
	for _, p := range ps {
		batch, row = append(batch, p.b), append(row, p.r)
	}
	return batch, row
}

// generationFields are the table's fields plus _tombstone with the next
// field id, the generation's schema (LanceDB matches it to the base by id).
func generationFields(st *state) []*pb.Field {
	var out []*pb.Field
	maxID := int32(-1)
	for _, c := range st.cols {
		out = append(out, proto.Clone(c.field).(*pb.Field))
		maxID = max(maxID, c.field.GetId())
	}
	for _, f := range st.read.Manifest.GetFields() {
		maxID = max(maxID, f.GetId())
	}
	return append(out, &pb.Field{Name: TombstoneColumn, Id: maxID + 1, ParentId: -1, LogicalType: "bool", Encoding: pb.Encoding_PLAIN})
}

// writeGeneration writes mem, a frozen MemTable, as generation gen's
// dataset under gb. It reads nothing that writes change.
func (w *Writer) writeGeneration(ctx context.Context, gb storage.Bucket, gen uint64, mem *memtable) (*Generation, error) {
	st := w.st
	v, err := table.FileVersion(st.read.Manifest)
	if err != nil {
		return nil, err
	}
	// One row per key, in the order of its newest write: the generation
	// never needs a deletion vector for in-generation duplicates.
	bis, ris := mem.latest()
	n := len(bis)
	cols := make([]*chunk, len(st.cols))
	for i, c := range st.cols {
		cols[i] = newChunk(c, n)
	}
	tomb := make([]bool, n)
	g := &Generation{Generation: gen, Rows: n}
	// Rows are gathered batch by batch (runs of one batch are contiguous
	// in the order above, which is batch-major).
	for start := 0; start < n; {
		end := start
		for end < n && bis[end] == bis[start] {
			end++
		}
		b := mem.batches[bis[start]]
		rows := ris[start:end]
		for i := range cols {
			t := b.cols[i].take(rows)
			appendChunk(cols[i], t)
		}
		for k, r := range rows {
			tomb[start+k] = b.tomb[r]
			if b.tomb[r] {
				g.Tombstones++
			}
		}
		start = end
	}
	fields := generationFields(st)
	batch := &file.Batch{NumRows: n}
	for _, c := range cols {
		batch.Columns = append(batch.Columns, c.fileArray())
	}
	batch.Columns = append(batch.Columns, boolArray(tomb))

	// 1. The data file.
	name := table.DataFileName()
	var buf bytes.Buffer
	fw, err := file.NewWriter(&buf, fields, file.WriterOptions{Version: v})
	if err != nil {
		return nil, err
	}
	if err := fw.Write(batch); err != nil {
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	if err := gb.Put(ctx, meta.DataKey(name), buf.Bytes()); err != nil {
		return nil, err
	}
	df := table.NewDataFile(name, v, fw)

	// 2. The maintained index copies, over the generation's own row
	// addresses (fragment 0).
	addrs := make([]uint64, n)
	for i := range addrs {
		addrs[i] = meta.RowAddr(0, uint32(i))
	}
	now := w.t.now()
	var ixs []*pb.IndexMetadata
	// The maintained indexes the table still has (LanceDB skips one it
	// dropped); OpenWriter refused any the writer cannot copy.
	for _, name := range st.maintained() {
		if st.inverted[name] != nil {
			ix, err := writeInvertedCopy(ctx, gb, st, name, batch.Columns, addrs)
			if err != nil {
				return nil, err
			}
			ixs = append(ixs, ix)
			continue
		}
		if isVectorIndex(st, name) {
			vc, err := maintainedVector(st, name)
			if err != nil {
				return nil, err
			}
			ix, err := writeVectorCopy(ctx, gb, vc, cols[vc.col], tomb, uint64(now.UnixMilli()))
			if err != nil {
				return nil, err
			}
			if ix != nil {
				ixs = append(ixs, ix)
			}
			continue
		}
		c, err := maintainedBTree(st, name)
		if err != nil {
			return nil, err
		}
		ci := -1
		for i, sc := range st.cols {
			if sc.field.GetId() == c.field.GetId() {
				ci = i
			}
		}
		e := &index.Entries{Values: batch.Columns[ci], Addrs: addrs}
		wr, err := index.WriteSegment(ctx, gb, index.KindBTree, c.field, e)
		if err != nil {
			return nil, fmt.Errorf("maintained index %s: %w", name, err)
		}
		like := meta.FindIndex(st.read.Indices, name)[0]
		ix, err := index.SegmentMetadata(name, like.GetFields(), index.KindBTree, like, 1, roaring.BitmapOf(0), wr, now)
		if err != nil {
			return nil, err
		}
		ixs = append(ixs, ix)
	}

	// 3. The generation's dataset, version 1.
	m := &pb.Manifest{
		Fields:        fields,
		Fragments:     []*pb.DataFragment{{Id: 0, Files: []*pb.DataFile{df}, PhysicalRows: uint64(n)}},
		Version:       1,
		Timestamp:     timestamppb.New(now),
		MaxFragmentId: proto.Uint32(0),
		WriterVersion: &pb.Manifest_WriterVersion{Library: commit.WriterLibrary, Version: commit.WriterVersion},
		DataFormat:    proto.Clone(st.read.Manifest.GetDataFormat()).(*pb.Manifest_DataStorageFormat),
	}
	meta.RecomputeFlags(m, 0, 0)
	if err := commit.CreateVersion1(ctx, gb, &meta.ManifestFile{Manifest: m, Indices: ixs}); err != nil {
		return nil, err
	}

	// 4. The primary-key sidecar and the bloom filter of every key written
	// (tombstones and overwritten writes included, as LanceDB's).
	var data, lookup bytes.Buffer
	pkCol := batch.Columns[st.pk]
	if _, _, err := index.WriteBTreeWith(&data, &lookup, st.cols[st.pk].field, &index.Entries{Values: pkCol, Addrs: offsets(n)}, index.PKIndexOptions); err != nil {
		return nil, fmt.Errorf("_pk_index: %w", err)
	}
	if err := gb.Put(ctx, "_pk_index/"+index.BTreeDataFile, data.Bytes()); err != nil {
		return nil, err
	}
	if err := gb.Put(ctx, "_pk_index/"+index.BTreeLookupFile, lookup.Bytes()); err != nil {
		return nil, err
	}
	if err := gb.Put(ctx, "bloom_filter.bin", mem.bloom.bytes()); err != nil {
		return nil, err
	}
	return g, nil
}

// offsets are row positions 0..n-1: the _pk_index's ids are positions in
// the generation's data file, not row addresses.
func offsets(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

func appendChunk(dst, src *chunk) {
	if dst.col.variable() {
		base := int64(len(dst.varbuf))
		dst.varbuf = append(dst.varbuf, src.varbuf...)
		for _, o := range src.offs[1:] {
			dst.offs = append(dst.offs, base+o)
		}
	} else {
		dst.fixed = append(dst.fixed, src.fixed...)
	}
	dst.valid = append(dst.valid, src.valid...)
	dst.n += src.n
}

func boolArray(bs []bool) *file.Array {
	return &file.Array{Type: file.DataType{Kind: file.KindBool}, Name: TombstoneColumn, Len: len(bs), Values: packBits(bs)}
}
