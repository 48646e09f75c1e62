package benchsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/RoaringBitmap/roaring/v2"
	"golang.org/x/sync/errgroup"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// CompactSchema is the schema of the compaction data set: the one
// internal/compact's benchmarks use, about 34 bytes a row in Snappy
// Parquet (the note column is mostly incompressible).
const CompactSchema = "id:int64,cat:string,val:float64,note:string"

// MergeSchema is the schema of the merge data set (internal/merge's
// benchmark).
const MergeSchema = "id:int64,cat:string,val:float64"

// DeleteModulo is the deletion rule of the "10 % deleted" data sets: rows
// whose id is a multiple of it are deleted. A peer expresses the same
// filter as WHERE id % 10 <> 0. Every row group holds deleted rows, as
// with random deletions, so no row group can be copied verbatim.
const DeleteModulo = 10

// GenSpec describes a generated compaction table.
type GenSpec struct {
	// Dir is the table's directory (file://Dir).
	Dir string
	// Fragments and RowsPerFragment shape the data.
	Fragments       int
	RowsPerFragment int
	// Parallelism bounds the fragments written at once.
	Parallelism int
	// Seed makes the data reproducible.
	Seed uint64
}

// TableInfo describes a generated table.
type TableInfo struct {
	URL     string   `json:"url"`
	Version uint64   `json:"version"`
	Rows    uint64   `json:"rows"`
	Bytes   uint64   `json:"bytes"`
	Files   []string `json:"files"` // data files, absolute paths, in fragment order
	// SSTable is the flushed SSTable of a merge data set (absolute path).
	SSTable string `json:"sstable,omitempty"`
	Upserts uint64 `json:"upserts,omitempty"`
}

func openTable(ctx context.Context, dir string) (*ops.Table, storage.Bucket, error) {
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		return nil, nil, err
	}
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return ops.NewTable(b, c, nil, nil), b, nil
}

// compactRow is row k of the compaction data set; rng draws the random
// columns.
func compactRow(rng *rand.Rand, k int64) table.Row {
	return table.Row{k, fmt.Sprintf("c%d", rng.IntN(16)), rng.Float64() * 1000, fmt.Sprintf("note-%x-%d", rng.Uint64(), k)}
}

// GenCompact writes a table of spec.Fragments fragments with ids in
// ascending order across fragments, committed as one append (ops.Append's
// uniqueness scan would make generation quadratic).
func GenCompact(ctx context.Context, spec GenSpec) (*TableInfo, error) {
	s, err := table.ParseSchema(CompactSchema, []string{"id"})
	if err != nil {
		return nil, err
	}
	return genTable(ctx, spec, s, compactRow)
}

func genTable(ctx context.Context, spec GenSpec, s *pb.Schema, row func(*rand.Rand, int64) table.Row) (*TableInfo, error) {
	if spec.Fragments < 1 || spec.RowsPerFragment < 1 {
		return nil, fmt.Errorf("generate: need at least one fragment of one row, got %d of %d", spec.Fragments, spec.RowsPerFragment)
	}
	t, b, err := openTable(ctx, spec.Dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	m, err := t.Create(ctx, s)
	if err != nil {
		return nil, err
	}
	frags := make([]*pb.Fragment, spec.Fragments)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, spec.Parallelism))
	for i := range spec.Fragments {
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(spec.Seed, uint64(i)))
			w, err := table.NewFragmentWriter(gctx, b, s)
			if err != nil {
				return err
			}
			batch := make([]table.Row, 0, table.ScanBatch)
			first := int64(i) * int64(spec.RowsPerFragment)
			for k := first; k < first+int64(spec.RowsPerFragment); k++ {
				batch = append(batch, row(rng, k))
				if len(batch) == cap(batch) {
					if err := w.Write(batch); err != nil {
						return err
					}
					batch = batch[:0]
				}
			}
			if err := w.Write(batch); err != nil {
				return err
			}
			f, err := w.Close()
			frags[i] = f
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("generate %s: %w", spec.Dir, err)
	}
	txn := t.NewTxn(m.Version)
	txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
	res, err := t.CommitOrClean(ctx, txn, nil)
	if err != nil {
		return nil, err
	}
	return describe(spec.Dir, res.Manifest), nil
}

func describe(dir string, m *pb.Manifest) *TableInfo {
	info := &TableInfo{URL: "file://" + dir, Version: m.Version}
	for _, f := range m.Fragments {
		info.Rows += table.LiveRows(f)
		info.Bytes += f.GetDataFile().GetSizeBytes()
		info.Files = append(info.Files, filepath.Join(dir, filepath.FromSlash(f.GetDataFile().GetPath())))
	}
	return info
}

