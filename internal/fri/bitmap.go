package fri

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// ErrCorrupt marks FRI or fragment-bitmap bytes that cannot be decoded or
// that contradict themselves. A caller should stop rather than guess: a
// wrong remap loses or resurrects rows.
var ErrCorrupt = errors.New("corrupt fragment-reuse data")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// DecodeBitmap32 decodes a portable roaring32 bitmap strictly: the bytes
// must be consumed exactly and the containers must validate. Zero bytes
// decode to the empty bitmap (the proto3 default of removed_fragments). A
// panic inside the roaring decoder on hostile bytes becomes an ErrCorrupt
// error.
func DecodeBitmap32(b []byte) (bm *roaring.Bitmap, err error) {
	bm = roaring.New()
	if len(b) == 0 {
		return bm, nil
	}
	defer func() {
		if r := recover(); r != nil {
			bm, err = nil, corruptf("roaring32: decoder panicked: %v", r)
		}
	}()
	r := bytes.NewReader(b)
	if _, err := bm.ReadFrom(r); err != nil {
		return nil, corruptf("roaring32: %v", err)
	}
	if r.Len() != 0 {
		return nil, corruptf("roaring32: %d trailing bytes", r.Len())
	}
	if err := bm.Validate(); err != nil {
		return nil, corruptf("roaring32: %v", err)
	}
	return bm, nil
}

func encodeBitmap32(bm *roaring.Bitmap) []byte {
	if bm == nil {
		bm = roaring.New()
	}
	c := bm.Clone()
	c.RunOptimize()
	b, _ := c.ToBytes() // writing to memory cannot fail
	return b
}

// keyedBitmap is one high-32-bit bucket of a roaring64 bitmap: for row
// addresses, one fragment and its offsets.
type keyedBitmap struct {
	key uint32
	bm  *roaring.Bitmap
}

// minRoaring32Bytes is the smallest serialized roaring32 bitmap (cookie and
// container count). It bounds the bucket count a roaring64 header may
// claim, so a corrupt count cannot make us allocate gigabytes.
const minRoaring32Bytes = 8

// decodeBitmap64 decodes a portable roaring64 bitmap (what Rust's
// RoaringTreemap::serialize_into writes: a u64 bucket count, then per
// bucket a u32 key and a portable roaring32) into its buckets, keys
// strictly increasing, empty buckets dropped. Zero bytes decode to none.
func decodeBitmap64(b []byte) (out []keyedBitmap, err error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 8 {
		return nil, corruptf("roaring64: %d bytes is shorter than the header", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > uint64(len(b)-8)/(4+minRoaring32Bytes) {
		return nil, corruptf("roaring64: header claims %d buckets in %d bytes", n, len(b))
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, corruptf("roaring64: decoder panicked: %v", r)
		}
	}()
	r := bytes.NewReader(b[8:])
	out = make([]keyedBitmap, 0, n)
	var key [4]byte
	for i := uint64(0); i < n; i++ {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return nil, corruptf("roaring64: bucket %d key: %v", i, err)
		}
		k := binary.LittleEndian.Uint32(key[:])
		if len(out) > 0 && k <= out[len(out)-1].key {
			return nil, corruptf("roaring64: bucket keys out of order (%d after %d)", k, out[len(out)-1].key)
		}
		bm := roaring.New()
		if _, err := bm.ReadFrom(r); err != nil {
			return nil, corruptf("roaring64: bucket %d: %v", k, err)
		}
		if err := bm.Validate(); err != nil {
			return nil, corruptf("roaring64: bucket %d: %v", k, err)
		}
		if bm.IsEmpty() {
			continue
		}
		out = append(out, keyedBitmap{key: k, bm: bm})
	}
	if r.Len() != 0 {
		return nil, corruptf("roaring64: %d trailing bytes", r.Len())
	}
	return out, nil
}

// bucketsOf splits a set of row addresses by fragment, keys ascending,
// empty buckets dropped. roaring64 keeps exactly these buckets (one 32-bit
// bitmap per high 32 bits) and writes them in the portable form that
// decodeBitmap64 reads, so the split costs a copy of the containers
// instead of one insertion per address (millions per compacted group).
func bucketsOf(bm *roaring64.Bitmap) []keyedBitmap {
	if bm == nil || bm.IsEmpty() {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(int(bm.GetSerializedSizeInBytes()))
	if _, err := bm.WriteTo(&buf); err == nil {
		if out, err := decodeBitmap64(buf.Bytes()); err == nil {
			return out
		}
	}
	// What roaring64 wrote in this process always decodes; should it
	// not, the split by address below gives the same buckets.
	return bucketsByAddress(bm)
}

// bucketsByAddress is bucketsOf one address at a time.
func bucketsByAddress(bm *roaring64.Bitmap) []keyedBitmap {
	var out []keyedBitmap
	buf := make([]uint64, 4096)
	offs := make([]uint32, 0, 4096)
	it := bm.ManyIterator()
	for {
		n := it.NextMany(buf)
		if n == 0 {
			break
		}
		for _, a := range buf[:n] {
			k := uint32(a >> 32)
			if len(out) == 0 || out[len(out)-1].key != k {
				if len(out) > 0 {
					out[len(out)-1].bm.AddMany(offs)
					offs = offs[:0]
				}
				out = append(out, keyedBitmap{key: k, bm: roaring.New()})
			}
			offs = append(offs, uint32(a))
		}
		out[len(out)-1].bm.AddMany(offs)
		offs = offs[:0]
	}
	return out
}

// encodeBitmap64 is the portable roaring64 form of a set of row addresses,
// which Rust's RoaringTreemap::deserialize_from reads.
func encodeBitmap64(bm *roaring64.Bitmap) []byte {
	var buf bytes.Buffer
	var hdr [8]byte
	buckets := bucketsOf(bm)
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(buckets)))
	buf.Write(hdr[:])
	for _, kb := range buckets {
		binary.LittleEndian.PutUint32(hdr[:4], kb.key)
		buf.Write(hdr[:4])
		kb.bm.RunOptimize()
		_, _ = kb.bm.WriteTo(&buf) // writing to memory cannot fail
	}
	return buf.Bytes()
}
