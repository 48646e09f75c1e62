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
// the MemTable is empty (nil, nil).
func (w *Writer) Flush(ctx context.Context) (*Generation, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	return w.flush(ctx)
}

// REQUIRES: w.mu held.
func (w *Writer) flush(ctx context.Context) (*Generation, error) {
	if w.mem.rows == 0 {
		return nil, nil
	}
	// Fencing is checked before the work (one request: any newer manifest
	// starts with the next version): a fenced writer's rows belong to the
	// new owner's replay, not to a generation.
	next := memwal.ShardManifestKey(w.shard, w.manifest.GetVersion()+1)
	switch _, err := w.t.b.Attributes(ctx, next); {
	case err == nil:
		return nil, w.fail(ctx, fmt.Errorf("shard manifest version %d exists", w.manifest.GetVersion()+1))
	case !storage.IsNotFound(err):
		return nil, fmt.Errorf("lancewal: %s: %w", next, err)
	}
	gen := w.manifest.GetCurrentGeneration()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	path := fmt.Sprintf("%s_gen_%d", hex.EncodeToString(rnd[:]), gen)
	gb := storage.Sub(w.t.b, memwal.GenerationDir(w.shard, path))
	g, err := w.writeGeneration(ctx, gb, gen)
	if err != nil {
		return nil, fmt.Errorf("lancewal: flush generation %d of shard %s: %w", gen, w.shard, err)
	}
	g.Path = path
	g.CoversWAL = w.nextWAL - 1

	m := proto.Clone(w.manifest).(*pb.ShardManifest)
	m.Version++
	m.ReplayAfterWalEntryPosition = g.CoversWAL
	m.WalEntryPositionLastSeen = g.CoversWAL
	m.CurrentGeneration = gen + 1
	m.Sstables = append(m.Sstables, &pb.SsTable{Generation: gen, Path: path, InMemoryBytes: proto.Uint64(uint64(w.mem.bytes)),
		PhysicalRows: proto.Uint64(uint64(g.Rows)), PrimaryKeyBytes: proto.Uint64(uint64(w.mem.pkBytes))})
	if err := w.putManifest(ctx, m); err != nil {
		// The generation's directory is unreferenced: no reader sees it.
		if storage.IsAlreadyExists(err) {
			return nil, w.fail(ctx, fmt.Errorf("shard manifest version %d is taken", m.GetVersion()))
		}
		return nil, fmt.Errorf("lancewal: publish generation %d of shard %s: %w", gen, w.shard, err)
	}
	w.manifest = m
	w.mem = newMemtable(w.st)
	return g, nil
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

func (w *Writer) writeGeneration(ctx context.Context, gb storage.Bucket, gen uint64) (*Generation, error) {
	st := w.st
	v, err := table.FileVersion(st.read.Manifest)
	if err != nil {
		return nil, err
	}
	// One row per key, in the order of its newest write: the generation
	// never needs a deletion vector for in-generation duplicates.
	bis, ris := w.mem.latest()
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
		b := w.mem.batches[bis[start]]
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
	if err := gb.Put(ctx, "bloom_filter.bin", w.mem.bloom.bytes()); err != nil {
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