// DeleteEveryTenth commits one Delete of the rows whose id is a multiple of
// DeleteModulo in every fragment of the table at dir. It relies on the
// generated layout (ids ascending from 0, RowsPerFragment per fragment, in
// fragment order), so deletion offsets are computed, not scanned.
func DeleteEveryTenth(ctx context.Context, dir string, rowsPerFragment int) (*TableInfo, error) {
	t, b, err := openTable(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	op := &pb.Delete{}
	var files []string
	for i, f := range m.Fragments {
		if f.PhysicalRows != uint64(rowsPerFragment) {
			return nil, fmt.Errorf("fragment %d holds %d rows, want %d: not a generated table", f.Id, f.PhysicalRows, rowsPerFragment)
		}
		first := uint64(i) * uint64(rowsPerFragment)
		bm := roaring.New()
		// The first multiple of DeleteModulo at or after first.
		for id := (first + DeleteModulo - 1) / DeleteModulo * DeleteModulo; id < first+f.PhysicalRows; id += DeleteModulo {
			bm.Add(uint32(id - first))
		}
		df, err := table.WriteDeletionFile(ctx, b, f.Id, m.Version, bm)
		if err != nil {
			return nil, err
		}
		files = append(files, df.Path)
		op.UpdatedFragments = append(op.UpdatedFragments, &pb.Fragment{Id: f.Id, DataFile: f.DataFile, PhysicalRows: f.PhysicalRows, DeletionFile: df})
	}
	txn := t.NewTxn(m.Version)
	txn.Operation = &pb.Transaction_Delete{Delete: op}
	res, err := t.CommitOrClean(ctx, txn, files)
	if err != nil {
		return nil, err
	}
	return describe(dir, res.Manifest), nil
}

// MergeSpec describes a generated merge data set: a base table of
// BaseRows rows (ids 0..BaseRows-1) and one flushed SSTable of Upserts
// upserts of existing keys spread evenly over it.
type MergeSpec struct {
	Dir             string
	BaseRows        int
	RowsPerFragment int
	Upserts         int
	Parallelism     int
	Seed            uint64
}

func mergeRow(_ *rand.Rand, k int64) table.Row {
	return table.Row{k, fmt.Sprintf("c%d", k%8), float64(k)}
}

// GenMerge writes the base table, configures a one-shard MemWAL and
// flushes the upserts to one SSTable (generation 1), ready for
// `compactord merge`.
func GenMerge(ctx context.Context, spec MergeSpec) (*TableInfo, error) {
	s, err := table.ParseSchema(MergeSchema, []string{"id"})
	if err != nil {
		return nil, err
	}
	if spec.Upserts < 1 || spec.Upserts > spec.BaseRows {
		return nil, fmt.Errorf("generate merge: upserts must be in [1, base rows], got %d", spec.Upserts)
	}
	frags := (spec.BaseRows + spec.RowsPerFragment - 1) / spec.RowsPerFragment
	if spec.BaseRows%spec.RowsPerFragment != 0 {
		return nil, fmt.Errorf("generate merge: base rows %d must be a multiple of rows per fragment %d", spec.BaseRows, spec.RowsPerFragment)
	}
	if _, err := genTable(ctx, GenSpec{Dir: spec.Dir, Fragments: frags, RowsPerFragment: spec.RowsPerFragment, Parallelism: spec.Parallelism, Seed: spec.Seed}, s, mergeRow); err != nil {
		return nil, err
	}
	return flushUpserts(ctx, spec.Dir, s, spec.BaseRows, spec.Upserts, func(_ *rand.Rand, id int64) table.Row {
		return table.Row{id, "upserted", float64(-id)}
	})
}

// GenUpserts clones the compaction table at from (hard links) into dir and
// flushes upserts of existing keys spread evenly over its rows: a merge on
// the large table, for the peak-RSS check.
func GenUpserts(ctx context.Context, from, dir string, upserts int) (*TableInfo, error) {
	if err := cloneTree(ctx, from, dir); err != nil {
		return nil, err
	}
	_, b, err := openTable(ctx, dir)
	if err != nil {
		return nil, err
	}
	m, err := table.ReadLatest(ctx, b)
	_ = b.Close()
	if err != nil {
		return nil, err
	}
	var rows uint64
	for _, f := range m.Fragments {
		rows += f.PhysicalRows
	}
	if upserts < 1 || uint64(upserts) > rows {
		return nil, fmt.Errorf("generate upserts: upserts must be in [1, %d], got %d", rows, upserts)
	}
	return flushUpserts(ctx, dir, m.Schema, int(rows), upserts, compactRow)
}

// flushUpserts configures a one-shard MemWAL on the table at dir and
// flushes n upserts of the keys 0, stride, 2·stride, ... (stride =
// rows/n) to one SSTable, generation 1, ready for `compactord merge`.
func flushUpserts(ctx context.Context, dir string, s *pb.Schema, rows, n int, row func(*rand.Rand, int64) table.Row) (*TableInfo, error) {
	t, b, err := openTable(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if _, err := memwal.Configure(ctx, t, []string{"s0"}, nil); err != nil {
		return nil, err
	}
	w, err := memwal.NewWriter(memwal.Config{Shard: "s0", Schema: s}, b)
	if err != nil {
		return nil, err
	}
	if _, err := w.Claim(ctx); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	stride := rows / n
	const batch = 50_000
	recs := make([]memwal.Record, 0, batch)
	for i := range n {
		recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: row(rng, int64(i*stride))})
		if len(recs) == batch || i == n-1 {
			if _, err := w.Append(ctx, recs); err != nil {
				return nil, err
			}
			recs = recs[:0]
		}
	}
	fr, err := w.Flush(ctx)
	if err != nil {
		return nil, err
	}
	if len(fr.SSTables) != 1 {
		return nil, fmt.Errorf("generate upserts: flush wrote %d SSTables, want 1", len(fr.SSTables))
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	info := describe(dir, m)
	info.SSTable = filepath.Join(dir, filepath.FromSlash(fr.SSTables[0].Path))
	info.Upserts = uint64(n)
	return info, nil
}
