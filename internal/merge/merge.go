package merge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// TombstoneColumn marks a row of a generation as a delete of its key.
const TombstoneColumn = "_tombstone"

// Result is a landed merge.
type Result struct {
	Commit *commit.Result
	Shard  string
	// Generations merged; rows written to the new fragment; base rows
	// superseded (updated or deleted); keys deleted by tombstones.
	Generations []uint64
	Inserted    int
	Superseded  int
	Deleted     int
}

// genBatch is one fragment of one generation with the rows that win.
type genBatch struct {
	src  genSource
	rows []int // rows of the fragment that land in the base table
}

// genSource is where a generation's fragment is, to read its landing rows
// again when the new fragment is written. Only the key and tombstone
// columns are held from the first read: holding every column of every
// generation made the merge's peak memory grow with the generations.
type genSource struct {
	b storage.Bucket
	// dir is b's directory in the table's bucket, for errors.
	dir  string
	frag *pb.DataFragment
	gen  uint64
}

// winner is where the newest write of a key sits.
type winner struct {
	batch, row int32
	tombstone  bool
}

// Execute merges the job's generations into the base table and commits an
// Update that records the shard's new compacted generation in the same
// version, as Lance's MemWAL spec defines it. read must be the manifest
// file at job.ReadVersion.
//
// A merge that loses to another merger of the same shard fails with
// commit.ErrIncompatible: the caller skips it, never retries it.
func Execute(ctx context.Context, h *table.Handle, read *meta.ManifestFile, naming meta.Naming, job Job) (*Result, error) {
	res, err := execute(ctx, h, read, naming, job)
	// A cleanup that removed the read version took files this job reads:
	// a lost race, retried on the latest version.
	return res, table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", err)
}

func execute(ctx context.Context, h *table.Handle, read *meta.ManifestFile, naming meta.Naming, job Job) (*Result, error) {
	b := h.Bucket
	if read.Manifest.GetVersion() != job.ReadVersion {
		return nil, fmt.Errorf("merge: read state is version %d, job planned at %d", read.Manifest.GetVersion(), job.ReadVersion)
	}
	if err := meta.CheckWrite(read.Manifest); err != nil {
		return nil, err
	}
	if read.Manifest.GetWriterFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, fmt.Errorf("merge: the table uses stable row ids; merging into it would have to extend the row-id sequences, which compactord does not do yet")
	}
	pk, err := primaryKey(read.Manifest)
	if err != nil {
		return nil, err
	}
	version, err := table.FileVersion(read.Manifest)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}

	// 1. The generations, oldest first: the newest write of a key wins.
	// Progress counts their rows and bytes as they are read, then the
	// base rows whose keys are scanned (the caller names the phase; the
	// generations' rows are the shard manifest's, when every generation
	// records them).
	rep := progress.From(ctx)
	if gr := jobRows(job); gr > 0 {
		rep.Grow(progress.Units{Rows: gr + baseRows(read.Manifest.GetFragments())})
	}
	var gens [][]genFragment
	n := 0
	for _, sst := range job.Generations {
		gb, err := readGeneration(ctx, b, job.Shard, sst, pk, rep)
		if err != nil {
			return nil, err
		}
		for _, g := range gb {
			n += len(g.live)
		}
		gens = append(gens, gb)
	}
	var batches []genBatch
	keys := newKeyTable(n)
	for _, gb := range gens {
		for _, g := range gb {
			bi := int32(len(batches))
			batches = append(batches, genBatch{src: g.src})
			for _, r := range g.live {
				keys.put(&g.keys, r, winner{batch: bi, row: int32(r), tombstone: g.tomb(r)})
			}
		}
	}
	gens = nil

	// 2. Base rows those keys supersede, by a scan of the key column.
	// (The primary-key btree path comes with index catch-up.)
	scans, err := scanBase(ctx, b, read.Manifest.GetFragments(), pk, keys)
	if err != nil {
		return nil, err
	}
	nSuperseded := 0
	for _, sc := range scans {
		nSuperseded += int(sc.hits.GetCardinality())
	}

	// 3. The rows that land, in the order their keys were first written.
	deletedKeys := 0
	for _, w := range keys.ws {
		if w.tombstone {
			deletedKeys++
			continue
		}
		batches[w.batch].rows = append(batches[w.batch].rows, int(w.row))
	}

	txn := commit.NewTransaction(read.Manifest.GetVersion())
	up := &pb.Transaction_Update{UpdateMode: pb.Transaction_REWRITE_ROWS}
	var files []string
	res := &Result{Shard: job.Shard, Deleted: deletedKeys, Superseded: nSuperseded}
	for _, s := range job.Generations {
		res.Generations = append(res.Generations, s.GetGeneration())
	}

	inserted := 0
	for _, g := range batches {
		inserted += len(g.rows)
	}
	if inserted > 0 {
		frag, key, err := writeFragment(ctx, b, read.Manifest, version, batches, inserted)
		if err != nil {
			return nil, err
		}
		files = append(files, key)
		up.NewFragments = []*pb.DataFragment{frag}
	}
	res.Inserted = inserted

	// 4. Deletion vectors of the superseded base rows, fragments in id
	// order.
	for _, sc := range scans {
		if sc.hits.IsEmpty() {
			continue
		}
		f, id := sc.frag, sc.frag.GetId()
		dv := sc.deleted
		dv.Or(sc.hits)
		if dv.GetCardinality() == f.GetPhysicalRows() {
			up.RemovedFragmentIds = append(up.RemovedFragmentIds, id)
			continue
		}
		df, key, data, err := deletion.Encode(id, dv, read.Manifest.GetVersion())
		if err != nil {
			return nil, err
		}
		if err := b.Put(ctx, key, data); err != nil {
			return nil, fmt.Errorf("merge: write %s: %w", key, err)
		}
		files = append(files, key)
		nf := proto.Clone(f).(*pb.DataFragment)
		nf.DeletionFile = df
		up.UpdatedFragments = append(up.UpdatedFragments, nf)
	}

	shard, err := meta.ParseUUID(job.Shard)
	if err != nil {
		return nil, err
	}
	up.CompactedSstables = []*pb.CompactedSsTable{{ShardId: shard, Generation: job.Through()}}
	// As a LanceDB merge-insert does: every field may have changed.
	for _, f := range read.Manifest.GetFields() {
		up.FieldsForPreservingFragBitmap = append(up.FieldsForPreservingFragBitmap, uint32(f.GetId()))
	}
	// No inserted-key filter yet: Lance's key hashing is not matched, and
	// a filter that hashed differently would hide a real collision from a
	// LanceDB merge-insert. Without one, LanceDB retries against us.
	txn.Operation = &pb.Transaction_Update_{Update: up}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: files})
	if err != nil {
		return nil, err
	}
	res.Commit = cr
	return res, nil
}

