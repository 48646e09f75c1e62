package commit

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/s3server"
)

// BenchmarkCommitVersions: one append commit on a table with 10 and with
// 10 000 versions (each holding the same 4 fragments), on mem://, file://
// and S3 (versitygw, when its binary is present). "hint" is the commit as
// it runs; "listing" hides latest_version_hint.json from the loop, which
// is how the head was found before the hint was used (and what a table
// without a hint still costs).
//
//	go test ./internal/commit -run '^$' -bench CommitVersions -benchtime 300x
func BenchmarkCommitVersions(b *testing.B) {
	backends := []string{"mem", "file"}
	if _, err := s3server.Binary(); err == nil || os.Getenv("CI") == "true" {
		backends = append(backends, "s3")
	}
	for _, backend := range backends {
		var srv *s3server.Server
		if backend == "s3" {
			srv = s3server.Start(b)
		}
		for _, versions := range []uint64{10, 10_000} {
			for _, mode := range []string{"hint", "listing"} {
				b.Run(fmt.Sprintf("%s/versions=%d/%s", backend, versions, mode), func(b *testing.B) {
					ctx := b.Context()
					var url string
					switch backend {
					case "mem":
						url = "mem://"
					case "file":
						url = "file://" + b.TempDir()
					case "s3":
						url = srv.URL(s3server.RandomSuffix())
					}
					bk, err := storage.Open(ctx, url)
					if err != nil {
						b.Fatal(err)
					}
					defer bk.Close()
					head := buildHistory(b, bk, versions, 4)
					var cb storage.Bucket = bk
					if mode == "listing" {
						cb = noHint{bk}
					}
					c, err := NewCommitter(DefaultConfig(), cb, clock.Real(), NewMetrics(prometheus.NewRegistry()), zap.NewNop())
					if err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						txn := NewTransaction(head.Manifest.GetVersion())
						txn.Operation = &pb.Transaction_Append_{Append: &pb.Transaction_Append{Fragments: []*pb.DataFragment{{PhysicalRows: 10,
							Files: []*pb.DataFile{{Path: "x.lance", Fields: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 2}}}}}}
						res, err := c.Commit(ctx, &Txn{Read: head, Naming: meta.NamingV2, Transaction: txn})
						if err != nil {
							b.Fatal(err)
						}
						head = res.Manifest
					}
				})
			}
		}
	}
}

// buildHistory writes versions 1..n of a table whose every version holds
// the same frags fragments (as LanceDB names, encodes and hints them) and
// returns the newest. The manifests are written directly: the benchmark
// measures one commit on a long history, not the n commits that built it.
func buildHistory(tb testing.TB, b storage.Bucket, n uint64, frags int) *meta.ManifestFile {
	tb.Helper()
	ctx := context.Background()
	f := version(1, nil)
	for i := range frags {
		f.Manifest.Fragments = append(f.Manifest.Fragments, &pb.DataFragment{Id: uint64(i), PhysicalRows: 10,
			Files: []*pb.DataFile{{Path: fmt.Sprintf("f%d.lance", i), Fields: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 2}}})
	}
	f.Manifest.MaxFragmentId = maxFragmentID(f.Manifest)
	for v := uint64(1); v <= n; v++ {
		f.Manifest.Version = v
		data, err := meta.EncodeManifestFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.PutIfAbsent(ctx, meta.ManifestKey(meta.NamingV2, v), data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := meta.WriteHint(ctx, b, n); err != nil {
		tb.Fatal(err)
	}
	return f
}

// noHint is a bucket without latest_version_hint.json: reads find none and
// writes of it are dropped.
type noHint struct{ storage.Bucket }

func (n noHint) Get(ctx context.Context, key string) ([]byte, error) {
	if key == meta.HintKey {
		return nil, fmt.Errorf("%s: %w", key, storage.ErrNotFound)
	}
	return n.Bucket.Get(ctx, key)
}

func (n noHint) Put(ctx context.Context, key string, data []byte) error {
	if key == meta.HintKey {
		return nil
	}
	return n.Bucket.Put(ctx, key, data)
}
