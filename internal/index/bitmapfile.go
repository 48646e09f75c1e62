package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/compactord/compactord/internal/storage"
)

// A bitmap segment is one framed file:
//
//	"CBMX" | format byte | uvarint entries |
//	  per entry, keys ascending: uvarint len, key, uvarint len, roaring64 |
//	CRC32C (little endian) of everything before it
//
// roaring's own format carries no checksum; the frame turns a truncated or
// damaged file into ErrCorrupt instead of silently wrong postings.
const (
	bitmapFileName = "bitmap.bin"
	bitmapMagic    = "CBMX"
	bitmapFormat   = byte(1)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type bitmapEntry struct {
	key []byte
	bm  *roaring64.Bitmap
}

// bitmapBuilder accumulates postings in memory: the type is for
// low-cardinality columns, and maxKeys bounds it.
type bitmapBuilder struct {
	maxKeys int
	m       map[string]*roaring64.Bitmap
}

func newBitmapBuilder(maxKeys int) *bitmapBuilder {
	return &bitmapBuilder{maxKeys: maxKeys, m: map[string]*roaring64.Bitmap{}}
}

func (b *bitmapBuilder) add(k []byte, addrs ...uint64) error {
	bm := b.m[string(k)]
	if bm == nil {
		if len(b.m) >= b.maxKeys {
			return fmt.Errorf("%w: more than %d distinct values; a bitmap index is for low-cardinality columns (use btree)", ErrBadSpec, b.maxKeys)
		}
		bm = roaring64.New()
		b.m[string(k)] = bm
	}
	bm.AddMany(addrs)
	return nil
}

// encode returns the file bytes and the number of (key, address) entries.
func (b *bitmapBuilder) encode() ([]byte, uint64, error) {
	keys := make([]string, 0, len(b.m))
	for k, bm := range b.m {
		if !bm.IsEmpty() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	buf.WriteString(bitmapMagic)
	buf.WriteByte(bitmapFormat)
	buf.Write(binary.AppendUvarint(nil, uint64(len(keys))))
	var entries uint64
	for _, k := range keys {
		bm := b.m[k]
		bm.RunOptimize()
		body, err := bm.MarshalBinary()
		if err != nil {
			return nil, 0, err
		}
		buf.Write(binary.AppendUvarint(nil, uint64(len(k))))
		buf.WriteString(k)
		buf.Write(binary.AppendUvarint(nil, uint64(len(body))))
		buf.Write(body)
		entries += bm.GetCardinality()
	}
	out := buf.Bytes()
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), entries, nil
}

// readBitmapFile loads and checks a bitmap segment.
func readBitmapFile(ctx context.Context, b storage.Bucket, key string) ([]bitmapEntry, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			return nil, fmt.Errorf("%s is missing: %w", key, err)
		}
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return decodeBitmapFile(key, data)
}

func decodeBitmapFile(key string, data []byte) (out []bitmapEntry, err error) {
	if len(data) < len(bitmapMagic)+1+4 || string(data[:4]) != bitmapMagic {
		return nil, corruptf("%s: not a bitmap segment", key)
	}
	if data[4] != bitmapFormat {
		return nil, corruptf("%s: unsupported format %d", key, data[4])
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, corruptf("%s: checksum mismatch (truncated or damaged)", key)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, corruptf("%s: roaring decoder panicked: %v", key, r)
		}
	}()
	p := body[5:]
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, errors.New("bad length")
		}
		v := p[k : k+int(n)]
		p = p[k+int(n):]
		return v, nil
	}
	count, k := binary.Uvarint(p)
	if k <= 0 || count > uint64(len(p)) {
		return nil, corruptf("%s: bad entry count", key)
	}
	p = p[k:]
	for i := uint64(0); i < count; i++ {
		kb, err := next()
		if err != nil {
			return nil, corruptf("%s: entry %d key: %v", key, i, err)
		}
		if len(out) > 0 && bytes.Compare(out[len(out)-1].key, kb) >= 0 {
			return nil, corruptf("%s: keys out of order", key)
		}
		bb, err := next()
		if err != nil {
			return nil, corruptf("%s: entry %d bitmap: %v", key, i, err)
		}
		bm := roaring64.New()
		if err := bm.UnmarshalBinary(bb); err != nil {
			return nil, corruptf("%s: entry %d bitmap: %v", key, i, err)
		}
		out = append(out, bitmapEntry{key: slices.Clone(kb), bm: bm})
	}
	if len(p) != 0 {
		return nil, corruptf("%s: %d trailing bytes", key, len(p))
	}
	return out, nil
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
