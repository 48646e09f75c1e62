package cli

import (
	"context"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/verify"
)

// The index package sits above verify, so --deep is wired here.
func init() {
	deepCheck = func() verify.Options {
		return verify.Options{DeepCheck: func(ctx context.Context, b storage.Bucket, m *pb.Manifest) ([]verify.Violation, error) {
			ps, err := index.DeepCheck(ctx, b, m)
			out := make([]verify.Violation, len(ps))
			for i, p := range ps {
				out[i] = verify.Violation{Object: p.Object, Reason: p.Reason}
			}
			return out, err
		}}
	}
}
