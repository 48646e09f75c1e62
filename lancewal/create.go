package lancewal

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Column describes a column of a new table. Type is a Lance logical type:
// bool, int8 … int64, uint8 … uint64, float, double, string,
// large_string, binary, large_binary, date32:day or timestamp:<unit>:-
// (s, ms, us, ns; or a zone instead of -).
type Column struct {
	Name     string
	Type     string
	Nullable bool
}

// CreateTable creates an empty Lance table at url (see OpenTable) with the
// columns and the primary key key (not nullable), in file format 2.2, as
// LanceDB creates one. It fails if a table exists there.
func CreateTable(ctx context.Context, url string, cols []Column, key string) (*Table, error) {
	fields := make([]*pb.Field, 0, len(cols))
	seen := map[string]bool{}
	for i, c := range cols {
		if c.Name == "" || seen[c.Name] || c.Name == TombstoneColumn {
			return nil, fmt.Errorf("lancewal: column %d: name %q is empty, repeated or reserved", i, c.Name)
		}
		seen[c.Name] = true
		f := &pb.Field{Name: c.Name, Id: int32(i), ParentId: -1, LogicalType: c.Type, Nullable: c.Nullable, Encoding: pb.Encoding_PLAIN}
		if _, err := newColumn(f); err != nil {
			return nil, fmt.Errorf("lancewal: %w", err)
		}
		if f.LogicalType == "string" || f.LogicalType == "large_string" || f.LogicalType == "binary" || f.LogicalType == "large_binary" {
			f.Encoding = pb.Encoding_VAR_BINARY
		}
		if c.Name == key {
			if c.Nullable {
				return nil, fmt.Errorf("lancewal: the primary key %q must not be nullable", key)
			}
			f.UnenforcedPrimaryKey, f.UnenforcedPrimaryKeyPosition = true, 1
			f.Metadata = map[string][]byte{table.PrimaryKeyPositionKey: []byte(strconv.Itoa(1))}
		}
		fields = append(fields, f)
	}
	if !seen[key] {
		return nil, fmt.Errorf("lancewal: the primary key %q is not a column", key)
	}
	u, err := normalizeURL(url)
	if err != nil {
		return nil, err
	}
	b, err := storage.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("lancewal: open %s: %w", url, err)
	}
	if _, err := table.Create(ctx, b, fields, "", time.Now()); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("lancewal: create %s: %w", url, err)
	}
	return &Table{b: b, owned: true, now: time.Now}, nil
}

// Index kinds CreateIndex builds.
const (
	BTree  = index.KindBTree
	Bitmap = index.KindBitmap
)

// CreateIndex builds a scalar index (BTree or Bitmap) named name over
// column of every row of the table's newest version and commits it, as
// LanceDB's createIndex does. An index of that name that exists is kept.
func (t *Table) CreateIndex(ctx context.Context, name, column, kind string) error {
	if kind != BTree && kind != Bitmap {
		return fmt.Errorf("lancewal: index kind %q: want %q or %q", kind, BTree, Bitmap)
	}
	h, err := t.handle()
	if err != nil {
		return err
	}
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return fmt.Errorf("lancewal: %w", err)
	}
	if len(meta.FindIndex(read.Indices, name)) > 0 {
		return nil
	}
	var field *pb.Field
	for _, f := range read.Manifest.GetFields() {
		if f.GetName() == column && f.GetParentId() == -1 {
			field = f
		}
	}
	if field == nil {
		return fmt.Errorf("lancewal: index %s: no column %q", name, column)
	}
	frags := roaring.New()
	for _, f := range read.Manifest.GetFragments() {
		frags.Add(uint32(f.GetId()))
	}
	v := read.Manifest.GetVersion()
	// The caller's progress reporter, if its context carries one, counts
	// the rows indexed.
	progress.From(ctx).Start("index create", progress.Units{Rows: index.LiveRows(read.Manifest, frags)})
	e, err := index.Collect(ctx, t.b, v, field, frags)
	if err != nil {
		return fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	wr, err := index.WriteSegment(ctx, t.b, kind, field, e)
	if err != nil {
		return fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	ix, err := index.SegmentMetadata(name, []int32{field.GetId()}, kind, nil, v, frags, wr, t.now())
	if err != nil {
		return err
	}
	txn := commit.NewTransaction(v)
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{ix}}}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: wr.Keys}); err != nil {
		return fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	return nil
}

// handle is a table handle with a commit loop of its own (its metrics are
// not registered anywhere: the writer is a library, not a daemon).
func (t *Table) handle() (*table.Handle, error) {
	c, err := newCommitter(t.b)
	if err != nil {
		return nil, err
	}
	return table.New(t.b, c)
}
