package lancewal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// A maintained full-text (inverted) index: each generation carries a copy
// of it over the generation's rows, as LanceDB's flush writes one
// (_indices/{uuid}/metadata.lance and one partition's tokens, docs and
// invert files, the partition id random), built with compactord's
// full-text writer. Only for tokenizer configurations compactord
// reproduces (fts.NewTokenizer): a copy that tokenized differently would
// make LanceDB's LSM search disagree with its base-table search.

// invertedIndex is what a generation's copy of a full-text index needs.
type invertedIndex struct {
	tpl *fts.Template
	col column
	// err says why the writer cannot copy the index (nil if it can).
	err error
}

// loadInverted reads, for each full-text index of names, its template
// (metadata.lance and file schemas) and checks that the writer can copy
// it. Only a storage failure is an error; an index it cannot copy keeps
// the reason, which maintaining it reports. Only maintained indexes are
// read: a table's other full-text indexes cost a writer nothing.
func (st *state) loadInverted(ctx context.Context, b storage.Bucket, names []string) error {
	if st.inverted == nil {
		st.inverted = map[string]*invertedIndex{}
	}
	for _, ix := range st.read.Indices {
		name := ix.GetName()
		if meta.IndexKind(ix) != index.KindInverted || st.inverted[name] != nil || !slices.Contains(names, name) {
			continue
		}
		ii := &invertedIndex{}
		st.inverted[name] = ii
		dir := meta.IndexDir(meta.UUIDString(ix.GetUuid()))
		var ioErr error
		tpl, err := fts.ReadTemplate(func(n string) (io.ReaderAt, int64, error) {
			a, err := b.Attributes(ctx, dir+n)
			if err != nil {
				if !storage.IsNotFound(err) {
					ioErr = err
				}
				return nil, 0, err
			}
			return storage.NewReaderAt(ctx, b, dir+n, a.Size), a.Size, nil
		})
		switch {
		case ioErr != nil:
			return fmt.Errorf("lancewal: full-text index %s: %w", name, ioErr)
		case err != nil:
			ii.err = fmt.Errorf("lancewal: maintained index %q: %v", name, err)
			continue
		}
		if _, err := fts.NewTokenizer(tpl.Meta.Params); err != nil {
			ii.err = fmt.Errorf("lancewal: maintained index %q: %v", name, err)
			continue
		}
		if len(ix.GetFields()) != 1 {
			ii.err = fmt.Errorf("lancewal: maintained index %q covers %d fields, want 1", name, len(ix.GetFields()))
			continue
		}
		ii.err = fmt.Errorf("lancewal: maintained index %q is on field %d, which is not a string column", name, ix.GetFields()[0])
		for _, c := range st.cols {
			if c.field.GetId() == ix.GetFields()[0] && (c.field.GetLogicalType() == "string" || c.field.GetLogicalType() == "large_string") {
				ii.col, ii.err = c, nil
			}
		}
		ii.tpl = tpl
	}
	return nil
}

// maintainedInverted returns the column of full-text index name, or why
// the writer cannot copy it.
func maintainedInverted(st *state, name string) (column, error) {
	ii := st.inverted[name]
	if ii == nil {
		return column{}, fmt.Errorf("lancewal: maintained index %q is not a full-text index of the table", name)
	}
	return ii.col, ii.err
}

// writeInvertedCopy writes the generation's copy of full-text index name
// over its rows (the generation's columns cols, row addresses addrs in
// fragment 0)
// under gb and returns its metadata, as LanceDB writes it: the base
// segment's fields, details and index version, dataset version 1,
// fragment 0, no creation time and no file list.
func writeInvertedCopy(ctx context.Context, gb storage.Bucket, st *state, name string, cols []*file.Array, addrs []uint64) (*pb.IndexMetadata, error) {
	c, err := maintainedInverted(st, name)
	if err != nil {
		return nil, err
	}
	ii := st.inverted[name]
	values := cols[colIndex(st, c)]
	docs := make([]fts.Doc, 0, len(addrs))
	for i, a := range addrs {
		if values.IsValid(i) {
			docs = append(docs, fts.Doc{RowID: a, Text: string(values.Bytes(i))})
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	files, _, err := ii.tpl.GenerationCopy(binary.LittleEndian.Uint64(rnd[:]), docs)
	if err != nil {
		return nil, fmt.Errorf("maintained index %s: %w", name, err)
	}
	u, us := meta.NewUUID()
	dir := meta.IndexDir(us)
	for _, f := range files {
		if err := gb.Put(ctx, dir+f.Name, f.Data); err != nil {
			return nil, err
		}
	}
	like := meta.FindIndex(st.read.Indices, name)[0]
	ix := &pb.IndexMetadata{Uuid: u, Name: name, Fields: like.GetFields(), DatasetVersion: 1,
		FragmentBitmap: meta.EncodeBitmap(roaring.BitmapOf(0)), IndexVersion: proto.Int32(like.GetIndexVersion())}
	if d := like.GetIndexDetails(); d != nil {
		ix.IndexDetails = proto.Clone(d).(*anypb.Any)
	}
	return ix, nil
}

// colIndex is c's index among the generation's columns.
func colIndex(st *state, c column) int {
	for i, sc := range st.cols {
		if sc.field.GetId() == c.field.GetId() {
			return i
		}
	}
	return -1
}
