package commit

import (
	"bytes"
	"hash/fnv"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// MaxKeySetHashes is the largest key set whose hashes a transaction
// carries (about 8 bytes each, inline in the manifest); a larger one
// carries its range only, and conflicts with any overlapping range.
const MaxKeySetHashes = 4096

// KeySetBuilder summarises the primary keys of a transaction (table.KeyOf
// or table.AppendKey encoding) for conflict classification, in bounded
// memory: the range, and the hashes while there are at most
// MaxKeySetHashes keys.
type KeySetBuilder struct {
	min, max []byte
	n        int
	hashes   *roaring64.Bitmap
}

// Add records one key.
func (b *KeySetBuilder) Add(key []byte) {
	if b.n == 0 || bytes.Compare(key, b.min) < 0 {
		b.min = append(b.min[:0], key...)
	}
	if b.n == 0 || bytes.Compare(key, b.max) > 0 {
		b.max = append(b.max[:0], key...)
	}
	b.n++
	if b.n > MaxKeySetHashes {
		b.hashes = nil
		return
	}
	if b.hashes == nil {
		b.hashes = roaring64.New()
	}
	b.hashes.Add(keyHash(key))
}

// KeySet returns the summary (with no key added: a set that intersects
// nothing).
func (b *KeySetBuilder) KeySet() (*pb.KeySet, error) {
	ks := &pb.KeySet{MinKey: bytes.Clone(b.min), MaxKey: bytes.Clone(b.max)}
	if b.n == 0 {
		b.hashes = roaring64.New()
	}
	if b.hashes != nil && b.n <= MaxKeySetHashes {
		h, err := b.hashes.ToBytes()
		if err != nil {
			return nil, err
		}
		ks.Hashes = h
	}
	return ks, nil
}

func keyHash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	return h.Sum64()
}

// keysMayIntersect reports whether two transactions' key sets may share a
// key. A transaction without a key set (from before key sets, or one that
// checked no keys, as a bulk generator's append) relied on no key being
// absent, and shares none.
func keysMayIntersect(a, b *pb.KeySet) bool {
	if a == nil || b == nil {
		return false
	}
	if bytes.Compare(a.MaxKey, b.MinKey) < 0 || bytes.Compare(b.MaxKey, a.MinKey) < 0 {
		return false
	}
	if a.Hashes == nil || b.Hashes == nil {
		return true
	}
	ha, hb := roaring64.New(), roaring64.New()
	if ha.UnmarshalBinary(a.Hashes) != nil || hb.UnmarshalBinary(b.Hashes) != nil {
		return true
	}
	return ha.Intersects(hb)
}

// insertedKeys returns the key set of a transaction that inserts or
// replaces rows by primary key, and whether it is one.
func insertedKeys(t *pb.Transaction) (*pb.KeySet, bool) {
	switch op := t.GetOperation().(type) {
	case *pb.Transaction_Append:
		return op.Append.GetKeys(), true
	case *pb.Transaction_MergeSstables:
		return op.MergeSstables.GetKeys(), true
	}
	return nil, false
}

// KeySetOf summarises keys (see KeySetBuilder).
func KeySetOf(keys ...[]byte) *pb.KeySet {
	var b KeySetBuilder
	for _, k := range keys {
		b.Add(k)
	}
	ks, err := b.KeySet()
	if err != nil { // roaring64 serialises to memory: cannot fail
		return nil
	}
	return ks
}