// jobRows is the rows of the job's generations as their shard manifest
// records them; 0 (unknown) when one does not.
func jobRows(job Job) int64 {
	var n int64
	for _, s := range job.Generations {
		if s.PhysicalRows == nil {
			return 0
		}
		n += int64(s.GetPhysicalRows())
	}
	return n
}

// genFragment is one fragment of a generation, decoded.
type genFragment struct {
	src   genSource
	keys  keyColumn
	live  []int // rows not masked by the generation's deletion vector
	tombs *file.Array
}

func (g genFragment) tomb(r int) bool { return g.tombs != nil && g.tombs.IsValid(r) && g.tombs.Bool(r) }

// readGeneration reads a flushed generation (a Lance dataset of its own
// under the shard directory) with its deletion vectors applied.
func readGeneration(ctx context.Context, b storage.Bucket, shard string, sst *pb.SsTable, pk *pb.Field, rep *progress.Reporter) ([]genFragment, error) {
	gdir := memwal.GenerationDir(shard, sst.GetPath())
	gb := storage.Sub(b, gdir)
	gm, _, err := meta.ReadLatest(ctx, gb)
	if err != nil {
		// A corrupt manifest is named by its path from the table's root
		// (the generation's reader names it from the generation's).
		var ce *meta.CorruptError
		if errors.As(err, &ce) && !strings.HasPrefix(ce.Key, gdir) {
			err = &meta.CorruptError{Key: gdir + ce.Key, Err: ce.Err}
		}
		return nil, fmt.Errorf("merge: generation %d of shard %s (%s): %w", sst.GetGeneration(), shard, sst.GetPath(), err)
	}
	var out []genFragment
	for _, f := range gm.Manifest.GetFragments() {
		lf, name, done, err := openFragment(ctx, gb, gdir, f)
		if err != nil {
			return nil, fmt.Errorf("merge: generation %d: %w", sst.GetGeneration(), err)
		}
		cols := []string{pk.GetName()}
		if lf.Schema.Field(TombstoneColumn) != nil {
			cols = append(cols, TombstoneColumn)
		}
		var batch *file.Batch
		if lf.Schema.Field(pk.GetName()) != nil {
			batch, err = lf.ReadAll(cols)
		} else {
			batch = &file.Batch{}
		}
		done()
		if err != nil {
			return nil, fmt.Errorf("merge: generation %d fragment %d: %w", sst.GetGeneration(), f.GetId(), named(name, err))
		}
		dv, err := deleted(ctx, gb, gdir, f)
		if err != nil {
			return nil, fmt.Errorf("merge: generation %d: %w", sst.GetGeneration(), err)
		}
		kc := batch.Column(pk.GetName())
		if kc == nil {
			return nil, fmt.Errorf("merge: generation %d has no primary-key column %q", sst.GetGeneration(), pk.GetName())
		}
		var kt file.DataType
		for _, fl := range batch.Fields {
			if fl.Name == pk.GetName() {
				kt = fl.Type
			}
		}
		keys, err := newKeyColumn(kc, kt)
		if err != nil {
			return nil, fmt.Errorf("merge: generation %d: %w", sst.GetGeneration(), err)
		}
		g := genFragment{src: genSource{b: gb, dir: gdir, frag: f, gen: sst.GetGeneration()}, keys: keys, tombs: batch.Column(TombstoneColumn), live: make([]int, 0, batch.NumRows)}
		for i := 0; i < batch.NumRows; i++ {
			if dv.Contains(uint32(i)) {
				continue
			}
			if !kc.IsValid(i) {
				return nil, fmt.Errorf("merge: generation %d: row %d has a null primary key", sst.GetGeneration(), i)
			}
			g.live = append(g.live, i)
		}
		out = append(out, g)
		var size int64
		for _, df := range f.GetFiles() {
			size += int64(df.GetFileSizeBytes())
		}
		rep.Add(int64(f.GetPhysicalRows()), size)
	}
	return out, nil
}

