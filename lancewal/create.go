package lancewal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// large_string, binary, large_binary, date32:day, timestamp:<unit>:-
// (s, ms, us, ns; or a zone instead of -) or fixed_size_list:float:d (a
// vector of d float32).
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
// LanceDB's createIndex does. An identical index of that name (same column,
// same kind) that exists is kept; one on another column or of another kind
// is an error.
func (t *Table) CreateIndex(ctx context.Context, name, column, kind string) error {
	_, err := t.EnsureIndex(ctx, name, column, kind)
	return err
}

// IndexResult is what EnsureIndex did.
type IndexResult struct {
	// Version is the version its own commit made, or, when an identical
	// index already existed, the version it read that index in.
	Version uint64
	// Created is false when an identical index already existed.
	Created bool
}

// ensureIndexAttempts bounds the rounds EnsureIndex plays against
// concurrent index creations: each lost round means another index of some
// name landed, which the next round reads.
const ensureIndexAttempts = 5

// EnsureIndex is CreateIndex that reports the version. Two creations of
// one name racing each other never both succeed on different columns or
// kinds: the commit loop finds the other's segment ("index changed
// meanwhile"), and the next round reads it and refuses, or keeps it when it
// is identical.
func (t *Table) EnsureIndex(ctx context.Context, name, column, kind string) (IndexResult, error) {
	if kind != BTree && kind != Bitmap {
		return IndexResult{}, fmt.Errorf("lancewal: index kind %q: want %q or %q", kind, BTree, Bitmap)
	}
	h, err := t.handle()
	if err != nil {
		return IndexResult{}, err
	}
	for attempt := 1; ; attempt++ {
		res, err := t.createIndexOnce(ctx, h, name, column, kind)
		if err == nil || !errors.Is(err, commit.ErrRetryable) || attempt == ensureIndexAttempts {
			return res, err
		}
	}
}

func (t *Table) createIndexOnce(ctx context.Context, h *table.Handle, name, column, kind string) (IndexResult, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return IndexResult{}, fmt.Errorf("lancewal: %w", err)
	}
	if segs := meta.FindIndex(read.Indices, name); len(segs) > 0 {
		if err := sameIndex(read.Manifest.GetFields(), segs[0], name, column, kind); err != nil {
			return IndexResult{}, err
		}
		return IndexResult{Version: read.Manifest.GetVersion()}, nil
	}
	var field *pb.Field
	for _, f := range read.Manifest.GetFields() {
		if f.GetName() == column && f.GetParentId() == -1 {
			field = f
		}
	}
	if field == nil {
		return IndexResult{}, fmt.Errorf("lancewal: index %s: no column %q", name, column)
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
		return IndexResult{}, fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	wr, err := index.WriteSegment(ctx, t.b, kind, field, e)
	if err != nil {
		return IndexResult{}, fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	ix, err := index.SegmentMetadata(name, []int32{field.GetId()}, kind, nil, v, frags, wr, t.now())
	if err != nil {
		return IndexResult{}, err
	}
	txn := commit.NewTransaction(v)
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{ix}}}
	res, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: wr.Keys})
	if err != nil {
		return IndexResult{}, fmt.Errorf("lancewal: index %s: %w", name, err)
	}
	return IndexResult{Version: res.Version, Created: true}, nil
}

// sameIndex checks that an existing index named name is on column and of
// kind; anything else is a one-line refusal naming both.
func sameIndex(fields []*pb.Field, seg *pb.IndexMetadata, name, column, kind string) error {
	var cols []string
	for _, id := range seg.GetFields() {
		col := fmt.Sprintf("field %d", id)
		for _, f := range fields {
			if f.GetId() == id {
				col = f.GetName()
			}
		}
		cols = append(cols, col)
	}
	have := meta.IndexKind(seg)
	if len(cols) == 1 && cols[0] == column && have == kind {
		return nil
	}
	return fmt.Errorf("lancewal: index %s exists on %s as %s; drop it before creating it on %s as %s", name, strings.Join(cols, ","), have, column, kind)
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
