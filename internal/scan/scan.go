// Package scan reads the rows of a Lance table version: every fragment in
// order, its data files read together column by column with the file
// reader's streams (memory bounded by the pages around one batch), deletion
// vectors applied, and the top-level fields projected. Write prints the
// rows as JSON lines (the `table scan` command).
package scan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// DefaultBatchRows is the rows per decoded batch when Options leaves it 0.
const DefaultBatchRows = 4096

// Options select what a scan reads.
type Options struct {
	// Version is the version to read; 0 is the latest.
	Version uint64
	// Columns are top-level field names, in output order; nil is every
	// field in schema order.
	Columns []string
	// BatchRows bounds the rows decoded at once (DefaultBatchRows if 0).
	BatchRows int
	// Views hands Batches' callback the flat columns (fixed width, and
	// fixed-size lists of them: vectors) as views of the decoded pages,
	// valid only until it returns, instead of copies: for a callback that
	// copies what it keeps. A string column's offsets then need not start
	// at 0.
	Views bool
}

// Column is one projected top-level field.
type Column struct {
	Name  string
	Field *pb.Field
}

// Batch is a run of rows of one fragment. Columns[i] is Columns' field i
// (nil when the fragment has no data for it: every value is null); File
// holds the file schema node it was decoded with. Live lists the rows of
// the batch not deleted, ascending.
type Batch struct {
	Fragment uint64
	// Offset is the row offset in the fragment of the batch's first row.
	Offset  uint64
	NumRows int
	Columns []*file.Array
	Files   []*file.Field
	Live    []int
}

// Table is a version opened for scanning.
type Table struct {
	b        storage.Bucket
	Manifest *pb.Manifest
	Columns  []Column
	// names maps every manifest field id to its name (nested ones too).
	names     map[int32]string
	batchRows int
	views     bool
}

// Open reads the version's manifest and resolves the projection.
func Open(ctx context.Context, b storage.Bucket, o Options) (*Table, error) {
	v, n, err := meta.Latest(ctx, b)
	if err != nil {
		return nil, err
	}
	if o.Version != 0 {
		if o.Version > v {
			return nil, fmt.Errorf("version %d does not exist (latest is %d)", o.Version, v)
		}
		v = o.Version
	}
	mf, err := meta.ReadVersion(ctx, b, n, v)
	if err != nil {
		return nil, err
	}
	return OpenManifest(b, mf.Manifest, o)
}

// OpenManifest is Open on a manifest already read (o.Version is ignored):
// a writer scans exactly the version it plans against.
func OpenManifest(b storage.Bucket, m *pb.Manifest, o Options) (*Table, error) {
	v := m.GetVersion()
	if err := meta.CheckRead(m); err != nil {
		return nil, err
	}
	t := &Table{b: b, Manifest: m, names: map[int32]string{}, batchRows: o.BatchRows, views: o.Views}
	if t.batchRows <= 0 {
		t.batchRows = DefaultBatchRows
	}
	var top []Column
	for _, f := range m.GetFields() {
		t.names[f.GetId()] = f.GetName()
		if f.GetParentId() < 0 {
			top = append(top, Column{Name: f.GetName(), Field: f})
		}
	}
	if o.Columns == nil {
		t.Columns = top
		return t, nil
	}
	seen := map[string]bool{}
	for _, c := range o.Columns {
		i := slices.IndexFunc(top, func(x Column) bool { return x.Name == c })
		if i < 0 {
			var all []string
			for _, x := range top {
				all = append(all, x.Name)
			}
			return nil, fmt.Errorf("no column %q in version %d (columns: %v)", c, v, all)
		}
		if seen[c] {
			return nil, fmt.Errorf("column %q given twice", c)
		}
		seen[c] = true
		t.Columns = append(t.Columns, top[i])
	}
	return t, nil
}

// Version is the version being read.
func (t *Table) Version() uint64 { return t.Manifest.GetVersion() }

// descendants maps each top-level field id to itself and every field id
// below it.
func (t *Table) descendants() map[int32]int32 {
	parent := map[int32]int32{}
	for _, f := range t.Manifest.GetFields() {
		parent[f.GetId()] = f.GetParentId()
	}
	top := map[int32]int32{}
	for _, f := range t.Manifest.GetFields() {
		id := f.GetId()
		for steps := 0; steps < 1000; steps++ {
			p, ok := parent[id]
			if !ok || p < 0 {
				break
			}
			id = p
		}
		top[f.GetId()] = id
	}
	return top
}

// Batches calls fn for every batch of every fragment, in manifest order.
// A batch is only valid during the call.
func (t *Table) Batches(ctx context.Context, fn func(*Batch) error) error {
	topOf := t.descendants()
	for _, frag := range t.Manifest.GetFragments() {
		if err := t.fragment(ctx, frag, topOf, fn); err != nil {
			return fmt.Errorf("fragment %d: %w", frag.GetId(), err)
		}
	}
	return nil
}

type source struct {
	df     *pb.DataFile
	f      *file.File
	ra     io.ReaderAt
	stream *file.Stream
	// cols[i] is the index into the stream's batch of the table's
	// column i, or -1.
	cols []int
}

