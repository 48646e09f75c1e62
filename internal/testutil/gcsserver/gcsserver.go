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
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// Bucket is the bucket Start and StartDetached create.
	Bucket = "compactord-test"
	// EnvVar is the variable the gs:// driver, like Google's clients, reads
	// the emulator's address from.
	EnvVar = "STORAGE_EMULATOR_HOST"

	install      = "make tools (GOBIN=$PWD/tools go install github.com/fsouza/fake-gcs-server@v1.56.1, from the module root)"
	readyTimeout = 30 * time.Second
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

	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // set before exited closes
	stopOnce sync.Once
	output   *lockedBuffer
}

// URL returns a gs:// URL for prefix (may be empty) in the server's bucket.
// The driver finds the emulator through STORAGE_EMULATOR_HOST, which Start
// sets; a caller of StartDetached sets it itself (SetEnv).
func (s *Server) URL(prefix string) string {
	u := url.URL{Scheme: "gs", Host: s.Bucket, Path: "/" + strings.Trim(prefix, "/")}
	return u.String()
}

// SetEnv points STORAGE_EMULATOR_HOST at the server, process-wide: for a
// server shared by a whole test binary, where t.Setenv (undone at the end of
// one test) does not fit.
func (s *Server) SetEnv() { os.Setenv(EnvVar, s.Host) }

// ErrNotInstalled is returned (wrapped) by Binary when fake-gcs-server is
// missing.
var ErrNotInstalled = errors.New("fake-gcs-server not installed")

// Binary returns the path of the fake-gcs-server binary, or an error
// wrapping ErrNotInstalled that says where it was looked for and how to
// install it.
func Binary() (string, error) {
	var tried []string
	if dir := os.Getenv("COMPACTORD_TOOLS"); dir != "" {
		p := filepath.Join(dir, "fake-gcs-server")
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, "tools", "fake-gcs-server")
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%w (looked at %s); install it with: %s", ErrNotInstalled, strings.Join(tried, ", "), install)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// moduleRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// SkipOrFail reports a missing prerequisite: t.Fatal under CI=true, where
// skipping would hide lost coverage, t.Skip elsewhere.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and a required component is missing: gs:// tests need fake-gcs-server: %v", err)
	}
	t.Skipf("skipping gs:// emulator test: %v", err)
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
			t.Logf("fake-gcs-server output (last %d bytes):\n%s", maxOutput, s.Output())
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

func start(ctx context.Context, bin string) (*Server, error) {
	var lastErr error
	// A free port found by listening and closing can be taken by someone
	// else before the emulator binds it; try a few ports.
	for range 3 {
		s, err := startOnce(ctx, bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{
		Host:     host,
		Endpoint: "http://" + host,
		Bucket:   Bucket,
		exited:   make(chan struct{}),
		output:   &lockedBuffer{},
	}
	s.cmd = exec.Command(bin,
		"-scheme", "http",
		"-host", "127.0.0.1",
		"-port", fmt.Sprint(port),
		"-backend", "memory",
		"-log-level", "warn")
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	if err := startWithDeathSignal(s); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("fake-gcs-server on %s not ready: %w; output:\n%s", host, err, s.output.String())
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// waitReady polls until the bucket exists: each round tries to create it (a
// request the emulator can only answer once it is serving) and stops at the
// first success, when the process exits, or at a bounded deadline.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.CreateBucket(actx, s.Bucket)
		acancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-s.exited:
			return fmt.Errorf("process exited (%v)", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Stop terminates the emulator and waits for it to exit. It is idempotent.
// The process being stopped is not an error; one that had already died is
// reported with its output.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			err = fmt.Errorf("fake-gcs-server had exited before Stop (%v); output:\n%s", s.waitErr, s.output.String())
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-s.exited:
		case <-t.C:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return err
}

// Output returns the last of what the emulator printed.
func (s *Server) Output() string { return s.output.String() }

// lockedBuffer collects the emulator's output for error messages, bounded
// so that a chatty emulator cannot grow it without limit.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const maxOutput = 64 << 10

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > maxOutput {
		b.buf = b.buf[len(b.buf)-maxOutput:]
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
