package meta

import (
	"fmt"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/lancepb"
)

// System index names and the type URLs of the index kinds compactord knows.
const (
	MemWalIndexName    = "__lance_mem_wal"
	FragReuseIndexName = "__lance_frag_reuse"

	TypeURLBTree     = "/lance.table.BTreeIndexDetails"
	TypeURLBitmap    = "/lance.table.BitmapIndexDetails"
	TypeURLMemWal    = "/lance.table.MemWalIndexDetails"
	TypeURLFragReuse = "/lance.table.FragmentReuseIndexDetails"
)

// IsSystemIndex reports whether an index is one of Lance's system indexes,
// which cover no rows.
func IsSystemIndex(ix *pb.IndexMetadata) bool {
	return ix.GetName() == MemWalIndexName || ix.GetName() == FragReuseIndexName
}

// IndexKind is a short name of an index's type ("btree", "bitmap",
// "mem_wal", "frag_reuse", or the type URL's message name in lower case).
func IndexKind(ix *pb.IndexMetadata) string {
	url := ix.GetIndexDetails().GetTypeUrl()
	switch {
	case strings.EqualFold(url, TypeURLBTree):
		return "btree"
	case strings.EqualFold(url, TypeURLBitmap):
		return "bitmap"
	case strings.EqualFold(url, TypeURLMemWal):
		return "mem_wal"
	case strings.EqualFold(url, TypeURLFragReuse):
		return "frag_reuse"
	case url == "":
		return "unknown"
	}
	name := url[strings.LastIndex(url, "/")+1:]
	name = name[strings.LastIndex(name, ".")+1:]
	return strings.ToLower(strings.TrimSuffix(name, "IndexDetails"))
}

// UUIDString renders a 16-byte UUID message.
func UUIDString(u *pb.UUID) string {
	id, err := uuid.FromBytes(u.GetUuid())
	if err != nil {
		return fmt.Sprintf("%x", u.GetUuid())
	}
	return id.String()
}

// NewUUID is a random UUID as Lance stores it.
func NewUUID() (*pb.UUID, string) {
	id := uuid.New()
	b := id
	return &pb.UUID{Uuid: b[:]}, id.String()
}

// ParseUUID parses a hyphenated UUID into the message form.
func ParseUUID(s string) (*pb.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return nil, err
	}
	return &pb.UUID{Uuid: id[:]}, nil
}

// FragmentBitmap decodes an index's fragment bitmap. known is false for an
// index without one, which covers an unknown set of fragments.
func FragmentBitmap(ix *pb.IndexMetadata) (bm *roaring.Bitmap, known bool, err error) {
	raw := ix.GetFragmentBitmap()
	if len(raw) == 0 {
		return roaring.New(), false, nil
	}
	bm = roaring.New()
	if err := bm.UnmarshalBinary(raw); err != nil {
		return nil, false, fmt.Errorf("index %s (%s): fragment bitmap: %w", ix.GetName(), UUIDString(ix.GetUuid()), err)
	}
	return bm, true, nil
}

// EncodeBitmap is the portable Roaring32 form Lance stores.
func EncodeBitmap(bm *roaring.Bitmap) []byte {
	bm.RunOptimize()
	b, _ := bm.ToBytes()
	return b
}

// FindIndex returns the segments of the logical index name.
func FindIndex(ixs []*pb.IndexMetadata, name string) []*pb.IndexMetadata {
	var out []*pb.IndexMetadata
	for _, ix := range ixs {
		if ix.GetName() == name {
			out = append(out, ix)
		}
	}
	return out
}
