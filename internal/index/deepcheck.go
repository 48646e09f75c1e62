package index

import (
	"bytes"
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/verify"
)

// DeepCheck is verify --deep (verify.Options.DeepCheck): it resolves every
// entry of every segment of m. After the FRI remap (the versions newer than
// the segment's data), an address whose row is live in m must hold the
// entry's key: a wrong remap (a ghost row, a group mapped to address 0,
// Lance #9200) shows up as a live row of another value. And every live,
// non-null row of a fragment the logical index covers (after the
// load-time remap) must be in some segment: otherwise an index-only read
// misses it. Deleted rows and dead fragments are not violations: readers
// filter them.
func DeepCheck(ctx context.Context, b storage.Bucket, m *pb.Manifest) ([]verify.Violation, error) {
	var out []verify.Violation
	versions := table.FragReuse(m).GetVersions()
	chain, err := fri.Compile(versions)
	if err != nil {
		return []verify.Violation{{Object: fmt.Sprintf("version %d __frag_reuse", m.Version), Reason: err.Error()}}, nil
	}
	for _, name := range Names(m) {
		vs, err := deepCheckIndex(ctx, b, m, name, chain, versions)
		if err != nil {
			return nil, fmt.Errorf("deep check of index %q: %w", name, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

func deepCheckIndex(ctx context.Context, b storage.Bucket, m *pb.Manifest, name string, chain *fri.Chain, versions []*pb.FragReuseVersion) ([]verify.Violation, error) {
	var out []verify.Violation
	add := func(obj, format string, args ...any) {
		if len(out) < 50 {
			out = append(out, verify.Violation{Object: obj, Reason: fmt.Sprintf(format, args...)})
		}
	}
	segs, err := Segments(m, name)
	if err != nil {
		return nil, err
	}
	field, err := fieldOf(m.Schema, segs[0])
	if err != nil {
		add(fmt.Sprintf("version %d index %s", m.Version, name), "%v", err)
		return out, nil
	}
	live := NewLiveness(ctx, b, m)
	// want maps each live address an entry resolves to, to the entry's key
	// and the segment that holds it.
	type claim struct {
		key []byte
		seg string
	}
	want := map[uint64]claim{}
	indexed := roaring64.New()
	for _, s := range segs {
		obj := fmt.Sprintf("version %d index %s segment %s", m.Version, name, s.Uuid)
		if len(s.FieldIds) != 1 || s.FieldIds[0] != field.Id {
			add(obj, "indexes field ids %v, the logical index field %d", s.FieldIds, field.Id)
			continue
		}
		var keys [][]byte
		var addrs []uint64
		err := segmentEntries(ctx, b, s, func(k []byte, a uint64) {
			keys = append(keys, k)
			addrs = append(addrs, a)
		})
		if err != nil {
			add(obj, "does not read: %v", err)
			continue
		}
		stored := append([]uint64(nil), addrs...)
		ok := make([]bool, len(addrs))
		for i := range ok {
			ok[i] = true
		}
		mp := &mapper{chain: chain, segDV: s.DatasetVersion, live: live}
		if err := mp.apply(addrs, ok); err != nil {
			return nil, err
		}
		for i, a := range addrs {
			if !ok[i] {
				continue
			}
			indexed.Add(a)
			if c, dup := want[a]; dup && !bytes.Equal(c.key, keys[i]) {
				f, o := table.SplitRowAddr(a)
				add(obj, "address %d:%d (stored as %#x) is indexed under %s here and under %s in segment %s", f, o, stored[i], keyJSON(field.Type, keys[i]), keyJSON(field.Type, c.key), c.seg)
				continue
			}
			want[a] = claim{key: keys[i], seg: s.Uuid}
		}
	}
	cov, err := Covered(segs, versions)
	if err != nil {
		add(fmt.Sprintf("version %d index %s", m.Version, name), "coverage: %v", err)
		return out, nil
	}
	var kbuf []byte
	for _, f := range m.Fragments {
		covered := cov.Contains(f.Id)
		err := scanColumn(ctx, b, f, field, func(off uint32, v parquet.Value) error {
			a := table.RowAddr(f.Id, off)
			c, claimed := want[a]
			if v.IsNull() {
				if claimed {
					add(fmt.Sprintf("version %d index %s segment %s", m.Version, name, c.seg), "address %d:%d is indexed under %s but its value is null", f.Id, off, keyJSON(field.Type, c.key))
				}
				return nil
			}
			var err error
			if kbuf, err = appendValueKey(kbuf[:0], field.Type, v); err != nil {
				return err
			}
			switch {
			case claimed && !bytes.Equal(c.key, kbuf):
				add(fmt.Sprintf("version %d index %s segment %s", m.Version, name, c.seg), "address %d:%d is indexed under %s but the live row there holds %s", f.Id, off, keyJSON(field.Type, c.key), keyJSON(field.Type, kbuf))
			case !claimed && covered:
				add(fmt.Sprintf("version %d index %s", m.Version, name), "live row %d:%d (%s) is in a covered fragment but in no segment", f.Id, off, keyJSON(field.Type, kbuf))
			}
			return nil
		})
		if err != nil {
			add(fmt.Sprintf("version %d fragment %d", m.Version, f.Id), "does not scan: %v", err)
		}
	}
	return out, nil
}

// segmentEntries calls fn for every (key, stored address) of a segment.
func segmentEntries(ctx context.Context, b storage.Bucket, s *pb.IndexMetadata, fn func(key []byte, addr uint64)) error {
	file, err := segmentFile(s)
	if err != nil {
		return err
	}
	switch s.Type {
	case TypeBTree:
		t, err := openBTree(ctx, b, file)
		if err != nil {
			return err
		}
		defer t.Close()
		var keys keyArena
		var addrs []uint64
		for i := range t.RowGroups() {
			if addrs, err = t.readRowGroup(i, &keys, addrs); err != nil {
				return err
			}
			for j, a := range addrs {
				fn(bytes.Clone(keys.get(j)), a)
			}
		}
		return nil
	case TypeBitmap:
		es, err := readBitmapFile(ctx, b, file)
		if err != nil {
			return err
		}
		for _, e := range es {
			it := e.bm.Iterator()
			for it.HasNext() {
				fn(e.key, it.Next())
			}
		}
		return nil
	}
	return corruptf("unknown index type %q", s.Type)
}
