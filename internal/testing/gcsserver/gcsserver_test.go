package gcsserver_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/gcsserver"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart(t *testing.T) {
	s := gcsserver.Start(t)
	if got := os.Getenv(gcsserver.EnvVar); got != s.Host {
		t.Fatalf("%s = %q, want %q", gcsserver.EnvVar, got, s.Host)
	}
	if got, want := s.URL("some/prefix"), "gs://"+gcsserver.Bucket+"/some/prefix"; got != want {
		t.Errorf("URL = %s, want %s", got, want)
	}
	stores.CheckPrefixedURL(t, s.URL)

	// A second bucket; creating it again is no error. Objects are per
	// bucket.
	ctx := t.Context()
	if err := s.CreateBucket(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx, "other"); err != nil {
		t.Errorf("CreateBucket of an existing bucket: %v", err)
	}
	other, err := storage.Open(ctx, "gs://other/some/prefix")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Get(ctx, "k"); !storage.IsNotFound(err) {
		t.Errorf("Get from the other bucket: %v, want not found", err)
	}
	if err := s.CreateBucket(ctx, "Not A Bucket Name!"); err == nil {
		t.Errorf("CreateBucket accepted an invalid name")
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := http.Get(s.Endpoint + "/storage/v1/b"); err == nil {
		t.Errorf("the emulator still answers after Stop")
	}
}

// Binary looks for fake-gcs-server with toolproc.Find (tested there);
// missing, it wraps ErrNotInstalled and says how to install it.
func TestBinaryNotInstalled(t *testing.T) {
	t.Setenv("COMPACTORD_TOOLS", t.TempDir())
	t.Chdir(t.TempDir()) // outside the module: no fallback
	_, err := gcsserver.Binary()
	if !errors.Is(err, gcsserver.ErrNotInstalled) || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("Binary() with nothing installed: %v", err)
	}
}

// A binary that exits instead of serving is reported at once, with its
// output, rather than waited for until the deadline.
func TestStartReportsExit(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho cannot serve >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "fake-gcs-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COMPACTORD_TOOLS", dir)
	s, err := gcsserver.StartDetached(context.Background())
	if err == nil {
		s.Stop()
		t.Fatal("StartDetached succeeded with a binary that exits")
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot serve") {
		t.Errorf("error does not say the process exited, with its output: %v", err)
	}
}

// recorder is a testing.TB that records Skipf and Fatalf, which end the
// goroutine as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(string, ...any) {
	r.skipped = true
	runtime.Goexit()
}
func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}

// A missing emulator is a skip, but a failure under CI=true.
func TestMissingBinarySkipsOrFails(t *testing.T) {
	t.Setenv("COMPACTORD_TOOLS", t.TempDir())
	t.Chdir(t.TempDir())
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			gcsserver.Start(r)
			t.Errorf("CI=%q: Start returned without the binary", ci)
		}()
		<-done
		if want := ci == "true"; r.failed != want || r.skipped == want {
			t.Errorf("CI=%q: failed=%v skipped=%v", ci, r.failed, r.skipped)
		}
	}
}
