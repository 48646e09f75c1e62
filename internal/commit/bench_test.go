package commit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

func bigManifest(n int) *pb.Manifest {
	s, _ := table.ParseSchema("id:int64,v:string", []string{"id"})
	m := &pb.Manifest{Version: 10, Schema: s, MaxFragmentId: proto.Uint32(uint32(n - 1))}
	for i := 0; i < n; i++ {
		m.Fragments = append(m.Fragments, &pb.Fragment{Id: uint32(i), PhysicalRows: 1000,
			DataFile: &pb.DataFile{Path: fmt.Sprintf("data/%08d-0000-0000-0000-000000000000.parquet", i), SizeBytes: 1 << 20}})
	}
	return m
}

// BuildManifest on a 100 000-fragment manifest (goal: under 20 ms).
func BenchmarkBuildManifest100kFragments(b *testing.B) {
	head := bigManifest(100_000)
	txn := &pb.Transaction{ReadVersion: 10, Uuid: "u", Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{{PhysicalRows: 5, DataFile: &pb.DataFile{Path: "data/new.parquet"}}}}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := commit.BuildManifest(head, txn, head); err != nil {
			b.Fatal(err)
		}
	}
}

// Commits per second with N concurrent committers, each committing tiny
// appends (the commit loop itself, not data writing, is measured).
func BenchmarkCommitThroughput(b *testing.B) {
	for _, backend := range []string{"mem", "file"} {
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/committers=%d", backend, n), func(b *testing.B) {
				url := "mem://"
				if backend == "file" {
					url = "file://" + b.TempDir()
				}
				ctx := context.Background()
				bk, err := storage.Open(ctx, url)
				if err != nil {
					b.Fatal(err)
				}
				defer bk.Close()
				c, err := commit.NewCommitter(commit.Config{MaxAttempts: 1000, BaseBackoff: 100 * time.Microsecond, MaxBackoff: 5 * time.Millisecond}, bk, nil, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				s, _ := table.ParseSchema("id:int64", []string{"id"})
				if _, err := c.Commit(ctx, &pb.Transaction{Uuid: "create", Operation: &pb.Transaction_Create{Create: &pb.Create{Schema: s}}}); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				per := (b.N + n - 1) / n
				for w := 0; w < n; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < per; i++ {
							head, err := c.LatestVersion(ctx)
							if err != nil {
								b.Error(err)
								return
							}
							id := seq.Add(1)
							txn := &pb.Transaction{ReadVersion: head, Uuid: fmt.Sprintf("t-%d", id),
								Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{{PhysicalRows: 1, DataFile: &pb.DataFile{Path: fmt.Sprintf("data/%d.parquet", id)}}}}}}
							if _, err := c.Commit(ctx, txn); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(per*n)/time.Since(start).Seconds(), "commits/s")
			})
		}
	}
}
