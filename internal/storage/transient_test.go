package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestIsTransient(t *testing.T) {
	transient := []error{
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		fmt.Errorf("get x: %w", syscall.ECONNRESET),
		fmt.Errorf("read: %w", os.ErrDeadlineExceeded),
		fmt.Errorf("put: %w", ErrConflict),
	}
	for _, err := range transient {
		if !IsTransient(err) {
			t.Errorf("IsTransient(%v) = false", err)
		}
	}
	permanent := []error{nil, ErrNotFound, ErrAlreadyExists, fs.ErrPermission, errors.New("parquet: bad footer"), context.Canceled}
	for _, err := range permanent {
		if IsTransient(err) {
			t.Errorf("IsTransient(%v) = true", err)
		}
	}
	// A real refused connection through the S3 client path.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	b, err := Open(ctx, "s3://bucket?endpoint=http://"+addr+"&region=us-east-1&use_path_style=true&disable_https=true")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(ctx, "k")
	if err == nil || !IsTransient(err) {
		t.Fatalf("Get against a closed port: %v, transient %v", err, IsTransient(err))
	}
}

// A file-system error is not a network error, though syscall.Errno has the
// methods of net.Error: a missing or unreadable data file on file:// must
// not be retried forever.
func TestIsTransientFileSystemErrors(t *testing.T) {
	dir := t.TempDir()
	_, missing := os.Open(filepath.Join(dir, "gone.parquet"))
	if missing == nil {
		t.Fatal("opened a missing file")
	}
	permanent := []error{
		missing,
		fmt.Errorf("data file: %w", &fs.PathError{Op: "open", Path: "/t/data/x.parquet", Err: syscall.ENOENT}),
		&fs.PathError{Op: "open", Path: "/t/data/x.parquet", Err: syscall.EACCES},
		&fs.PathError{Op: "read", Path: "/t/data/x.parquet", Err: syscall.EISDIR},
		syscall.ENOSPC,
		syscall.EAGAIN, // Timeout() is true on an Errno; it is not a network timeout here
	}
	for _, err := range permanent {
		if IsTransient(err) {
			t.Errorf("IsTransient(%v) = true", err)
		}
	}
	// Real network failures stay transient whatever wraps them.
	transient := []error{
		&url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}},
		&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}},
		&net.DNSError{Err: "server misbehaving", Name: "s3.example", IsTemporary: true},
		fmt.Errorf("read body: %w", os.ErrDeadlineExceeded),
	}
	for _, err := range transient {
		if !IsTransient(err) {
			t.Errorf("IsTransient(%v) = false", err)
		}
	}
}
