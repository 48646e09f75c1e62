package s3server_test

import (
	"errors"
	"net/url"
	"testing"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/testing/s3server"
	"github.com/compactord/compactord/internal/testing/stores"
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
	stores.CheckPrefixedURL(t, s.URL)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// Binary looks for versitygw with toolproc.Find (tested there); missing, it
// wraps ErrNotInstalled.
func TestBinaryNotInstalled(t *testing.T) {
	t.Setenv("COMPACTORD_TOOLS", t.TempDir())
	t.Chdir(t.TempDir()) // outside the module: no fallback
	if _, err := s3server.Binary(); !errors.Is(err, s3server.ErrNotInstalled) {
		t.Errorf("Binary() with nothing installed: %v", err)
	}
}
