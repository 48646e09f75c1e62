// Package gcsserver runs fake-gcs-server, a Cloud Storage emulator that
// serves the JSON API, on a loopback port for tests, so that the gs://
// driver (internal/storage/gcs.go) is exercised against a Cloud Storage
// implementation other than the in-process fake it was written with.
//
// The binary is installed into <module root>/tools by `make tools`, that is
//
//	GOBIN=$PWD/tools go install github.com/fsouza/fake-gcs-server@v1.56.1
//
// or found in $COMPACTORD_TOOLS. Without it, tests skip, except under CI=true
// where they fail: CI must not silently lose Cloud Storage coverage.
//
// The emulator keeps objects in memory (-backend memory): its filesystem
// backend maps object names onto paths, so that "a" and "a/b" cannot both
// exist, which Cloud Storage allows, and it is several times slower.
package gcsserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

const (
	// Bucket is the bucket Start and StartDetached create.
	Bucket = "compactord-test"
	// EnvVar is the variable the gs:// driver, like Google's clients, reads
	// the emulator's address from.
	EnvVar = "STORAGE_EMULATOR_HOST"

	install = "make tools (GOBIN=$PWD/tools go install github.com/fsouza/fake-gcs-server@v1.56.1, from the module root)"
)

// Server is a running fake-gcs-server.
type Server struct {
	// Host is the emulator's address, 127.0.0.1:PORT: the value for
	// STORAGE_EMULATOR_HOST.
	Host string
	// Endpoint is http://Host.
	Endpoint string
	// Bucket is the bucket created at start.
	Bucket string

	proc     *toolproc.Proc
	stopOnce sync.Once
}

// URL returns a gs:// URL for prefix (may be empty) in the server's bucket.
// The driver finds the emulator through STORAGE_EMULATOR_HOST, which Start
// sets; a caller of StartDetached sets it itself (SetEnv).
func (s *Server) URL(prefix string) string {
	u := url.URL{Scheme: "gs", Host: s.Bucket, Path: "/" + strings.Trim(prefix, "/")}
	return u.String()
}

// ErrNotInstalled is returned (wrapped) by Binary when fake-gcs-server is
// missing.
var ErrNotInstalled = errors.New("fake-gcs-server not installed")

// Binary returns the path of the fake-gcs-server binary, or an error
// wrapping ErrNotInstalled that says where it was looked for and how to
// install it.
func Binary() (string, error) {
	p, tried := toolproc.Find("fake-gcs-server")
	if p == "" {
		return "", fmt.Errorf("%w (looked at %s); install it with: %s", ErrNotInstalled, strings.Join(tried, ", "), install)
	}
	return p, nil
}

// SkipOrFail reports a missing prerequisite: t.Fatal under CI=true, where
// skipping would hide lost coverage, t.Skip elsewhere.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	toolproc.SkipOrFail(t, fmt.Sprintf("CI=true and a required component is missing: gs:// tests need fake-gcs-server: %v", err),
		fmt.Sprintf("skipping gs:// emulator test: %v", err))
}

// Start runs an emulator for one test, points STORAGE_EMULATOR_HOST at it
// with t.Setenv (so t must not be parallel) and stops it in t.Cleanup,
// logging its output if t failed. A missing binary skips the test, or fails
// it under CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		SkipOrFail(t, err)
	}
	s, err := start(context.Background(), bin)
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop fake-gcs-server: %v", err)
		} else if t.Failed() {
			t.Logf("fake-gcs-server output (last %d bytes):\n%s", toolproc.MaxOutput, s.Output())
		}
	})
	t.Setenv(EnvVar, s.Host)
	return s
}

// StartDetached runs an emulator not tied to any test; the caller must Stop
// it. It does not set STORAGE_EMULATOR_HOST (see SetEnv).
func StartDetached(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return start(ctx, bin)
}

// start runs the emulator on a free port and waits until it serves the
// bucket.
func start(ctx context.Context, bin string) (*Server, error) {
	return toolproc.OnFreePort(ctx, func(port int) (*Server, error) {
		host := fmt.Sprintf("127.0.0.1:%d", port)
		s := &Server{Host: host, Endpoint: "http://" + host, Bucket: Bucket}
		cmd := exec.Command(bin,
			"-scheme", "http",
			"-host", "127.0.0.1",
			"-port", fmt.Sprint(port),
			"-backend", "memory",
			"-log-level", "warn")
		// Ready when the bucket exists: creating it is a request the
		// emulator can only answer once it is serving.
		p, err := toolproc.StartServer(ctx, "fake-gcs-server", host, cmd, func(ctx context.Context) error {
			return s.CreateBucket(ctx, s.Bucket)
		})
		if err != nil {
			return nil, err
		}
		s.proc = p
		return s, nil
	})
}

// admin sends the harness's own requests on connections that are not kept
// alive, so that none outlives the server or trips a goroutine-leak check.
var admin = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// CreateBucket creates a bucket; one that exists already is no error.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=compactord-test", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := admin.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	switch res.StatusCode {
	case http.StatusOK, http.StatusConflict:
		return nil
	}
	return fmt.Errorf("create bucket %s: %s: %s", name, res.Status, bytes.TrimSpace(msg))
}

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// Stop terminates the emulator and waits for it to exit. It is idempotent.
// The process being stopped is not an error; one that had already died is
// reported with its output.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		if !s.proc.Stop(toolproc.StopGrace) {
			err = fmt.Errorf("fake-gcs-server had exited before Stop (%v); output:\n%s", s.proc.Err(), s.proc.Output())
		}
	})
	return err
}

// Output returns the last of what the emulator printed.
func (s *Server) Output() string { return s.proc.Output() }
