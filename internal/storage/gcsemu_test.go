package storage_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil"
)

// TestGCSEmulator runs the Bucket conformance suite through the gs:// driver
// against a Cloud Storage emulator, when COMPACTORD_GCS_EMULATOR names one
// (the host:port of e.g. fake-gcs-server, holding a bucket named "bucket").
// Without it the in-process fake (gcsfake_test.go) covers the driver.
func TestGCSEmulator(t *testing.T) {
	host := os.Getenv("COMPACTORD_GCS_EMULATOR")
	if host == "" {
		t.Skip("COMPACTORD_GCS_EMULATOR is not set")
	}
	// Through a proxy that the test closes, so that the shared client's
	// keep-alive connections end with the test.
	target := &url.URL{Scheme: "http", Host: host}
	out := &http.Transport{}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Transport: out, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // resumable upload URLs name the host asked
	}})
	t.Cleanup(func() {
		proxy.Close()
		out.CloseIdleConnections()
	})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(proxy.URL, "http://"))
	url := "gs://bucket/" + testutil.UniqueName(t)
	conformance(t, url)

	// Larger than one 16 MiB chunk: a resumable upload.
	ctx := t.Context()
	b := open(t, url)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 20<<16) // 20 MiB
	w, err := b.NewWriter(ctx, "resumable")
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(payload, 1<<20) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "resumable"); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("resumable upload read back: %d bytes, %v", len(got), err)
	}

	// The put-if-absent INVARIANT.
	for round := range 20 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		var won atomic.Int32
		for w := range 8 {
			wg.Go(func() {
				err := b.PutIfAbsent(ctx, key, fmt.Appendf(nil, "%d", w))
				switch {
				case err == nil:
					won.Add(1)
				case !storage.IsAlreadyExists(err):
					t.Errorf("round %d writer %d: %v", round, w, err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, won.Load())
		}
	}
}
