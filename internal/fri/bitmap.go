package fri

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrCorrupt marks FRI or fragment-bitmap bytes that cannot be decoded or that
// contradict themselves. A caller should halt the table rather than guess.
var ErrCorrupt = errors.New("corrupt fragment-reuse data")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// EncodeBitmap32 serializes a roaring32 bitmap in the portable format.
func EncodeBitmap32(bm *roaring.Bitmap) ([]byte, error) {
	if bm == nil {
		bm = roaring.New()
	}
	return bm.ToBytes()
}

// DecodeBitmap32 decodes a portable roaring32 bitmap strictly: the bytes must
// be consumed exactly and the containers must validate. Zero bytes decode to
// the empty bitmap (the proto3 default of removed_fragments). It never
// panics: a panic inside the roaring decoder on hostile bytes is turned into
// an ErrCorrupt error.
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

// keyedBitmap is one high-32-bit bucket of a roaring64 bitmap: for row
// addresses, one fragment and its offsets.
type keyedBitmap struct {
	key uint32
	bm  *roaring.Bitmap
}

// minRoaring32Bytes is the smallest serialized roaring32 bitmap (cookie and
// container count). It bounds the container count a roaring64 header may
// claim, so a corrupt count cannot make us allocate gigabytes.
const minRoaring32Bytes = 8

// decodeBitmap64 decodes a portable roaring64 bitmap (the 64-bit extension of
// the RoaringFormatSpec: a uint64 count, then per bucket a uint32 key and a
// roaring32 bitmap) into its buckets, keys strictly increasing. Decoding the
// buckets ourselves keeps each fragment's offsets as a roaring32 bitmap, which
// is what Compile needs, and lets us bound the header before allocating.
// Zero bytes decode to no buckets. Empty buckets are dropped.
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

// encodeBitmap64 writes buckets (keys strictly increasing) in the portable
// roaring64 format; roaring64.Bitmap.UnmarshalBinary reads it back.
func encodeBitmap64(buckets []keyedBitmap) ([]byte, error) {
	var buf bytes.Buffer
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(buckets)))
	buf.Write(hdr[:])
	for i, kb := range buckets {
		if i > 0 && kb.key <= buckets[i-1].key {
			return nil, fmt.Errorf("roaring64: bucket keys out of order (%d after %d)", kb.key, buckets[i-1].key)
		}
		binary.LittleEndian.PutUint32(hdr[:4], kb.key)
		buf.Write(hdr[:4])
		if _, err := kb.bm.WriteTo(&buf); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
