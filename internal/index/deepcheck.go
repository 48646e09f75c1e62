package index

import (
	"bytes"
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Problem is one broken index invariant found by DeepCheck.
type Problem struct {
	Object string
	Reason string
}

// DeepCheck resolves every entry of every index of m: after the FRI remap
// (versions newer than the segment's data) an address must name a row that
// exists (a fragment that existed, an offset within it), and if the row is
// live its indexed value must equal the entry's key. Entries of deleted rows
// are allowed: lookups filter them. In the other direction, every live row
// of a fragment the index covers must be in the index under its key.
func DeepCheck(ctx context.Context, b storage.Bucket, m *pb.Manifest) ([]Problem, error) {
	var out []Problem
	var chain *fri.Chain
	var versions []*pb.FragReuseVersion
	if fr := table.FragReuse(m); fr != nil {
		versions = fr.Versions
		var err error
		if chain, err = fri.Compile(versions); err != nil {
			return []Problem{{Object: "__frag_reuse", Reason: err.Error()}}, nil
		}
	}
	live := NewLiveness(ctx, b, m)
	keys := map[uint32][][]byte{} // fragment -> key of each offset, per field
	for _, name := range Names(m) {
		segs, err := Segments(m, name)
		if err != nil {
			return nil, err
		}
		field, err := fieldOf(m.Schema, segs[0])
		if err != nil {
			out = append(out, Problem{Object: "index " + name, Reason: err.Error()})
			continue
		}
		fieldIdx := table.FieldIndex(m.Schema, field.Id)
		clear(keys)
		keyAt := func(frag uint32, off uint32) ([]byte, error) {
			ks, ok := keys[frag]
			if !ok {
				f := table.FragmentByID(m, frag)
				ks = make([][]byte, f.PhysicalRows)
				err := table.ScanParquet(ctx, b, m.Schema, f.DataFile.Path, int64(f.DataFile.SizeBytes), nil, func(o uint32, r table.Row) error {
					k, err := EncodeKey(field.Type, r[fieldIdx])
					ks[o] = k
					return err
				})
				if err != nil {
					return nil, err
				}
				keys[frag] = ks
			}
			return ks[off], nil
		}
		found := roaring64.New()
		check := func(seg *pb.IndexMetadata, key []byte, addrs []uint64) error {
			obj := fmt.Sprintf("index %s segment %s", name, seg.Uuid)
			for _, a := range addrs {
				na, ok := a, true
				if chain != nil {
					na, ok = chain.RemapFrom(a, seg.DatasetVersion)
				}
				if !ok {
					continue // deleted through the FRI
				}
				frag, off := table.SplitRowAddr(na)
				if m.MaxFragmentId == nil || frag > *m.MaxFragmentId {
					out = append(out, Problem{obj, fmt.Sprintf("address %d:%d names fragment %d, which never existed", frag, off, frag)})
					continue
				}
				f := table.FragmentByID(m, frag)
				if f == nil {
					continue // fully deleted fragment: filtered by lookups
				}
				if uint64(off) >= f.PhysicalRows {
					out = append(out, Problem{obj, fmt.Sprintf("address %d:%d is past the fragment's %d rows", frag, off, f.PhysicalRows)})
					continue
				}
				okv := []bool{true}
				if err := live.Filter([]uint64{na}, okv); err != nil {
					return err
				}
				if !okv[0] {
					continue // deleted row
				}
				k, err := keyAt(frag, off)
				if err != nil {
					return err
				}
				if !bytes.Equal(k, key) {
					out = append(out, Problem{obj, fmt.Sprintf("address %d:%d holds key %x, the index says %x", frag, off, k, key)})
				}
				found.Add(na)
			}
			return nil
		}
		for _, seg := range segs {
			file, err := segmentFile(seg)
			if err != nil {
				out = append(out, Problem{"index " + name, err.Error()})
				continue
			}
			switch seg.Type {
			case TypeBTree:
				t, err := openBTree(ctx, b, file)
				if err != nil {
					out = append(out, Problem{"index " + name, err.Error()})
					continue
				}
				c := &btreeCursor{t: t}
				for {
					more, err := c.nextBatch()
					if err != nil {
						_ = t.Close()
						return nil, err
					}
					if !more {
						break
					}
					for i := 0; i < c.keys.len(); i++ {
						if err := check(seg, c.keys.get(i), c.addrs[i:i+1]); err != nil {
							_ = t.Close()
							return nil, err
						}
					}
				}
				_ = t.Close()
			case TypeBitmap:
				es, err := readBitmapFile(ctx, b, file)
				if err != nil {
					out = append(out, Problem{"index " + name, err.Error()})
					continue
				}
				for _, e := range es {
					if err := check(seg, e.key, e.bm.ToArray()); err != nil {
						return nil, err
					}
				}
			}
		}
		covered, err := Covered(segs, versions)
		if err != nil {
			return nil, err
		}
		for _, f := range m.Fragments {
			if !covered.Contains(f.Id) {
				continue
			}
			err := table.ScanFragment(ctx, b, m.Schema, f, func(off uint32, r table.Row) error {
				if !found.Contains(table.RowAddr(f.Id, off)) {
					out = append(out, Problem{"index " + name, fmt.Sprintf("live row %d:%d of a covered fragment is missing from the index", f.Id, off)})
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
