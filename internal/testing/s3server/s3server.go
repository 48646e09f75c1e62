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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

// Fixed test credentials. They only ever guard a gateway on 127.0.0.1 that
// lives as long as one test binary.
const (
	AccessKey = "compactordtest"
	SecretKey = "compactordtestsecret"
	Region    = "us-east-1"
	Bucket    = "compactord-test"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is the gateway's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Bucket is a bucket created at start.
	Bucket string

	dir  string
	proc *toolproc.Proc
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
	p, tried := toolproc.Find("versitygw")
	if p == "" {
		return "", fmt.Errorf("%w (looked at %s); install it from the module root with: GOBIN=$PWD/tools go install github.com/versity/versitygw/cmd/versitygw@v1.8.0",
			ErrNotInstalled, strings.Join(tried, ", "))
	}
	return p, nil
}

// SkipOrFail reports a missing prerequisite: t.Fatal under CI=true, where
// skipping would hide lost coverage, t.Skip elsewhere.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	toolproc.SkipOrFail(t, fmt.Sprintf("s3 tests need versitygw: %v", err), fmt.Sprintf("skipping s3 test: %v", err))
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

// start runs the gateway on a free port and waits until it serves the bucket.
func start(ctx context.Context, bin, dir string) (*Server, error) {
	return toolproc.OnFreePort(ctx, func(port int) (*Server, error) {
		root := filepath.Join(dir, "gw")
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		s := &Server{Endpoint: "http://" + addr, Bucket: Bucket}
		cmd := exec.Command(bin,
			"--port", addr,
			"--access", AccessKey,
			"--secret", SecretKey,
			"--region", Region,
			"--quiet",
			"posix", root)
		// The gateway's environment must not carry a caller's ROOT_* or
		// VGW_* settings that would override the flags.
		cmd.Env = filteredEnv()
		p, err := toolproc.StartServer(ctx, "versitygw", addr, cmd, s.createBucket())
		if err != nil {
			return nil, err
		}
		s.proc = p
		return s, nil
	})
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

// createBucket returns the readiness probe: it creates the bucket, a request
// the gateway can only answer once it is serving; one it already owns is
// no error.
func (s *Server) createBucket() func(context.Context) error {
	c := s.client()
	return func(ctx context.Context) error {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		if err == nil || isAlreadyOwned(err) {
			return nil
		}
		return err
	}
}

func isAlreadyOwned(err error) bool {
	var owned *s3types.BucketAlreadyOwnedByYou
	return errors.As(err, &owned)
}

// Stop kills the gateway, waits for it to exit and removes its directory if
// it owns one. It is idempotent.
func (s *Server) Stop() error {
	s.proc.Stop(toolproc.StopGrace)
	if s.dir != "" {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// RandomSuffix returns a short random hex string for unique names.
func RandomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
