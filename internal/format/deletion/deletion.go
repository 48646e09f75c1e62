// Package deletion reads and writes Lance deletion files, the per-fragment
// lists of deleted row offsets under _deletions/.
//
// Lance has two encodings, chosen by size as LanceDB 0.39 (lance 12) does:
//
//   - ARROW_ARRAY (.arrow): an Arrow IPC file with one batch of one
//     non-nullable UInt32 column "row_id", ZSTD-compressed, in no
//     particular order. Used below BitmapThreshold deleted rows.
//   - BITMAP (.bin): a portable 32-bit Roaring bitmap, from
//     BitmapThreshold deleted rows up.
//
// Either way the offsets are positions in the fragment's physical rows
// (deleted rows included), so every offset must be below physical_rows.
package deletion

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
)

// Dir is the table-relative directory of deletion files.
const Dir = "_deletions"

// BitmapThreshold is the deleted-row count from which Lance writes a bitmap.
// Verified against LanceDB 0.39: a delete of 4999 rows writes .arrow, of
// 5000 or 5001 rows .bin (lance-core's DeletionVector::extend promotes a
// fresh vector at lower size hint >= 5000). Lance's own incremental path
// (a second delete extending an existing set) promotes only above 5000, so
// 5000-row .arrow files also occur in real tables; readers accept both.
const BitmapThreshold = 5000

// ColumnName is the name of the single column of an .arrow deletion file.
const ColumnName = "row_id"

// Suffix is the file extension of a deletion file type.
func Suffix(t lancepb.DeletionFile_DeletionFileType) string {
	if t == lancepb.DeletionFile_BITMAP {
		return "bin"
	}
	return "arrow"
}

// Key is the table-relative key of fragment fragID's deletion file df:
// _deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}, with id in
// decimal (lance formats the u64 with {}).
func Key(fragID uint64, df *lancepb.DeletionFile) string {
	return fmt.Sprintf("%s/%d-%d-%d.%s", Dir, fragID, df.GetReadVersion(), df.GetId(), Suffix(df.GetFileType()))
}

// Decode reads deletion file data of type df.FileType and returns the deleted
// offsets. Offsets at or beyond physicalRows, duplicates in an .arrow file,
// and a count different from a non-zero df.NumDeletedRows are corruption.
func Decode(df *lancepb.DeletionFile, data []byte, physicalRows uint64) (*roaring.Bitmap, error) {
	var bm *roaring.Bitmap
	var err error
	switch df.GetFileType() {
	case lancepb.DeletionFile_ARROW_ARRAY:
		bm, err = decodeArrow(data)
	case lancepb.DeletionFile_BITMAP:
		bm, err = decodeBitmap(data)
	default:
		return nil, fmt.Errorf("deletion: unknown deletion file type %d", df.GetFileType())
	}
	if err != nil {
		return nil, err
	}
	if !bm.IsEmpty() {
		if m := uint64(bm.Maximum()); m >= physicalRows {
			return nil, fmt.Errorf("deletion: corrupt deletion file: offset %d is beyond the fragment's %d physical rows", m, physicalRows)
		}
	}
	if n := df.GetNumDeletedRows(); n != 0 && n != bm.GetCardinality() {
		return nil, fmt.Errorf("deletion: corrupt deletion file: %d offsets, the manifest says %d", bm.GetCardinality(), n)
	}
	return bm, nil
}

func decodeArrow(data []byte) (*roaring.Bitmap, error) {
	st, err := arrowipc.ReadFile(data, nil)
	if err != nil {
		return nil, fmt.Errorf("deletion: .arrow file: %w", err)
	}
	if len(st.Schema.Fields) != 1 || st.Schema.Fields[0].Type != arrowipc.TUint32 || st.Schema.Fields[0].Dict != nil {
		return nil, fmt.Errorf("deletion: .arrow file has schema %v, want one uint32 column", st.Schema.Fields)
	}
	bm := roaring.New()
	n := 0
	for _, b := range st.Batches {
		c := b.Columns[0]
		if c.NullCount > 0 {
			return nil, errors.New("deletion: .arrow file has null row offsets")
		}
		vs := c.Uint32s()
		bm.AddMany(vs)
		n += len(vs)
	}
	if uint64(n) != bm.GetCardinality() {
		return nil, fmt.Errorf("deletion: corrupt deletion file: %d offsets of which only %d distinct", n, bm.GetCardinality())
	}
	return bm, nil
}