// writeFragment writes the landing rows as one new fragment with the base
// table's schema (the generation's _tombstone column is dropped; fields
// match by name, which the generation shares with the base).
func writeFragment(ctx context.Context, b storage.Bucket, m *pb.Manifest, v file.Version, batches []genBatch, rows int) (*pb.DataFragment, string, error) {
	var top []*pb.Field
	for _, f := range m.GetFields() {
		if f.GetParentId() == -1 {
			top = append(top, f)
		}
	}
	// Streamed to the bucket: the encoded file is never held whole.
	name := table.DataFileName()
	key := meta.DataKey(name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wc, err := b.NewWriter(wctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("merge: write %s: %w", key, err)
	}
	ok := false
	defer func() {
		if !ok {
			// Closed after its context is canceled, the write is
			// abandoned: nothing is published.
			cancel()
			_ = wc.Close()
		}
	}()
	bw := bufio.NewWriterSize(wc, 1<<20)
	w, err := file.NewWriter(bw, m.GetFields(), file.WriterOptions{Version: v})
	if err != nil {
		return nil, "", fmt.Errorf("merge: %w", err)
	}
	names := make([]string, len(top))
	for i, f := range top {
		names[i] = f.GetName()
	}
	for _, g := range batches {
		if len(g.rows) == 0 {
			continue
		}
		out, err := takeRows(ctx, g, names)
		if err != nil {
			return nil, "", err
		}
		if err := w.Write(out); err != nil {
			return nil, "", fmt.Errorf("merge: encode: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", fmt.Errorf("merge: encode: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, "", fmt.Errorf("merge: write %s: %w", key, err)
	}
	ok = true
	if err := wc.Close(); err != nil {
		return nil, "", fmt.Errorf("merge: write %s: %w", key, err)
	}
	df := table.NewDataFile(name, v, w)
	return &pb.DataFragment{Files: []*pb.DataFile{df}, PhysicalRows: uint64(rows)}, key, nil
}

// takeRows reads the landing rows of one generation fragment, the base
// table's top-level columns only.
func takeRows(ctx context.Context, g genBatch, names []string) (*file.Batch, error) {
	lf, name, done, err := openFragment(ctx, g.src.b, g.src.dir, g.src.frag)
	if err != nil {
		return nil, fmt.Errorf("merge: generation %d: %w", g.src.gen, err)
	}
	defer done()
	for _, n := range names {
		if lf.Schema.Field(n) == nil {
			return nil, fmt.Errorf("merge: a generation has no column %q", n)
		}
	}
	rows := make([]uint64, len(g.rows))
	for i, r := range g.rows {
		rows[i] = uint64(r)
	}
	tb, err := lf.Take(names, rows)
	if err != nil {
		return nil, fmt.Errorf("merge: generation %d fragment %d: %w", g.src.gen, g.src.frag.GetId(), named(name, err))
	}
	return &file.Batch{NumRows: len(g.rows), Columns: tb.Columns}, nil
}
