package index

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// LookupBatch looks up many encoded keys at once: each segment is opened
// once and walked against the sorted keys (row groups skipped on their
// statistics), instead of one open and search per key, which cost about six
// object-store requests per key on S3. fn is called once per live address
// with the index of the key it matched, after the FRI remap and the liveness
// filter of LookupKey. Fragments no segment covers are not scanned.
// REQUIRES: keys sorted ascending (bytes.Compare).
func LookupBatch(ctx context.Context, b storage.Bucket, m *pb.Manifest, name string, keys [][]byte, fn func(i int, addr uint64) error) error {
	segs, err := Segments(m, name)
	if err != nil {
		return err
	}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) > 0 {
			return fmt.Errorf("index %q: batch keys are not sorted", name)
		}
	}
	chain, err := fri.Compile(table.FragReuse(m).GetVersions())
	if err != nil {
		return fmt.Errorf("index %q: fragment-reuse index: %w", name, err)
	}
	live := NewLiveness(ctx, b, m)
	seen := roaring64.New()
	emit := func(s *pb.IndexMetadata, i int, addrs []uint64) error {
		ok := make([]bool, len(addrs))
		for j := range ok {
			ok[j] = true
		}
		mp := &mapper{chain: chain, segDV: s.DatasetVersion, live: live}
		if err := mp.apply(addrs, ok); err != nil {
			return err
		}
		for j, a := range addrs {
			if ok[j] && seen.CheckedAdd(a) {
				if err := fn(i, a); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, s := range segs {
		file, err := segmentFile(s)
		if err != nil {
			return err
		}
		switch s.Type {
		case TypeBTree:
			err = batchBTree(ctx, b, s, file, keys, emit)
		case TypeBitmap:
			err = batchBitmap(ctx, b, s, file, keys, emit)
		default:
			err = corruptf("segment %s of %q has unknown type %q", s.Uuid, name, s.Type)
		}
		if err != nil {
			return fmt.Errorf("index %q segment %s: %w", name, s.Uuid, err)
		}
	}
	return nil
}

func batchBTree(ctx context.Context, b storage.Bucket, s *pb.IndexMetadata, file string, keys [][]byte, emit func(*pb.IndexMetadata, int, []uint64) error) error {
	t, err := openBTree(ctx, b, file)
	if err != nil {
		return err
	}
	defer t.Close()
	var ka keyArena
	var addrs []uint64
	for gi, rg := range t.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rg.NumRows() == 0 {
			continue
		}
		lo, hi := 0, len(keys)
		if fc, ok := rg.ColumnChunks()[t.keyCol].(*parquet.FileColumnChunk); ok {
			if min, max, ok := fc.Bounds(); ok {
				lo = sort.Search(len(keys), func(i int) bool { return bytes.Compare(keys[i], min.ByteArray()) >= 0 })
				hi = sort.Search(len(keys), func(i int) bool { return bytes.Compare(keys[i], max.ByteArray()) > 0 })
			}
		}
		if lo >= hi {
			continue
		}
		if addrs, err = t.readRowGroup(gi, &ka, addrs); err != nil {
			return err
		}
		// Merge-join the row group's sorted keys with keys[lo:hi].
		i, j := lo, 0
		for i < hi && j < ka.len() {
			switch c := bytes.Compare(keys[i], ka.get(j)); {
			case c < 0:
				i++
			case c > 0:
				j++
			default:
				start := j
				for j < ka.len() && bytes.Equal(ka.get(j), keys[i]) {
					j++
				}
				if err := emit(s, i, append([]uint64(nil), addrs[start:j]...)); err != nil {
					return err
				}
				i++
			}
		}
	}
	return nil
}

func batchBitmap(ctx context.Context, b storage.Bucket, s *pb.IndexMetadata, file string, keys [][]byte, emit func(*pb.IndexMetadata, int, []uint64) error) error {
	es, err := readBitmapFile(ctx, b, file)
	if err != nil {
		return err
	}
	byKey := make(map[string]*roaring64.Bitmap, len(es))
	for _, e := range es {
		byKey[string(e.key)] = e.bm
	}
	for i, k := range keys {
		if bm := byKey[string(k)]; bm != nil {
			if err := emit(s, i, bm.ToArray()); err != nil {
				return err
			}
		}
	}
	return nil
}