func decodeBitmap(data []byte) (*roaring.Bitmap, error) {
	bm := roaring.New()
	// FromUnsafeBytes would alias data; ReadFrom copies and validates.
	n, err := bm.ReadFrom(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("deletion: .bin file is not a portable roaring bitmap: %w", err)
	}
	if n != int64(len(data)) {
		return nil, fmt.Errorf("deletion: .bin file has %d bytes after the bitmap", int64(len(data))-n)
	}
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("deletion: .bin file: %w", err)
	}
	return bm, nil
}

// Encode encodes bm, the deleted offsets of fragment fragID, as a new
// deletion file written at readVersion: it chooses the encoding as Lance does
// (BITMAP from BitmapThreshold rows up), assigns a random id, and returns the
// DeletionFile for the manifest, the file's table-relative key and its bytes.
// The .arrow form lists offsets in ascending order (Lance accepts any order).
func Encode(fragID uint64, bm *roaring.Bitmap, readVersion uint64) (df *lancepb.DeletionFile, key string, data []byte, err error) {
	n := bm.GetCardinality()
	if n == 0 {
		return nil, "", nil, errors.New("deletion: no deleted rows (a fragment without deletions has no deletion file)")
	}
	df = &lancepb.DeletionFile{ReadVersion: readVersion, Id: randomID(), NumDeletedRows: n}
	if n >= BitmapThreshold {
		df.FileType = lancepb.DeletionFile_BITMAP
		bm = bm.Clone()
		bm.RunOptimize()
		if data, err = bm.ToBytes(); err != nil {
			return nil, "", nil, fmt.Errorf("deletion: %w", err)
		}
	} else {
		df.FileType = lancepb.DeletionFile_ARROW_ARRAY
		if data, err = EncodeArrow(bm.ToArray(), arrowipc.ZSTD); err != nil {
			return nil, "", nil, err
		}
	}
	return df, Key(fragID, df), data, nil
}

// Schema is the schema of an .arrow deletion file.
func Schema() *arrowipc.Schema {
	return &arrowipc.Schema{Fields: []arrowipc.Field{{Name: ColumnName, Type: arrowipc.TUint32}}}
}

// EncodeArrow writes offsets (in the given order) as an .arrow deletion file
// body with the given compression; Lance writes ZSTD.
func EncodeArrow(offsets []uint32, codec arrowipc.Compression) ([]byte, error) {
	b := &arrowipc.Batch{Len: len(offsets), Columns: []*arrowipc.Array{arrowipc.FixedArray(arrowipc.TUint32, offsets, nil)}}
	data, err := arrowipc.WriteFile(Schema(), []*arrowipc.Batch{b}, codec)
	if err != nil {
		return nil, fmt.Errorf("deletion: %w", err)
	}
	return data, nil
}

// randomID is a random u64 for a new deletion file, as Lance uses, so that
// two writers deleting in the same fragment at the same read version do not
// pick the same key.
func randomID() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Getter reads an object; storage.Bucket is one.
type Getter interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// Read loads the deletion vector df of fragment fragID (physicalRows rows,
// which bound its offsets) from b. Without a deletion file it is empty.
func Read(ctx context.Context, b Getter, fragID uint64, df *lancepb.DeletionFile, physicalRows uint64) (*roaring.Bitmap, error) {
	if df == nil {
		return roaring.New(), nil
	}
	key := Key(fragID, df)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("fragment %d: deletion file: %w", fragID, err)
	}
	bm, err := Decode(df, data, physicalRows)
	if err != nil {
		return nil, fmt.Errorf("fragment %d: %s: %w", fragID, key, err)
	}
	return bm, nil
}
