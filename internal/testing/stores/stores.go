// Package stores holds helpers shared by the tests of several packages.
package stores

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/s3server"
)

// The S3 gateway is started once per test binary, on first use, and shared
// by every test: starting versitygw costs far more than a test's use of it,
// and each user gets its own key prefix. Main stops it after the tests. A
// binary whose TestMain does not call Main still never leaks the process: the
// gateway is started with PDEATHSIG and dies with the test binary (its temp
// directory is then left behind).
var shared struct {
	once sync.Once
	srv  *s3server.Server
	err  error
}

// SharedS3 returns the binary-wide gateway, starting it on first use. Since
// the server outlives any one test, it sets the AWS credential variables
// process-wide (s3server.SetCredentialEnv) rather than with t.Setenv. A
// missing binary skips the test, or fails it under CI=true.
func SharedS3(t testing.TB) *s3server.Server {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "compactord-s3-")
		if err != nil {
			shared.err = err
			return
		}
		s3server.SetCredentialEnv()
		shared.srv, shared.err = s3server.StartDetached(context.Background(), dir, true)
		if shared.err != nil {
			os.RemoveAll(dir)
		}
	})
	if errors.Is(shared.err, s3server.ErrNotInstalled) {
		s3server.SkipOrFail(t, shared.err)
	}
	if shared.err != nil {
		t.Fatalf("start shared versitygw: %v", shared.err)
	}
	return shared.srv
}

// StopShared stops the shared gateway if it was started. Main calls it.
func StopShared() error {
	if shared.srv == nil {
		return nil
	}
	return shared.srv.Stop()
}

// Main is a TestMain body: it runs the tests, stops the shared S3 gateway,
// then checks for leaked goroutines (after the gateway is gone, so idle HTTP
// connections to it have closed), and exits.
//
//	func TestMain(m *testing.M) { stores.Main(m) }
func Main(m *testing.M, leakOpts ...goleak.Option) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: stop shared versitygw: %v\n", err)
	}
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ForEachStore runs fn as a subtest against each backend, each time on an
// empty store of its own: "mem" (a uniquely named mem:// bucket, so a test
// can Open the URL twice and see the same objects), "file" (a t.TempDir())
// and "s3" (the shared versitygw, under a unique key prefix).
func ForEachStore(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("mem", func(t *testing.T) {
		fn(t, "mem://"+UniqueName(t))
	})
	t.Run("file", func(t *testing.T) {
		fn(t, "file://"+t.TempDir())
	})
	t.Run("s3", func(t *testing.T) {
		srv := SharedS3(t)
		fn(t, srv.URL(UniqueName(t)))
	})
}

// Open opens the store at url for the test, which closes it at its end.
func Open(t testing.TB, url string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// UniqueName returns a name derived from the test name, safe for URL hosts
// and key prefixes, with a random suffix.
func UniqueName(t testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "-" + s3server.RandomSuffix()
}
