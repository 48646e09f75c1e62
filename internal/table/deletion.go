package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
)

const deletionMagic = "CDEL"

// WriteDeletionFile stores the deleted offsets of a fragment. The file is
// framed with a CRC32C: roaring's own format carries no checksum, and a
// damaged bitmap would silently resurrect or hide rows.
func WriteDeletionFile(ctx context.Context, b storage.Bucket, fragment uint32, readVersion uint64, bm *roaring.Bitmap) (*pb.DeletionFile, error) {
	bm.RunOptimize()
	body, err := bm.ToBytes()
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, len(body)+8)
	data = append(data, deletionMagic...)
	data = append(data, body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
	key := DeletionKey(fragment, readVersion, uuid.NewString())
	if err := b.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("write deletion file %s: %w", key, err)
	}
	return &pb.DeletionFile{Path: key, NumDeleted: bm.GetCardinality(), SizeBytes: uint64(len(data))}, nil
}

// ReadDeletionFile loads a fragment's deleted offsets; nil df gives an empty
// bitmap.
func ReadDeletionFile(ctx context.Context, b storage.Bucket, df *pb.DeletionFile) (*roaring.Bitmap, error) {
	if df == nil || df.Path == "" {
		return roaring.New(), nil
	}
	data, err := b.Get(ctx, df.Path)
	if err != nil {
		return nil, fmt.Errorf("read deletion file %s: %w", df.Path, err)
	}
	if len(data) < 8 || string(data[:4]) != deletionMagic {
		return nil, fmt.Errorf("deletion file %s: %w: bad header", df.Path, ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("deletion file %s: %w: checksum mismatch", df.Path, ErrCorrupt)
	}
	bm := roaring.New()
	if _, err := bm.FromUnsafeBytes(append([]byte(nil), body[4:]...)); err != nil {
		return nil, fmt.Errorf("deletion file %s: %w: %v", df.Path, ErrCorrupt, err)
	}
	if bm.GetCardinality() != df.NumDeleted {
		return nil, fmt.Errorf("deletion file %s: %w: holds %d rows, manifest says %d", df.Path, ErrCorrupt, bm.GetCardinality(), df.NumDeleted)
	}
	return bm, nil
}

// ScanFragment calls fn for every live row of a fragment.
func ScanFragment(ctx context.Context, b storage.Bucket, s *pb.Schema, f *pb.Fragment, fn func(offset uint32, r Row) error) error {
	del, err := ReadDeletionFile(ctx, b, f.DeletionFile)
	if err != nil {
		return err
	}
	var skip func(uint32) bool
	if !del.IsEmpty() {
		skip = del.Contains
	}
	return ScanParquet(ctx, b, s, f.DataFile.Path, int64(f.DataFile.SizeBytes), skip, fn)
}
