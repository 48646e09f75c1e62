package commit

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/storage"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// rebaseRewrite applies deletions committed since our read to the new
// fragments of our compaction, through our row map.
func rebaseRewrite(ctx context.Context, b storage.Bucket, txn *pb.Transaction, read, head *pb.Manifest) (*pb.Transaction, []string, error) {
	return nil, nil, &ConflictError{Class: ErrRetryable, Ours: "rewrite", Reason: fmt.Sprintf("rows of our old fragments were deleted since version %d", read.GetVersion())}
}
