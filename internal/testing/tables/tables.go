// Package tables opens a local Lance table for tests the way the
// daemon and the CLI do: a file:// bucket and a committer with the default
// commit configuration.
package tables

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Open opens the Lance table in dir; its bucket is closed when the test
// ends.
func Open(t testing.TB, dir string) *table.Handle {
	t.Helper()
	b, err := storage.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// RewriteLatest decodes the table's newest manifest, lets edit change it,
// and writes it back in place: a fixture of what another writer (a newer
// Lance's, say) could have committed. Tests only: a real writer commits a
// new version.
func RewriteLatest(t testing.TB, b storage.Bucket, edit func(f *meta.ManifestFile)) {
	t.Helper()
	ctx := context.Background()
	f, n, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	edit(f)
	data, err := meta.EncodeManifestFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, meta.ManifestKey(n, f.Manifest.GetVersion()), data); err != nil {
		t.Fatal(err)
	}
}

// EditMemWal lets edit change the MemWAL index details of f.
func EditMemWal(t testing.TB, f *meta.ManifestFile, edit func(d *pb.MemWalIndexDetails)) {
	t.Helper()
	ix := memwal.Index(f.Indices)
	d, err := memwal.Details(ix)
	if err != nil {
		t.Fatal(err)
	}
	edit(d)
	if ix.IndexDetails, err = memwal.EncodeDetails(d); err != nil {
		t.Fatal(err)
	}
}
