package cleanup_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

type opCounter struct {
	storage.Bucket
	ops atomic.Int64
}

func (c *opCounter) Get(ctx context.Context, k string) ([]byte, error) {
	c.ops.Add(1)
	return c.Bucket.Get(ctx, k)
}
func (c *opCounter) List(ctx context.Context, p string, fn func(storage.Attrs) error) error {
	c.ops.Add(1)
	return c.Bucket.List(ctx, p, fn)
}
func (c *opCounter) Delete(ctx context.Context, k string) error {
	c.ops.Add(1)
	return c.Bucket.Delete(ctx, k)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Cleanup of a table with 10 000 versions and 100 000 files on file://
// (CLEANUP_BENCH_VERSIONS / CLEANUP_BENCH_FILES override). Each version
// appends 10 one-row fragments; retaining 10 versions leaves ~100 000 files
// to delete. Reports wall time and object-store operations per deleted file.
func BenchmarkCleanup10kVersions100kFiles(b *testing.B) {
	versions, files := envInt("CLEANUP_BENCH_VERSIONS", 10_000), envInt("CLEANUP_BENCH_FILES", 100_000)
	perVersion := files / versions
	for b.Loop() {
		b.StopTimer()
		ctx := context.Background()
		dir := b.TempDir()
		bk, err := storage.Open(ctx, "file://"+dir)
		if err != nil {
			b.Fatal(err)
		}
		s, _ := table.ParseSchema("id:int64", []string{"id"})
		m := &pb.Manifest{Schema: s}
		old := time.Now().Add(-48 * time.Hour).UnixMicro()
		for v := uint64(1); v <= uint64(versions); v++ {
			m.Version, m.TimestampMicros = v, old+int64(v)
			m.TransactionPath = table.TransactionKey(v-1, uuid.NewString())
			for i := 0; i < perVersion; i++ {
				key := table.DataKey(uuid.NewString())
				if err := bk.Put(ctx, key, []byte("x")); err != nil {
					b.Fatal(err)
				}
				id := uint32(len(m.Fragments))
				m.Fragments = append(m.Fragments, &pb.Fragment{Id: id, PhysicalRows: 1, DataFile: &pb.DataFile{Path: key, SizeBytes: 1}})
			}
			// Keep manifests small: old fragments leave as if deleted.
			if len(m.Fragments) > 2*perVersion {
				m.Fragments = m.Fragments[len(m.Fragments)-perVersion:]
			}
			data, _ := table.EncodeProto(m)
			if err := bk.PutIfAbsent(ctx, table.ManifestKey(v), data); err != nil {
				b.Fatal(err)
			}
		}
		oc := &opCounter{Bucket: bk}
		b.StartTimer()
		res, err := cleanup.Run(ctx, oc, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 10, MinAge: time.Hour}, Concurrency: 32}, time.Now().Add(2*time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		deleted := res.DeletedFiles + res.DeletedVersion
		b.ReportMetric(float64(deleted), "deleted")
		b.ReportMetric(float64(oc.ops.Load())/float64(deleted), "ops/deleted-object")
		_ = bk.Close()
		fmt.Fprintf(os.Stderr, "cleanup: %d versions, %d files deleted, %d ops\n", res.DeletedVersion, res.DeletedFiles, oc.ops.Load())
		b.StartTimer()
	}
}
