package merge

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// DefaultIndexLookupMaxKeys is the largest key set looked up through a
// primary-key index. The batch lookup reads every segment once, so its cost
// grows with the index, not the key count; past this size one sequential
// scan of the key column is still cheaper.
const DefaultIndexLookupMaxKeys = 1000

// IndexLocator finds base rows through a single-column primary-key index:
// one index.LookupBatch over all keys (which unions the segments, remaps
// through the FRI and drops rows not live in m), plus a key-column scan of the
// fragments the index does not cover yet. A row may be reported twice (a
// remapped address landing in an uncovered fragment); callers treat reports
// as idempotent.
type IndexLocator struct {
	Index string
}

// Name returns "index:<name>".
func (l IndexLocator) Name() string { return "index:" + l.Index }

// Locate implements Locator.
func (l IndexLocator) Locate(ctx context.Context, b storage.Bucket, m *pb.Manifest, keys *KeySet, fn func(frag, off uint32, i int) error) error {
	if len(m.Schema.GetPrimaryKey()) != 1 {
		return fmt.Errorf("index %q: a one-column index cannot look up a %d-column primary key", l.Index, len(m.Schema.GetPrimaryKey()))
	}
	f, err := index.Field(m, l.Index)
	if err != nil {
		return err
	}
	// One batch lookup opens each segment once; a lookup per key cost about
	// six object-store requests per key on S3.
	type pair struct {
		k []byte
		i int
	}
	pairs := make([]pair, 0, keys.Len())
	for i, k := range keys.Keys() {
		v, err := decodeSingleKey(k)
		if err != nil {
			return err
		}
		// table.AppendKey encodes a timestamp like an int64 (one tag for
		// both), so the decoded value takes the column's type here.
		if x, ok := v.(int64); ok && f.Type == pb.FieldType_FIELD_TYPE_TIMESTAMP {
			v = table.Timestamp(x)
		}
		ik, err := index.EncodeKey(f.Type, v)
		if err != nil {
			return err
		}
		pairs = append(pairs, pair{ik, i})
	}
	sort.Slice(pairs, func(a, b int) bool { return bytes.Compare(pairs[a].k, pairs[b].k) < 0 })
	sorted := make([][]byte, len(pairs))
	for j, p := range pairs {
		sorted[j] = p.k
	}
	if err := index.LookupBatch(ctx, b, m, l.Index, sorted, func(j int, a uint64) error {
		frag, off := table.SplitRowAddr(a)
		return fn(frag, off, pairs[j].i)
	}); err != nil {
		return err
	}
	uncovered, err := index.Unindexed(m, l.Index)
	if err != nil || len(uncovered) == 0 {
		return err
	}
	sub := &pb.Manifest{Version: m.Version, Schema: m.Schema}
	for _, id := range uncovered {
		sub.Fragments = append(sub.Fragments, table.FragmentByID(m, id))
	}
	return ScanLocator{}.Locate(ctx, b, sub, keys, fn)
}

// decodeSingleKey inverts table.AppendKey for one value.
func decodeSingleKey(k string) (any, error) {
	bad := fmt.Errorf("primary key %x: %w: not a single encoded value", k, table.ErrCorrupt)
	if len(k) < 2 {
		return nil, bad
	}
	switch k[0] {
	case 1:
		if len(k) != 9 {
			return nil, bad
		}
		var u uint64
		for i := 1; i < 9; i++ {
			u = u<<8 | uint64(k[i])
		}
		return int64(u ^ (1 << 63)), nil
	case 2:
		if len(k) != 2 {
			return nil, bad
		}
		return k[1] == 1, nil
	case 3, 4:
		var out []byte
		for i := 1; i < len(k); i++ {
			if k[i] != 0 {
				out = append(out, k[i])
				continue
			}
			if i+1 >= len(k) {
				return nil, bad
			}
			switch k[i+1] {
			case 0xFF:
				out = append(out, 0)
				i++
			case 0:
				if i+2 != len(k) {
					return nil, bad
				}
				if k[0] == 3 {
					return string(out), nil
				}
				if out == nil {
					out = []byte{}
				}
				return out, nil
			default:
				return nil, bad
			}
		}
	}
	return nil, bad
}
