package storage_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/gcerrors"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
)

// The package INVARIANT through the gs:// driver: ifGenerationMatch=0 and
// the 412 classification (putIfAbsentRace, shared with TestGCSEmulator).
func TestGCSPutIfAbsentRace(t *testing.T) {
	storage.NewFakeGCS(t)
	putIfAbsentRace(t, stores.Open(t, "gs://bucket/"+stores.UniqueName(t)), 8, 50)
}

// A conditional write whose response is lost is not retried by the driver:
// a retry would find the writer's own object and report a lost race. The
// caller sees a transient, unclassified error and the object is there.
func TestGCSConditionalWriteIsSentOnce(t *testing.T) {
	f := storage.NewFakeGCS(t)
	f.SetFault(func(method, kind, _ string) (int, bool) {
		if kind == "insert" {
			return http.StatusServiceUnavailable, true // lands, then 503
		}
		return 0, false
	})
	b := stores.Open(t, "gs://bucket")
	err := b.PutIfAbsent(t.Context(), "k", []byte("v"))
	if err == nil || storage.IsAlreadyExists(err) || !storage.IsTransient(err) {
		t.Fatalf("PutIfAbsent with a lost response: %v; want a transient error that is not already-exists", err)
	}
	if n := f.Count("POST insert"); n != 1 {
		t.Errorf("%d insert requests, want 1", n)
	}
	if got, ok := f.Object("bucket", "k"); !ok || string(got) != "v" {
		t.Errorf("stored %q, %v", got, ok)
	}
}

// Idempotent requests ride out a transient answer, as with the Google SDK.
func TestGCSReadsRetryTransientErrors(t *testing.T) {
	f := storage.NewFakeGCS(t)
	b := stores.Open(t, "gs://bucket")
	ctx := t.Context()
	if err := b.Put(ctx, "dir/k", []byte("value")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	f.SetFault(func(_, kind, _ string) (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if kind == "media" || kind == "list" || kind == "get" {
			if !failed[kind] {
				failed[kind] = true
				return http.StatusServiceUnavailable, false
			}
		}
		return 0, false
	})
	if got, err := b.Get(ctx, "dir/k"); err != nil || string(got) != "value" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if a, err := b.Attributes(ctx, "dir/k"); err != nil || a.Size != 5 {
		t.Fatalf("Attributes = %+v, %v", a, err)
	}
	var keys []string
	if err := b.List(ctx, "dir/", func(a storage.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil || len(keys) != 1 {
		t.Fatalf("List = %q, %v", keys, err)
	}
	for _, k := range []string{"GET media", "GET get", "GET list"} {
		if n := f.Count(k); n != 2 {
			t.Errorf("%s: %d requests, want 2 (one failed, one retried)", k, n)
		}
	}
}

func TestGCSErrorClasses(t *testing.T) {
	f := storage.NewFakeGCS(t)
	b := stores.Open(t, "gs://bucket")
	ctx := t.Context()
	if err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	f.SetFault(func(string, string, string) (int, bool) { return http.StatusForbidden, false })
	_, err := b.Get(ctx, "k")
	if err == nil || storage.IsNotFound(err) || storage.IsTransient(err) || gcerrors.Code(errors.Unwrap(err)) != gcerrors.PermissionDenied {
		t.Errorf("403: %v (code %v); want permission denied, neither not-found nor transient", err, gcerrors.Code(errors.Unwrap(err)))
	}
	f.SetFault(func(string, string, string) (int, bool) { return http.StatusTooManyRequests, false })
	if err := b.Put(ctx, "k", []byte("w")); !storage.IsTransient(err) {
		t.Errorf("429 on a write: %v; want transient", err)
	}
	if n := f.Count("POST insert"); n != 2 {
		t.Errorf("%d inserts, want 2: writes are not retried by the driver", n)
	}
}

// A full download is checked against the object's CRC32C.
func TestGCSDetectsCorruptDownload(t *testing.T) {
	f := storage.NewFakeGCS(t)
	b := stores.Open(t, "gs://bucket")
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := b.Put(ctx, "k", data); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
	if f.Checksums() != 1 {
		t.Error("the upload carried no CRC32C for the service to check")
	}
	f.SetCorrupt(true)
	_, err := b.Get(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "CRC32C") || !storage.IsTransient(err) {
		t.Fatalf("corrupt download: %v; want a transient CRC32C error", err)
	}
}

func TestGCSReadPastEnd(t *testing.T) {
	storage.NewFakeGCS(t)
	readPastEnd(t, stores.Open(t, "gs://bucket"))
}

// readPastEnd: ranges that start at or past the end of an object, and empty
// ranges, read nothing; an empty range of a missing key is not found.
func readPastEnd(t *testing.T, b storage.Bucket) {
	t.Helper()
	ctx := t.Context()
	if err := b.Put(ctx, "k", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{10, -1}, {20, 5}, {3, 0}} {
		rc, err := b.NewRangeReader(ctx, "k", c[0], c[1])
		if err != nil {
			t.Fatalf("range %v: %v", c, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || len(got) != 0 {
			t.Errorf("range %v = %q, %v; want nothing", c, got, err)
		}
	}
	if _, err := b.NewRangeReader(ctx, "nope", 3, 0); !storage.IsNotFound(err) {
		t.Errorf("empty range of a missing key: %v", err)
	}
}

func TestGCSURLs(t *testing.T) {
	storage.NewFakeGCS(t)
	for _, u := range []string{"gs://b?anonymous=true", "gs://b/p?access_id=-", "gs://b?universe_domain=googleapis.com"} {
		b, err := storage.Open(t.Context(), u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		b.Close()
	}
	for u, want := range map[string]string{
		"gs://b?grpc=true":          "JSON API only",
		"gs://b?zonal=true":         "JSON API only",
		"gs://b?access_id=me":       "signed URLs",
		"gs://b?anonymous=yes":      "anonymous",
		"gs://b?private_key=x":      "invalid query parameter",
		"gs:///prefix":              "bucket name",
		"gs://b/a/../c":             "..",
		"gs://b?anonymous=true&x=1": "invalid query parameter",
	} {
		_, err := storage.Open(t.Context(), u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error about %q", u, err, want)
		}
	}
}
