package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil/s3server"
)

// CommitResult is the commit benchmark on one backend.
type CommitResult struct {
	Backend string `json:"backend"`
	// Latencies in seconds, interleaved sample by sample: a bare
	// put-if-absent of a manifest-sized object, and one commit of a
	// one-fragment append with a single committer.
	PutIfAbsent []float64 `json:"put_if_absent_s"`
	Commit      []float64 `json:"commit_s"`
	// Primitive operations a commit is made of (medians, seconds).
	Get  float64 `json:"get_s"`
	Stat float64 `json:"stat_s"`
	Put  float64 `json:"put_s"`
	// Head is table.LatestVersion: how the loop finds the head.
	Head float64 `json:"head_s"`
	// Throughput by committer count.
	Throughput []Throughput `json:"throughput"`
}

// Throughput is commits per second with N independent committers (one
// Committer each, as separate writers would be) appending concurrently.
type Throughput struct {
	Committers int     `json:"committers"`
	Commits    int     `json:"commits"`
	Failed     int     `json:"failed"`
	PerSecond  float64 `json:"per_second"`
	Attempts   float64 `json:"attempts_per_commit"`
}

// commits runs the commit benchmark on file:// (the data sets' disk) and,
// when versitygw is available, on S3 over loopback.
func (s *Suite) commits(ctx context.Context) ([]CommitResult, error) {
	dir := s.scratch("commit")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []CommitResult
	r, err := s.commitBackend(ctx, "file", func(name string) string { return "file://" + filepath.Join(dir, name) })
	if err != nil {
		return nil, err
	}
	out = append(out, *r)
	if s.cfg.VersityGW == "" {
		s.logf("commit: no versitygw; S3 skipped")
		return out, nil
	}
	if err := os.Setenv("COMPACTORD_TOOLS", filepath.Dir(s.cfg.VersityGW)); err != nil {
		return nil, err
	}
	s3server.SetCredentialEnv()
	srv, err := s3server.StartDetached(ctx, filepath.Join(dir, "s3"), true)
	if err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	defer srv.Stop()
	r, err = s.commitBackend(ctx, "s3 (versitygw, loopback)", func(name string) string { return srv.URL(name) })
	if err != nil {
		return nil, err
	}
	return append(out, *r), nil
}

func (s *Suite) commitBackend(ctx context.Context, backend string, url func(string) string) (*CommitResult, error) {
	res := &CommitResult{Backend: backend}
	b, err := storage.Open(ctx, url("latency"))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	sch, _ := table.ParseSchema("id:int64", []string{"id"})
	cres, err := c.Commit(ctx, &pb.Transaction{Uuid: uuid.NewString(), Operation: &pb.Transaction_Create{Create: &pb.Create{Schema: sch}}})
	if err != nil {
		return nil, err
	}
	head := cres.Manifest
	var gets, stats, puts, heads []float64
	timed := func(dst *[]float64, fn func() error) error {
		start := time.Now()
		err := fn()
		*dst = append(*dst, time.Since(start).Seconds())
		return err
	}
	for i := range s.cfg.CommitSamples {
		// A bare put-if-absent of the bytes of the manifest the next
		// commit writes (the same size).
		mdata, err := table.EncodeProto(head)
		if err != nil {
			return nil, err
		}
		if err := timed(&res.PutIfAbsent, func() error { return b.PutIfAbsent(ctx, fmt.Sprintf("bare/%06d", i), mdata) }); err != nil {
			return nil, err
		}
		txn := &pb.Transaction{ReadVersion: head.Version, Uuid: uuid.NewString(),
			Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{{PhysicalRows: 1, DataFile: &pb.DataFile{Path: fmt.Sprintf("data/%d.parquet", i), SizeBytes: 100}}}}}}
		if err := timed(&res.Commit, func() error {
			r, err := c.Commit(ctx, txn)
			if err == nil {
				head = r.Manifest
			}
			return err
		}); err != nil {
			return nil, err
		}
		// The primitives a commit is made of, on the same objects.
		if err := timed(&gets, func() error { _, err := b.Get(ctx, table.ManifestKey(head.Version)); return err }); err != nil {
			return nil, err
		}
		if err := timed(&stats, func() error { _, err := b.Attributes(ctx, table.ManifestKey(head.Version)); return err }); err != nil {
			return nil, err
		}
		if err := timed(&heads, func() error { _, err := table.LatestVersion(ctx, b); return err }); err != nil {
			return nil, err
		}
		tdata, _ := table.EncodeProto(txn)
		if err := timed(&puts, func() error { return b.Put(ctx, fmt.Sprintf("put/%06d", i), tdata) }); err != nil {
			return nil, err
		}
	}
	res.Get, res.Stat, res.Put, res.Head = median(gets), median(stats), median(puts), median(heads)
	s.logf("commit %s: put-if-absent %.2f ms, commit %.2f ms (get %.2f, stat %.2f, put %.2f, find head %.2f)", backend,
		1e3*median(res.PutIfAbsent), 1e3*median(res.Commit), 1e3*res.Get, 1e3*res.Stat, 1e3*res.Put, 1e3*res.Head)
	for _, n := range []int{1, 4, 16} {
		tp, err := s.throughput(ctx, url(fmt.Sprintf("throughput-%d", n)), n)
		if err != nil {
			return nil, fmt.Errorf("%s, %d committers: %w", backend, n, err)
		}
		s.logf("commit %s: %d committers: %.0f commits/s (%.2f attempts each, %d failed)", backend, n, tp.PerSecond, tp.Attempts, tp.Failed)
		res.Throughput = append(res.Throughput, *tp)
	}
	return res, nil
}

// throughput runs n committers for CommitWindow, each appending one
// fragment per commit with the production commit configuration (backoff
// included), and counts the commits that landed.
func (s *Suite) throughput(ctx context.Context, url string, n int) (*Throughput, error) {
	b, err := storage.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	newCommitter := func() (*commit.Committer, error) {
		return commit.NewCommitter(commit.Config{MaxAttempts: 200}, b, nil, nil, nil)
	}
	c0, err := newCommitter()
	if err != nil {
		return nil, err
	}
	sch, _ := table.ParseSchema("id:int64", []string{"id"})
	if _, err := c0.Commit(ctx, &pb.Transaction{Uuid: uuid.NewString(), Operation: &pb.Transaction_Create{Create: &pb.Create{Schema: sch}}}); err != nil {
		return nil, err
	}
	var commits, failed, attempts atomic.Int64
	var firstErr error
	var once sync.Once
	wctx, cancel := context.WithTimeout(ctx, s.cfg.CommitWindow)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range n {
		c, err := newCommitter()
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				head, err := c.LatestVersion(wctx)
				if err != nil {
					break
				}
				txn := &pb.Transaction{ReadVersion: head, Uuid: uuid.NewString(),
					Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{{PhysicalRows: 1, DataFile: &pb.DataFile{Path: fmt.Sprintf("data/%d-%d.parquet", w, i), SizeBytes: 100}}}}}}
				r, err := c.Commit(wctx, txn)
				switch {
				case err == nil:
					commits.Add(1)
					attempts.Add(int64(r.Attempts))
				case wctx.Err() != nil:
				case errors.Is(err, commit.ErrRetryable):
					failed.Add(1)
				default:
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	tp := &Throughput{Committers: n, Commits: int(commits.Load()), Failed: int(failed.Load()), PerSecond: float64(commits.Load()) / elapsed.Seconds()}
	if commits.Load() > 0 {
		tp.Attempts = float64(attempts.Load()) / float64(commits.Load())
	}
	return tp, nil
}
