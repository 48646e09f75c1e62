package storage_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/gcsserver"
	"github.com/compactord/compactord/internal/testing/stores"
)

// TestGCSEmulator runs the gs:// driver against a real Cloud Storage
// emulator: fake-gcs-server, started on loopback by the gcsserver harness
// (installed by `make tools`; missing, the test skips, or fails under
// CI=true). COMPACTORD_GCS_EMULATOR=host:port names an external emulator
// instead, holding a bucket named "bucket". It checks the Bucket conformance
// suite, a resumable upload, the put-if-absent race, reads past the end
// and paged listings; each is a subtest.
func TestGCSEmulator(t *testing.T) {
	host, bucket := os.Getenv("COMPACTORD_GCS_EMULATOR"), "bucket"
	if host == "" {
		srv := gcsserver.Start(t)
		host, bucket = srv.Host, srv.Bucket
	}
	// Through a proxy that the test closes, so that the shared client's
	// keep-alive connections end with the test, and that counts the
	// requests of resumable uploads.
	var initiated, chunks atomic.Int64
	target := &url.URL{Scheme: "http", Host: host}
	out := &http.Transport{}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Transport: out, Rewrite: func(r *httputil.ProxyRequest) {
		q := r.In.URL.Query()
		switch {
		case q.Get("upload_id") != "":
			chunks.Add(1) // to the session URL the initiation returned
		case q.Get("uploadType") == "resumable":
			initiated.Add(1)
		}
		r.SetURL(target)
		r.Out.Host = r.In.Host // resumable upload URLs name the host asked
	}})
	t.Cleanup(func() {
		proxy.Close()
		out.CloseIdleConnections()
	})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(proxy.URL, "http://"))
	url := "gs://" + bucket + "/" + stores.UniqueName(t)

	t.Run("conformance", func(t *testing.T) {
		conformance(t, url+"/conformance")
	})

	t.Run("resumable-upload", func(t *testing.T) {
		// Larger than one 16 MiB chunk: a resumable upload of two chunks,
		// every request of which must reach the emulator through the
		// proxy (the upload URL it hands out names the host asked).
		ctx := t.Context()
		b := stores.Open(t, url)
		payload := bytes.Repeat([]byte("0123456789abcdef"), 20<<16) // 20 MiB
		i0, c0 := initiated.Load(), chunks.Load()
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
		if i, c := initiated.Load()-i0, chunks.Load()-c0; i != 1 || c != 2 {
			t.Errorf("the upload took %d resumable sessions of %d chunk requests, want 1 of 2", i, c)
		}
		if got, err := b.Get(ctx, "resumable"); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("resumable upload read back: %d bytes, %v", len(got), err)
		}
		if a, err := b.Attributes(ctx, "resumable"); err != nil || a.Size != int64(len(payload)) {
			t.Fatalf("resumable upload attributes: %+v, %v", a, err)
		}
		// A range across the chunk boundary.
		const off = 16<<20 - 5
		rc, err := b.NewRangeReader(ctx, "resumable", off, 10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, payload[off:off+10]) {
			t.Fatalf("range across the chunk boundary = %q, %v; want %q", got, err, payload[off:off+10])
		}
	})

	t.Run("put-if-absent-race", func(t *testing.T) {
		putIfAbsentRace(t, stores.Open(t, url+"/race"), 8, 20)
	})

	t.Run("read-past-end", func(t *testing.T) {
		readPastEnd(t, stores.Open(t, url+"/past-end"))
	})

	t.Run("list-pages", func(t *testing.T) {
		// A listing of more objects than a page holds follows the page
		// token to the end, in order. (Bucket.List takes 1000 a page;
		// the driver is asked for 3 here.)
		ctx := t.Context()
		name := stores.UniqueName(t)
		b := stores.Open(t, "gs://"+bucket+"/"+name)
		var want []string
		for i := range 7 {
			k := fmt.Sprintf("o/%02d", i)
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
			want = append(want, name+"/"+k)
		}
		if err := b.Put(ctx, "o-sibling", nil); err != nil { // outside the prefix listed
			t.Fatal(err)
		}
		pages, err := storage.GCSListPages(ctx, bucket, name+"/o/", 3)
		if err != nil {
			t.Fatalf("after %d pages: %v", len(pages), err)
		}
		if got := slices.Concat(pages...); len(pages) != 3 || !slices.Equal(got, want) {
			t.Fatalf("pages %q, want %q in pages of 3", pages, want)
		}
	})
}
