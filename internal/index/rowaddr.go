package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrFormat marks a malformed index segment.
var ErrFormat = errors.New("malformed lance index segment")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// RowAddrMap is Lance's RowAddrTreeMap: per fragment id, the row offsets
// it holds, or Full (every row of the fragment).
//
// Serialized (little endian): u32 number of fragments, then per fragment in
// ascending id order u32 fragment id, u32 size, and size bytes of a portable
// Roaring32 bitmap of offsets; size 0 means the whole fragment.
type RowAddrMap struct {
	Frags map[uint32]*roaring.Bitmap // nil value: the whole fragment
}

// NewRowAddrMap is an empty map.
func NewRowAddrMap() *RowAddrMap { return &RowAddrMap{Frags: map[uint32]*roaring.Bitmap{}} }

// Add inserts a row address.
func (m *RowAddrMap) Add(addr uint64) {
	frag, off := uint32(addr>>32), uint32(addr)
	bm, ok := m.Frags[frag]
	if ok && bm == nil {
		return
	}
	if !ok {
		bm = roaring.New()
		m.Frags[frag] = bm
	}
	bm.Add(off)
}

// Addrs lists the addresses in ascending order. full(frag) gives the row
// count of a fragment held whole; without it (nil) a whole fragment is an
// error.
func (m *RowAddrMap) Addrs(full func(frag uint32) (uint64, bool)) ([]uint64, error) {
	var out []uint64
	for _, frag := range slices.Sorted(mapsKeys(m.Frags)) {
		bm := m.Frags[frag]
		if bm == nil {
			n, ok := uint64(0), false
			if full != nil {
				n, ok = full(frag)
			}
			if !ok {
				return nil, fmt.Errorf("fragment %d is held whole and its row count is unknown", frag)
			}
			for i := uint64(0); i < n; i++ {
				out = append(out, uint64(frag)<<32|i)
			}
			continue
		}
		it := bm.Iterator()
		for it.HasNext() {
			out = append(out, uint64(frag)<<32|uint64(it.Next()))
		}
	}
	return out, nil
}

func mapsKeys(m map[uint32]*roaring.Bitmap) func(func(uint32) bool) {
	return func(yield func(uint32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// MarshalBinary serializes the map as Lance does.
func (m *RowAddrMap) MarshalBinary() ([]byte, error) {
	frags := slices.Sorted(mapsKeys(m.Frags))
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(frags)))
	for _, frag := range frags {
		out = binary.LittleEndian.AppendUint32(out, frag)
		bm := m.Frags[frag]
		if bm == nil {
			out = binary.LittleEndian.AppendUint32(out, 0)
			continue
		}
		b, err := bm.ToBytes()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("fragment %d: empty roaring serialization", frag)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out, nil
}

// DecodeRowAddrMap parses a serialized RowAddrTreeMap. Trailing bytes are
// an error.
func DecodeRowAddrMap(b []byte) (*RowAddrMap, error) {
	if len(b) < 4 {
		return nil, formatErr("row address map of %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n)*8 > uint64(len(b)) {
		return nil, formatErr("row address map claims %d fragments in %d bytes", n, len(b))
	}
	m := NewRowAddrMap()
	for i := uint32(0); i < n; i++ {
		if len(b) < 8 {
			return nil, formatErr("row address map truncated at fragment %d", i)
		}
		frag, size := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		b = b[8:]
		if _, dup := m.Frags[frag]; dup {
			return nil, formatErr("row address map names fragment %d twice", frag)
		}
		if size == 0 {
			m.Frags[frag] = nil
			continue
		}
		if uint64(size) > uint64(len(b)) {
			return nil, formatErr("fragment %d: bitmap of %d bytes, %d left", frag, size, len(b))
		}
		bm := roaring.New()
		if err := safeUnmarshal(bm, b[:size]); err != nil {
			return nil, formatErr("fragment %d: %v", frag, err)
		}
		m.Frags[frag] = bm
		b = b[size:]
	}
	if len(b) != 0 {
		return nil, formatErr("row address map has %d trailing bytes", len(b))
	}
	return m, nil
}

// safeUnmarshal decodes a portable roaring bitmap whose length must match
// exactly; a panic inside the library (hostile input) becomes an error.
func safeUnmarshal(bm *roaring.Bitmap, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("roaring: %v", r)
		}
	}()
	n, err := bm.ReadFrom(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if n != int64(len(b)) {
		return fmt.Errorf("roaring bitmap of %d bytes in a field of %d", n, len(b))
	}
	if err := bm.Validate(); err != nil {
		return err
	}
	return nil
}
