package meta

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/storage"
)

// OperationName is the snake_case name of a transaction's operation, as
// inspect prints it ("append", "create_index", "update_mem_wal_state", …).
// A transaction whose operation compactord does not model (a newer
// writer's) is "unknown": its bytes survive as unknown fields, but there is
// no name to give it.
func OperationName(t *pb.Transaction) string {
	switch t.GetOperation().(type) {
	case *pb.Transaction_Append_:
		return "append"
	case *pb.Transaction_Delete_:
		return "delete"
	case *pb.Transaction_Overwrite_:
		return "overwrite"
	case *pb.Transaction_CreateIndex_:
		return "create_index"
	case *pb.Transaction_Rewrite_:
		return "rewrite"
	case *pb.Transaction_Merge_:
		return "merge"
	case *pb.Transaction_Restore_:
		return "restore"
	case *pb.Transaction_ReserveFragments_:
		return "reserve_fragments"
	case *pb.Transaction_Update_:
		return "update"
	case *pb.Transaction_Project_:
		return "project"
	case *pb.Transaction_UpdateConfig_:
		return "update_config"
	case *pb.Transaction_DataReplacement_:
		return "data_replacement"
	case *pb.Transaction_UpdateMemWalState_:
		return "update_mem_wal_state"
	case *pb.Transaction_Clone_:
		return "clone"
	case *pb.Transaction_UpdateBases_:
		return "update_bases"
	case *pb.Transaction_DataOverlay_:
		return "data_overlay"
	}
	return "unknown"
}

// FragReuseDetailsKey is the key of an FRI's external details file. Lance
// records the file's path in ExternalFile.path; whether that path is
// relative to the index directory or to the object store root is not
// confirmed against lance 12 (no LanceDB 0.39 table we built reached the
// 200 KiB threshold), so both are accepted: a path containing "_indices/"
// is taken from there, anything else is relative to the index directory.
func FragReuseDetailsKey(indexUUID, path string) string {
	if i := strings.LastIndex(path, IndicesDir); i >= 0 {
		return path[i:]
	}
	return IndexDir(indexUUID) + strings.TrimPrefix(path, "/")
}

// FragReuseContent decodes the FRI's details: the inline content, or the
// external file it points to (a raw InlineContent at offset, size).
func FragReuseContent(ctx context.Context, b storage.Bucket, ix *pb.IndexMetadata) (*pb.FragmentReuseIndexDetails_InlineContent, error) {
	a := ix.GetIndexDetails()
	if !strings.EqualFold(a.GetTypeUrl(), TypeURLFragReuse) {
		return nil, fmt.Errorf("index %s: details are %q, not fragment-reuse details", ix.GetName(), a.GetTypeUrl())
	}
	d := &pb.FragmentReuseIndexDetails{}
	if err := proto.Unmarshal(a.GetValue(), d); err != nil {
		return nil, fmt.Errorf("index %s (%s): fragment-reuse details: %w", ix.GetName(), UUIDString(ix.GetUuid()), err)
	}
	if in := d.GetInline(); in != nil {
		return in, nil
	}
	ext := d.GetExternal()
	if ext == nil {
		return &pb.FragmentReuseIndexDetails_InlineContent{}, nil
	}
	key := FragReuseDetailsKey(UUIDString(ix.GetUuid()), ext.GetPath())
	length := int64(-1)
	if ext.GetSize() > 0 {
		length = int64(ext.GetSize())
	}
	if ext.GetOffset() > 1<<62 || ext.GetSize() > maxSection {
		return nil, &CorruptError{Key: key, Err: fmt.Errorf("external range %d+%d is out of bounds", ext.GetOffset(), ext.GetSize())}
	}
	r, err := b.NewRangeReader(ctx, key, int64(ext.GetOffset()), length)
	if err != nil {
		return nil, fmt.Errorf("read fragment-reuse details %s: %w", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read fragment-reuse details %s: %w", key, err)
	}
	in := &pb.FragmentReuseIndexDetails_InlineContent{}
	if err := proto.Unmarshal(data, in); err != nil {
		return nil, &CorruptError{Key: key, Err: err}
	}
	return in, nil
}
