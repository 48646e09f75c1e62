// Package tables opens a local Lance table for tests the way the
// daemon and the CLI do: a file:// bucket and a committer with the default
// commit configuration.
package tables

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
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
