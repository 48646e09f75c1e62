package table_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// TestReadCleanedUp: a missing object is a lost race only when the
// manifest of the version read is gone too; while that version is there,
// the missing object is damage and the error stays as it was.
func TestReadCleanedUp(t *testing.T) {
	ctx := t.Context()
	h := openHandle(t, t.TempDir())
	fields := []*pb.Field{{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"}}
	if _, err := table.Create(ctx, h.Bucket, fields, "2.2", time.Now()); err != nil {
		t.Fatal(err)
	}
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.AppendJSON(ctx, strings.NewReader(`{"id":1}`+"\n")); err != nil {
		t.Fatal(err)
	}
	_, missing := h.Bucket.Get(ctx, "data/gone.lance")
	if !errors.Is(missing, storage.ErrNotFound) {
		t.Fatalf("get of a missing object: %v", missing)
	}
	other := errors.New("disk on fire")

	if got := table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", missing); got != missing {
		t.Fatalf("with the read version there: %v, want the error unchanged", got)
	}
	if err := h.Bucket.Delete(ctx, meta.ManifestKey(naming, read.Manifest.GetVersion())); err != nil {
		t.Fatal(err)
	}
	got := table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", missing)
	var ce *commit.ConflictError
	if !errors.Is(got, table.ErrReadCleanedUp) || !errors.Is(got, commit.ErrRetryable) || !errors.As(got, &ce) {
		t.Fatalf("with the read version cleaned up: %v, want a retryable conflict marked ErrReadCleanedUp", got)
	}
	// Not a missing object any more: what treats one as damage (the
	// daemon quarantines a table missing a data file) must not see it.
	if errors.Is(got, storage.ErrNotFound) {
		t.Fatalf("%v still matches storage.ErrNotFound", got)
	}
	if !strings.Contains(got.Error(), "removed by a cleanup") || strings.Contains(got.Error(), "\n") {
		t.Fatalf("message %q", got)
	}
	if again := table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", got); again != got {
		t.Fatalf("marked twice: %v", again)
	}
	if got := table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", other); got != other {
		t.Fatalf("another error: %v", got)
	}
	if got := table.ReadCleanedUp(ctx, h.Bucket, naming, read, "merge", nil); got != nil {
		t.Fatalf("no error: %v", got)
	}
}
