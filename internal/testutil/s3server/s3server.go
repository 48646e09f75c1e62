// Package s3server runs a versitygw S3 gateway on a local directory for
// tests, so that the S3 code paths (conditional writes, error shapes, listing)
// are exercised against a real S3 protocol implementation.
//
// The binary is installed into <module root>/tools by
//
//	GOBIN=$PWD/tools go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// or found in $COMPACTORD_TOOLS. Without it, tests skip, except under CI=true
// where they fail: CI must not silently lose S3 coverage.
package s3server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Fixed test credentials. They only ever guard a gateway on 127.0.0.1 that
// lives as long as one test binary.
const (
	AccessKey = "compactordtest"
	SecretKey = "compactordtestsecret"
	Region    = "us-east-1"
	Bucket    = "compactord-test"
)

const readyTimeout = 30 * time.Second

// Server is a running versitygw.
type Server struct {
	// Endpoint is the gateway's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Bucket is a bucket created at start.
	Bucket string

	dir      string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // set before exited closes
	stopOnce sync.Once
	output   *lockedBuffer
}

// URL returns a gocloud s3:// URL for the server's bucket, with prefix (may be
// empty) as key prefix. Credentials are not part of the URL: they come from
// the AWS_* environment variables set by Start or StartShared.
//
// The parameters are those gocloud v0.47's s3blob accepts: endpoint (the
// SDK's BaseEndpoint), region, use_path_style (versitygw serves path-style
// buckets; virtual-host style would need DNS for bucket.127.0.0.1) and
// disable_https.
func (s *Server) URL(prefix string) string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	u := url.URL{Scheme: "s3", Host: s.Bucket, Path: "/" + strings.Trim(prefix, "/"), RawQuery: q.Encode()}
	return u.String()
}

// ErrNotInstalled is returned (wrapped) by Binary when versitygw is missing.
var ErrNotInstalled = errors.New("versitygw not installed")

// Binary returns the path of the versitygw binary, or an error wrapping
// ErrNotInstalled that says where it was looked for.
func Binary() (string, error) {
	var tried []string
	if dir := os.Getenv("COMPACTORD_TOOLS"); dir != "" {
		p := filepath.Join(dir, "versitygw")
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, "tools", "versitygw")
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%w (looked at %s); install it from the module root with: GOBIN=$PWD/tools go install github.com/versity/versitygw/cmd/versitygw@v1.8.0",
		ErrNotInstalled, strings.Join(tried, ", "))
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
		t.Fatalf("s3 tests need versitygw: %v", err)
	}
	t.Skipf("skipping s3 test: %v", err)
}

// Start runs a gateway for one test and stops it in t.Cleanup. It sets the
// AWS credential variables with t.Setenv, so t must not be parallel.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		SkipOrFail(t, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", Region)
	s, err := start(context.Background(), bin, t.TempDir())
	if err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop versitygw: %v", err)
		}
	})
	return s
}

// SetCredentialEnv sets the process-wide AWS variables the s3 URLs rely on.
// It is for a server shared by a whole test binary, where t.Setenv (undone
// at the end of one test) does not fit.
func SetCredentialEnv() {
	os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	os.Setenv("AWS_REGION", Region)
	os.Unsetenv("AWS_SESSION_TOKEN")
	os.Unsetenv("AWS_PROFILE")
}

// StartDetached runs a gateway not tied to any test, storing objects under
// dir (which it removes on Stop if removeDir). The caller must Stop it. It
// does not set credentials; see SetCredentialEnv.
func StartDetached(ctx context.Context, dir string, removeDir bool) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	if removeDir {
		s.dir = dir
	}
	return s, nil
}

func start(ctx context.Context, bin, dir string) (*Server, error) {
	var lastErr error
	// A free port found by listening and closing can be taken by someone
	// else before the gateway binds it; try a few ports.
	for range 3 {
		s, err := startOnce(ctx, bin, dir)
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

func startOnce(ctx context.Context, bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "gw")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{
		Endpoint: "http://" + addr,
		Bucket:   Bucket,
		exited:   make(chan struct{}),
		output:   &lockedBuffer{},
	}
	s.cmd = exec.Command(bin,
		"--port", addr,
		"--access", AccessKey,
		"--secret", SecretKey,
		"--region", Region,
		"--quiet",
		"posix", root)
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	// The gateway's environment must not carry a caller's ROOT_* or VGW_*
	// settings that would override the flags.
	s.cmd.Env = filteredEnv()
	if err := startWithDeathSignal(s); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("versitygw on %s not ready: %w; output:\n%s", addr, err, s.output.String())
	}
	return s, nil
}

func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ROOT_") || strings.HasPrefix(kv, "VGW_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// client returns an S3 client for the gateway, independent of the
// environment.
func (s *Server) client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	})
}

// waitReady polls until the bucket exists: each round tries to create it (a
// request the gateway can only answer once it is serving) and stops at the
// first success, when the process exits, or at a bounded deadline.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	c := s.client()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.CreateBucket(actx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		acancel()
		if err == nil || isAlreadyOwned(err) {
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

func isAlreadyOwned(err error) bool {
	var owned *s3types.BucketAlreadyOwnedByYou
	return errors.As(err, &owned)
}

// Stop kills the gateway, waits for it to exit and removes its directory if
// it owns one. It is idempotent.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
		default:
			if s.cmd.Process != nil {
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
			}
			t := time.NewTimer(5 * time.Second)
			select {
			case <-s.exited:
			case <-t.C:
				_ = s.cmd.Process.Kill()
				<-s.exited
			}
			t.Stop()
		}
		if s.dir != "" {
			err = os.RemoveAll(s.dir)
		}
	})
	return err
}

// lockedBuffer collects the gateway's output for error messages, bounded so
// that a chatty gateway cannot grow it without limit.
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

// RandomSuffix returns a short random hex string for unique names.
func RandomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
