package s3server_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil/s3server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart(t *testing.T) {
	s := s3server.Start(t)
	u, err := url.Parse(s.URL("some/prefix"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "s3" || u.Host != s3server.Bucket || u.Path != "/some/prefix" || u.Query().Get("endpoint") != s.Endpoint {
		t.Errorf("URL = %s", u)
	}
	ctx := t.Context()
	b, err := storage.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "k", []byte("w")); !storage.IsAlreadyExists(err) {
		t.Errorf("second PutIfAbsent: %v", err)
	}
	// The prefix is honoured: the object is at some/prefix/k in the bucket.
	root, err := storage.Open(ctx, s.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if got, err := root.Get(ctx, "some/prefix/k"); err != nil || string(got) != "v" {
		t.Errorf("unprefixed Get = %q, %v", got, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestBinaryFromEnv(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "versitygw")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COMPACTORD_TOOLS", dir)
	if got, err := s3server.Binary(); err != nil || got != p {
		t.Errorf("Binary() = %q, %v; want %q", got, err, p)
	}
	t.Setenv("COMPACTORD_TOOLS", t.TempDir())
	t.Chdir(t.TempDir()) // outside the module: no fallback
	if _, err := s3server.Binary(); !errors.Is(err, s3server.ErrNotInstalled) {
		t.Errorf("Binary() with nothing installed: %v", err)
	}
}
