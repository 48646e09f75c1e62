package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// LookupOptions shape a lookup.
type LookupOptions struct {
	// ScanUnindexed also scans the live fragments no segment covers (after
	// the load-time remap), so the answer is complete before a catch-up.
	ScanUnindexed bool
	// Rows fetches the rows, not only their addresses.
	Rows bool
}

// Match is one row a lookup found.
type Match struct {
	Addr uint64
	Row  table.Row // nil unless LookupOptions.Rows
}

// LookupResult is a lookup's answer, in address order.
type LookupResult struct {
	Matches []Match
	// Scanned lists the fragments read by scan rather than through the
	// index (ScanUnindexed).
	Scanned []uint32
}

// Addrs returns the matched addresses.
func (r *LookupResult) Addrs() []uint64 {
	out := make([]uint64, len(r.Matches))
	for i, m := range r.Matches {
		out[i] = m.Addr
	}
	return out
}

// Lookup finds the rows of manifest m whose indexed column equals key (as
// typed on a command line; see ParseKey) through logical index name.
func Lookup(ctx context.Context, b storage.Bucket, m *pb.Manifest, name, key string, opts LookupOptions) (*LookupResult, error) {
	f, err := Field(m, name)
	if err != nil {
		return nil, err
	}
	k, err := ParseKey(f, key)
	if err != nil {
		return nil, err
	}
	return LookupKey(ctx, b, m, name, k, opts)
}

// LookupKey is Lookup with an encoded key (EncodeKey). It unions every
// segment of the index, remaps each segment's addresses through the FRI
// versions newer than its data, and drops rows whose fragment is not live
// in m or whose offset is deleted.
func LookupKey(ctx context.Context, b storage.Bucket, m *pb.Manifest, name string, key []byte, opts LookupOptions) (*LookupResult, error) {
	segs, err := Segments(m, name)
	if err != nil {
		return nil, err
	}
	field, err := fieldOf(m.Schema, segs[0])
	if err != nil {
		return nil, err
	}
	versions := table.FragReuse(m).GetVersions()
	chain, err := fri.Compile(versions)
	if err != nil {
		return nil, fmt.Errorf("index %q: fragment-reuse index: %w", name, err)
	}
	live := NewLiveness(ctx, b, m)
	found := roaring64.New()
	for _, s := range segs {
		addrs, err := segmentLookup(ctx, b, s, key)

		if err != nil {
			return nil, fmt.Errorf("index %q segment %s: %w", name, s.Uuid, err)
		}
		ok := make([]bool, len(addrs))
		for i := range ok {
			ok[i] = true
		}
		mp := &mapper{chain: chain, segDV: s.DatasetVersion, live: live}
		if err := mp.apply(addrs, ok); err != nil {
			return nil, err
		}
		for i, a := range addrs {
			if ok[i] {
				found.Add(a)
			}
		}
	}
	res := &LookupResult{}
	if opts.ScanUnindexed {
		cov, err := Covered(segs, versions)
		if err != nil {
			return nil, err
		}
		var kbuf []byte
		for _, f := range m.Fragments {
			if cov.Contains(f.Id) {
				continue
			}
			res.Scanned = append(res.Scanned, f.Id)
			err := scanColumn(ctx, b, f, field, func(off uint32, v parquet.Value) error {
				if v.IsNull() {
					return nil
				}
				var err error
				if kbuf, err = appendValueKey(kbuf[:0], field.Type, v); err != nil {
					return err
				}
				if bytes.Equal(kbuf, key) {
					found.Add(table.RowAddr(f.Id, off))
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		slices.Sort(res.Scanned)
	}
	for _, a := range found.ToArray() {
		res.Matches = append(res.Matches, Match{Addr: a})
	}
	if opts.Rows {
		if err := fetchRows(ctx, b, m, res.Matches); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func segmentLookup(ctx context.Context, b storage.Bucket, s *pb.IndexMetadata, key []byte) ([]uint64, error) {
	file, err := segmentFile(s)
	if err != nil {
		return nil, err
	}
	switch s.Type {
	case TypeBTree:
		t, err := openBTree(ctx, b, file)
		if err != nil {
			return nil, err
		}
		defer t.Close()
		return t.lookup(key)
	case TypeBitmap:
		es, err := readBitmapFile(ctx, b, file)
		if err != nil {
			return nil, err
		}
		i, ok := slices.BinarySearchFunc(es, key, func(e bitmapEntry, k []byte) int { return bytes.Compare(e.key, k) })
		if !ok {
			return nil, nil
		}
		return es[i].bm.ToArray(), nil
	}
	return nil, corruptf("unknown index type %q", s.Type)
}

// fetchRows fills the rows of matches (sorted by address), reading each
// fragment once and seeking to each offset.
func fetchRows(ctx context.Context, b storage.Bucket, m *pb.Manifest, matches []Match) error {
	for i := 0; i < len(matches); {
		id, _ := table.SplitRowAddr(matches[i].Addr)
		j := i
		for j < len(matches) && uint32(matches[j].Addr>>32) == id {
			j++
		}
		f := table.FragmentByID(m, id)
		if f == nil {
			return fmt.Errorf("fragment %d is not live at version %d", id, m.Version)
		}
		if err := fetchFragmentRows(ctx, b, m.Schema, f, matches[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func fetchFragmentRows(ctx context.Context, b storage.Bucket, s *pb.Schema, f *pb.Fragment, matches []Match) error {
	key := f.GetDataFile().GetPath()
	pf, err := openParquet(ctx, b, key, int64(f.GetDataFile().GetSizeBytes()), table.ErrCorrupt)
	if err != nil {
		return fmt.Errorf("fragment %d: %w", f.Id, err)
	}
	defer pf.Close()
	cols, err := table.ColumnIndexes(s, pf.Schema(), key)
	if err != nil {
		return err
	}
	buf := make([]parquet.Row, 1)
	var start int64
	k := 0
	for _, rg := range pf.RowGroups() {
		end := start + rg.NumRows()
		if k < len(matches) && int64(uint32(matches[k].Addr)) < end {
			rows := rg.Rows()
			for ; k < len(matches) && int64(uint32(matches[k].Addr)) < end; k++ {
				if err := rows.SeekToRow(int64(uint32(matches[k].Addr)) - start); err != nil {
					_ = rows.Close()
					return fmt.Errorf("fragment %d: seek %s: %w", f.Id, key, err)
				}
				n, err := rows.ReadRows(buf)
				if n != 1 {
					_ = rows.Close()
					if err == nil || errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return fmt.Errorf("fragment %d: read %s: %w", f.Id, key, err)
				}
				r := make(table.Row, len(s.Fields))
				for i, fd := range s.Fields {
					r[i] = table.DecodeValue(fd.Type, buf[0][cols[i]])
				}
				matches[k].Row = r
			}
			_ = rows.Close()
		}
		start = end
	}
	if k < len(matches) {
		return fmt.Errorf("fragment %d: %w: offset %d past the data file's %d rows", f.Id, table.ErrCorrupt, uint32(matches[k].Addr), start)
	}
	return nil
}
