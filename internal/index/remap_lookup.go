package index

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/format/jsonl"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// LookupOptions configure Lookup.
type LookupOptions struct {
	// IndexOnly skips the scan of the fragments no segment covers.
	IndexOnly bool
}

// LookupResult is the rows of a version whose indexed column equals a key.
type LookupResult struct {
	Version uint64 `json:"version"`
	// Addrs are the matching live rows, ascending, at the version.
	Addrs []uint64 `json:"addrs"`
	// Scanned are the live fragments no segment covers after the
	// load-time remap, which were scanned (unless IndexOnly).
	Scanned []uint32 `json:"scanned"`
}

// Lookup answers "column = key" through the btree or bitmap index name of
// version read, as a reader of the table does: every segment's entries for
// key, their addresses remapped through the fragment-reuse index (rows a
// compaction dropped and rows of fully deleted fragments are deleted
// there), then rows of fragments not live or deleted by their deletion
// vector dropped; the live fragments no segment covers after the load-time
// remap are scanned. key is a JSON value of the column's type (a bare
// string is taken as a string).
func Lookup(ctx context.Context, b storage.Bucket, read *meta.ManifestFile, name, key string, o LookupOptions) (*LookupResult, error) {
	m := read.Manifest
	segs := meta.FindIndex(read.Indices, name)
	if len(segs) == 0 || meta.IsSystemIndex(segs[0]) {
		return nil, fmt.Errorf("no index %q in version %d", name, m.GetVersion())
	}
	fields := segs[0].GetFields()
	var field *pb.Field
	for _, f := range m.GetFields() {
		if len(fields) == 1 && f.GetId() == fields[0] {
			field = f
		}
	}
	if field == nil {
		return nil, fmt.Errorf("index %s is on fields %v, not one field of the schema", name, fields)
	}
	want, err := keyArray(field, key)
	if err != nil {
		return nil, fmt.Errorf("index %s: key %q: %w", name, key, err)
	}
	wantKey, wantNull := valueKey(want, 0)
	matches := func(a *file.Array, i int) bool {
		k, null := valueKey(a, i)
		return null == wantNull && k == wantKey
	}
	ix, err := fri.Load(ctx, b, read)
	if err != nil {
		return nil, err
	}
	frags := map[uint32]*pb.DataFragment{}
	for _, f := range m.GetFragments() {
		frags[uint32(f.GetId())] = f
	}
	full := func(frag uint32) (uint64, bool) {
		if f, ok := frags[frag]; ok {
			return f.GetPhysicalRows(), true
		}
		if n, ok := ix.PhysicalRows(frag); ok {
			return n, true
		}
		return 0, true // a dead fragment: its rows are dropped below
	}
	remap := ix.Remapper(0)
	found := roaring64.New()
	covered := roaring.New()
	for _, s := range segs {
		if k := meta.IndexKind(s); k != KindBTree && k != KindBitmap {
			return nil, fmt.Errorf("index %s is a %s index; compactord looks up btree and bitmap indexes", name, k)
		}
		if bm := ix.RemapBitmap(s); bm != nil {
			covered.Or(bm)
		}
		e, err := ReadSegment(ctx, b, s, full)
		if err != nil {
			return nil, err
		}
		for i, a := range e.Addrs {
			if !matches(e.Values, i) {
				continue
			}
			if na, ok := remap(a); ok {
				if _, live := frags[uint32(na>>32)]; live {
					found.Add(na)
				}
			}
		}
	}
	// Deletion vectors of the fragments holding index matches.
	dels := map[uint32]*roaring.Bitmap{}
	for it := found.Iterator(); it.HasNext(); {
		frag := uint32(it.Next() >> 32)
		if _, ok := dels[frag]; ok {
			continue
		}
		f := frags[frag]
		dv, err := deletion.Read(ctx, b, f.GetId(), f.GetDeletionFile(), f.GetPhysicalRows())
		if err != nil {
			return nil, err
		}
		dels[frag] = dv
	}
	res := &LookupResult{Version: m.GetVersion(), Addrs: []uint64{}, Scanned: []uint32{}}
	for it := found.Iterator(); it.HasNext(); {
		a := it.Next()
		if !dels[uint32(a>>32)].Contains(uint32(a)) {
			res.Addrs = append(res.Addrs, a)
		}
	}
	if o.IndexOnly {
		return res, nil
	}
	// The fragments no segment covers are read as a scan would.
	var scanIDs []uint32
	for id := range frags {
		if !covered.Contains(id) {
			scanIDs = append(scanIDs, id)
		}
	}
	slices.Sort(scanIDs)
	if len(scanIDs) == 0 {
		return res, nil
	}
	e, err := Collect(ctx, b, m.GetVersion(), field, roaring.BitmapOf(scanIDs...))
	if err != nil {
		return nil, err
	}
	res.Scanned = scanIDs
	for i, a := range e.Addrs {
		if matches(e.Values, i) {
			res.Addrs = append(res.Addrs, a)
		}
	}
	slices.Sort(res.Addrs)
	res.Addrs = slices.Compact(res.Addrs)
	return res, nil
}

// keyArray is key as a one-value array of the field's type: key parsed as
// JSON, or as a string when it is not JSON of that type.
func keyArray(f *pb.Field, key string) (*file.Array, error) {
	w, err := file.NewWriter(io.Discard, []*pb.Field{{Name: "k", Id: 0, ParentId: -1, LogicalType: f.GetLogicalType(), Nullable: true}}, file.WriterOptions{})
	if err != nil {
		return nil, err
	}
	bl, err := jsonl.NewBuilder(w.Schema().Fields[:1])
	if err != nil {
		return nil, err
	}
	if bl.AddLine([]byte(`{"k":`+key+`}`)) != nil {
		if bl, err = jsonl.NewBuilder(w.Schema().Fields[:1]); err != nil {
			return nil, err
		}
		q, _ := json.Marshal(key)
		if err := bl.AddLine([]byte(`{"k":` + string(q) + `}`)); err != nil {
			return nil, err
		}
	}
	a := bl.Flush().Columns[0]
	if err := Indexable(a.Type); err != nil {
		return nil, err
	}
	return a, nil
}

// WriteRows prints the rows at addrs (ascending, live at version read) as
// JSON objects, one a line, with "_fragment" and "_offset" first when
// withAddr.
func WriteRows(ctx context.Context, b storage.Bucket, read *meta.ManifestFile, addrs []uint64, w io.Writer, withAddr bool) error {
	want := map[uint64][]uint32{}
	for _, a := range addrs {
		want[a>>32] = append(want[a>>32], uint32(a))
	}
	tbl, err := scan.Open(ctx, b, scan.Options{Version: read.Manifest.GetVersion()})
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	err = tbl.Batches(ctx, func(bt *scan.Batch) error {
		offs := want[bt.Fragment]
		for _, r := range bt.Live {
			off := uint32(bt.Offset) + uint32(r)
			if _, ok := slices.BinarySearch(offs, off); !ok {
				continue
			}
			line = append(line[:0], '{')
			if withAddr {
				line = fmt.Appendf(line, `"_fragment":%d,"_offset":%d`, bt.Fragment, off)
			}
			for i, c := range tbl.Columns {
				if i > 0 || withAddr {
					line = append(line, ',')
				}
				line = scan.AppendString(line, []byte(c.Name))
				line = append(line, ':')
				if bt.Columns[i] == nil {
					line = append(line, "null"...)
					continue
				}
				line = scan.AppendValue(line, bt.Columns[i], r, nil, bt.Files[i])
			}
			line = append(line, '}', '\n')
			if _, err := bw.Write(line); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
