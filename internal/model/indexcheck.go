package model

import (
	"context"
	"strings"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Index names the model tables use: a btree on the primary key (which
// merge also uses to find base rows) and a bitmap on the category.
const (
	IndexByID  = idxByID
	IndexByCat = idxByCat
)

// CheckIndices compares the answers of the model tables' indices that
// exist at head with base: by_id for each of ids, by_cat for each of cats.
// With unindexed fragments scanned an answer must equal the model;
// through the index alone it must be a subset, and equal once no fragment
// is unindexed. Every returned row must carry the looked-up value: a
// wrong FRI remap shows up as a row of another key.
func CheckIndices(ctx context.Context, b storage.Bucket, head *pb.Manifest, base map[int64]table.Row, ids []int64, cats []string) error {
	for _, name := range index.Names(head) {
		unindexed, err := index.Unindexed(head, name)
		if err != nil {
			return violationf("index %s: %v", name, err)
		}
		switch name {
		case idxByID:
			for _, k := range ids {
				if err := checkLookup(ctx, b, head, base, name, k, len(unindexed) == 0); err != nil {
					return err
				}
			}
		case idxByCat:
			for _, c := range cats {
				if err := checkLookup(ctx, b, head, base, name, c, len(unindexed) == 0); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkLookup(ctx context.Context, b storage.Bucket, head *pb.Manifest, base map[int64]table.Row, name string, value any, complete bool) error {
	want := map[int64]table.Row{}
	var enc []byte
	var err error
	switch v := value.(type) {
	case int64:
		enc, err = index.EncodeKey(pb.FieldType_FIELD_TYPE_INT64, v)
		if r, ok := base[v]; ok {
			want[v] = r
		}
	case string:
		enc, err = index.EncodeKey(pb.FieldType_FIELD_TYPE_STRING, v)
		for k, r := range base {
			if r[1] == v {
				want[k] = r
			}
		}
	}
	if err != nil {
		return violationf("index %s: encode %v: %v", name, value, err)
	}
	for _, scan := range []bool{true, false} {
		res, err := index.LookupKey(ctx, b, head, name, enc, index.LookupOptions{ScanUnindexed: scan, Rows: true})
		if err != nil {
			return violationf("index %s lookup %v (scan unindexed %v) at version %d: %v", name, value, scan, head.Version, err)
		}
		got := map[int64]table.Row{}
		for _, m := range res.Matches {
			if m.Row == nil {
				return violationf("index %s lookup %v: address %#x returned without its row", name, value, m.Addr)
			}
			k := Key(m.Row)
			if _, dup := got[k]; dup {
				return violationf("index %s lookup %v at version %d: key %d returned twice", name, value, head.Version, k)
			}
			got[k] = m.Row
		}
		if scan || complete {
			if d := Diff(head.Schema, want, got, 5); len(d) > 0 {
				return violationf("index %s lookup %v (scan unindexed %v) at version %d differs from the model:\n    %s", name, value, scan, head.Version, strings.Join(d, "\n    "))
			}
			continue
		}
		for k, r := range got {
			w, ok := want[k]
			if !ok || len(Diff(head.Schema, map[int64]table.Row{k: w}, map[int64]table.Row{k: r}, 1)) > 0 {
				return violationf("index %s lookup %v (index only) at version %d returned a row the model does not have: %s", name, value, head.Version, table.RowJSON(head.Schema, r))
			}
		}
	}
	return nil
}