func (t *Table) fragment(ctx context.Context, frag *pb.DataFragment, topOf map[int32]int32, fn func(*Batch) error) error {
	// Which data file holds each projected column.
	want := map[int32]int{}
	for i, c := range t.Columns {
		want[c.Field.GetId()] = i
	}
	where := make([]int, len(t.Columns))
	for i := range where {
		where[i] = -1
	}
	for fi, df := range frag.GetFiles() {
		for _, id := range df.GetFields() {
			if id < 0 {
				continue // a dropped field's tombstone
			}
			top, ok := topOf[id]
			if !ok {
				continue
			}
			if ci, ok := want[top]; ok && where[ci] < 0 {
				where[ci] = fi
			}
		}
	}
	var srcs []*source
	defer func() {
		for _, s := range srcs {
			if c, ok := s.ra.(io.Closer); ok {
				_ = c.Close()
			}
		}
	}()
	colFile := make([]*file.Field, len(t.Columns))
	colSrc := make([]int, len(t.Columns))
	for i := range colSrc {
		colSrc[i] = -1
	}
	bySrc := map[int]*source{}
	for ci, fi := range where {
		if fi < 0 {
			continue
		}
		s := bySrc[fi]
		if s == nil {
			df := frag.GetFiles()[fi]
			if df.BaseId != nil {
				return fmt.Errorf("data file %s is in another base path (base_id %d); compactord does not read those yet", df.GetPath(), df.GetBaseId())
			}
			key := meta.DataKey(df.GetPath())
			size := int64(df.GetFileSizeBytes())
			if size == 0 {
				a, err := t.b.Attributes(ctx, key)
				if err != nil {
					return fmt.Errorf("data file %s: %w", df.GetPath(), err)
				}
				size = a.Size
			}
			ra := storage.NewReaderAt(ctx, t.b, key, size)
			s = &source{df: df, ra: ra}
			srcs = append(srcs, s)
			f, err := file.Open(ra, size)
			if err != nil {
				return fmt.Errorf("data file %s: %w", df.GetPath(), err)
			}
			s.f = f
			bySrc[fi] = s
		}
		mf := t.Columns[ci].Field
		var ff *file.Field
		for _, x := range s.f.Schema.Fields {
			if x.ID == mf.GetId() {
				ff = x
				break
			}
		}
		if ff == nil {
			ff = s.f.Schema.Field(mf.GetName())
		}
		if ff == nil {
			return fmt.Errorf("data file %s lists field %d (%s) but its schema lacks it", s.df.GetPath(), mf.GetId(), mf.GetName())
		}
		colFile[ci] = ff
		colSrc[ci] = slices.Index(srcs, s)
	}
	phys := frag.GetPhysicalRows()
	for _, s := range srcs {
		if phys == 0 {
			phys = s.f.NumRows()
		}
		if s.f.NumRows() != phys {
			return fmt.Errorf("data file %s has %d rows, the fragment %d", s.df.GetPath(), s.f.NumRows(), phys)
		}
		var names []string
		s.cols = make([]int, len(t.Columns))
		for ci := range t.Columns {
			s.cols[ci] = -1
			if colSrc[ci] >= 0 && srcs[colSrc[ci]] == s {
				s.cols[ci] = len(names)
				names = append(names, colFile[ci].Name)
			}
		}
		st, err := s.f.Stream(names, t.batchRows)
		if err != nil {
			return fmt.Errorf("data file %s: %w", s.df.GetPath(), err)
		}
		s.stream = st
	}
	if phys == 0 && len(srcs) == 0 {
		// No projected column has data here; the row count is the
		// fragment's.
		phys = frag.GetPhysicalRows()
	}
	deleted, err := deletion.Read(ctx, t.b, frag.GetId(), frag.GetDeletionFile(), phys)
	if err != nil {
		return err
	}
	b := &Batch{Fragment: frag.GetId(), Columns: make([]*file.Array, len(t.Columns)), Files: colFile}
	for off := uint64(0); off < phys; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(uint64(t.batchRows), phys-off)
		for _, s := range srcs {
			next := s.stream.Next
			if t.views {
				next = s.stream.NextView
			}
			sb, err := next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("data file %s: %w", s.df.GetPath(), err)
			}
			if uint64(sb.NumRows) != n {
				return fmt.Errorf("data file %s: batch of %d rows, want %d", s.df.GetPath(), sb.NumRows, n)
			}
			for ci, k := range s.cols {
				if k >= 0 {
					b.Columns[ci] = sb.Columns[k]
				}
			}
		}
		b.Offset, b.NumRows = off, int(n)
		b.Live = b.Live[:0]
		for r := 0; r < int(n); r++ {
			if !deleted.Contains(uint32(off) + uint32(r)) {
				b.Live = append(b.Live, r)
			}
		}
		if len(b.Live) > 0 {
			if err := fn(b); err != nil {
				return err
			}
		}
		off += n
	}
	return nil
}

// Write prints every live row as one JSON object per line and returns the
// number of rows written.
func (t *Table) Write(ctx context.Context, w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	keys := make([][]byte, len(t.Columns))
	for i, c := range t.Columns {
		k := AppendString(nil, []byte(c.Name))
		keys[i] = append(k, ':')
	}
	var rows int64
	var line []byte
	err := t.Batches(ctx, func(b *Batch) error {
		for _, r := range b.Live {
			line = append(line[:0], '{')
			for i, a := range b.Columns {
				if i > 0 {
					line = append(line, ',')
				}
				line = append(line, keys[i]...)
				if a == nil {
					line = append(line, "null"...)
					continue
				}
				line = AppendValue(line, a, r, t.names, b.Files[i])
			}
			line = append(line, '}', '\n')
			if _, err := bw.Write(line); err != nil {
				return err
			}
			rows++
		}
		return nil
	})
	if err != nil {
		return rows, err
	}
	return rows, bw.Flush()
}
