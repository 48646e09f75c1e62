package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMain(m *testing.M) {
	if os.Getenv(raceChildEnv) != "" {
		os.Exit(raceChild())
	}
	stores.Main(m)
}

// TestConformance checks the Bucket contract on every backend; gs:// runs
// against the in-process JSON API fake (gcsfake_test.go).
func TestConformance(t *testing.T) {
	stores.ForEachStore(t, conformance)
	t.Run("gs", func(t *testing.T) {
		storage.NewFakeGCS(t)
		conformance(t, "gs://bucket/"+stores.UniqueName(t))
	})
}

func conformance(t *testing.T, url string) {
	t.Logf("store %s", url)
	ctx := t.Context()
	b := stores.Open(t, url)

	// Missing keys.
	if _, err := b.Get(ctx, "nope"); !storage.IsNotFound(err) {
		t.Errorf("Get missing: got %v, want not found", err)
	}
	if _, err := b.NewRangeReader(ctx, "nope", 0, -1); !storage.IsNotFound(err) {
		t.Errorf("NewRangeReader missing: got %v, want not found", err)
	}
	if _, err := b.Attributes(ctx, "nope"); !storage.IsNotFound(err) {
		t.Errorf("Attributes missing: got %v, want not found", err)
	}
	if err := b.Delete(ctx, "nope"); !storage.IsNotFound(err) {
		t.Errorf("Delete missing: got %v, want not found", err)
	}

	// Put, overwrite, Get, Attributes.
	if err := b.Put(ctx, "dir/a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "dir/a", []byte("two!")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "dir/a"); err != nil || string(got) != "two!" {
		t.Errorf("Get = %q, %v; want two!", got, err)
	}
	if a, err := b.Attributes(ctx, "dir/a"); err != nil || a.Size != 4 || a.Key != "dir/a" || a.ModTime.IsZero() {
		t.Errorf("Attributes = %+v, %v", a, err)
	}

	// PutIfAbsent.
	if err := b.PutIfAbsent(ctx, "log/1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	err := b.PutIfAbsent(ctx, "log/1", []byte("second"))
	if !storage.IsAlreadyExists(err) {
		t.Fatalf("second PutIfAbsent: got %v, want already exists", err)
	}
	if got, _ := b.Get(ctx, "log/1"); string(got) != "first" {
		t.Errorf("after lost PutIfAbsent: %q", got)
	}

	// Ranges.
	if err := b.Put(ctx, "r", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, -1, "0123456789"}, {3, 4, "3456"}, {7, -1, "789"}, {8, 10, "89"}} {
		rc, err := b.NewRangeReader(ctx, "r", c.off, c.n)
		if err != nil {
			t.Fatalf("range %d,%d: %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != c.want {
			t.Errorf("range %d,%d = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	ra := storage.NewReaderAt(ctx, b, "r", 10)
	buf := make([]byte, 4)
	if n, err := ra.ReadAt(buf, 2); n != 4 || err != nil || string(buf) != "2345" {
		t.Errorf("ReadAt(2) = %d, %v, %q", n, err, buf)
	}
	if n, err := ra.ReadAt(buf, 8); n != 2 || err != io.EOF || string(buf[:n]) != "89" {
		t.Errorf("ReadAt(8) = %d, %v, %q; want 2, EOF", n, err, buf[:n])
	}
	if c, ok := ra.(io.Closer); ok {
		c.Close()
	}

	// Streaming writer.
	w, err := b.NewWriter(ctx, "big/obj")
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 1<<20+17)
	for chunk := range slices.Chunk(payload, 64<<10) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "big/obj"); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("streamed object: len %d, %v", len(got), err)
	}

	// A writer closed after its context is canceled publishes nothing.
	cctx, cancel := context.WithCancel(ctx)
	w, err = b.NewWriter(cctx, "abandoned")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("partial"))
	cancel()
	if err := w.Close(); err == nil {
		t.Error("Close after cancel succeeded")
	}
	if _, err := b.Get(ctx, "abandoned"); !storage.IsNotFound(err) {
		t.Errorf("abandoned write is visible: %v", err)
	}

	// Listing: lexical order, including "a-b" < "a/c" ('-' < '/').
	for _, k := range []string{"l/a/c", "l/a-b", "l/b", "l/a/b/z", "l/aa", "m"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	err = b.List(ctx, "l/", func(a storage.Attrs) error {
		keys = append(keys, a.Key)
		if a.Size != int64(len(a.Key)) {
			t.Errorf("List %s size %d", a.Key, a.Size)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"l/a-b", "l/a/b/z", "l/a/c", "l/aa", "l/b"}
	if !slices.Equal(keys, want) {
		t.Errorf("List(l/) = %q, want %q", keys, want)
	}
	keys = nil
	b.List(ctx, "l/a", func(a storage.Attrs) error { keys = append(keys, a.Key); return nil })
	if want := want[:4]; !slices.Equal(keys, want) {
		t.Errorf("List(l/a) = %q, want %q", keys, want)
	}
	stop := errors.New("stop")
	n := 0
	err = b.List(ctx, "", func(storage.Attrs) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("List stopped by callback: %v after %d calls, want the callback's error after 1", err, n)
	}

	// Delete.
	if err := b.Delete(ctx, "l/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "l/b"); !storage.IsNotFound(err) {
		t.Errorf("deleted object: %v", err)
	}

	// Sub views.
	sub := storage.Sub(b, "l/a")
	if got, err := sub.Get(ctx, "c"); err != nil || string(got) != "l/a/c" {
		t.Errorf("Sub Get = %q, %v", got, err)
	}
	keys = nil
	sub.List(ctx, "", func(a storage.Attrs) error { keys = append(keys, a.Key); return nil })
	if want := []string{"b/z", "c"}; !slices.Equal(keys, want) {
		t.Errorf("Sub List = %q, want %q", keys, want)
	}

	// Invalid keys are rejected everywhere.
	for _, k := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", "./a", "a/.tmp-x"} {
		if err := b.Put(ctx, k, nil); err == nil {
			t.Errorf("Put(%q) succeeded", k)
		}
	}

	// Reopening the URL sees the same objects.
	b2 := stores.Open(t, url)
	if got, err := b2.Get(ctx, "log/1"); err != nil || string(got) != "first" {
		t.Errorf("reopened Get = %q, %v", got, err)
	}
}

func TestOpenBadURL(t *testing.T) {
	_, err := storage.Open(t.Context(), "ftp://x")
	want := `unsupported URL scheme "ftp" in "ftp://x" (want file, mem, s3, gs or azblob)`
	if err == nil || err.Error() != want {
		t.Errorf("Open(ftp://x) error = %v, want %s", err, want)
	}
	for _, u := range []string{"file://relative/dir", "file:///x?foo=1", "/no/scheme", "s3://b/a/../c", "mem://x?y=1"} {
		if _, err := storage.Open(t.Context(), u); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%q) error is not one line: %q", u, err)
		}
	}
}

func TestMemRegistry(t *testing.T) {
	ctx := t.Context()
	name := "mem://" + stores.UniqueName(t)
	a := stores.Open(t, name)
	if err := a.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := stores.Open(t, name)
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("same name after close: %q, %v", got, err)
	}
	fresh1, fresh2 := stores.Open(t, "mem://"), stores.Open(t, "mem://")
	fresh1.Put(ctx, "k", []byte("v"))
	if _, err := fresh2.Get(ctx, "k"); !storage.IsNotFound(err) {
		t.Errorf("bare mem:// buckets are shared: %v", err)
	}
	prefixed := stores.Open(t, name+"/p/q")
	if err := prefixed.Put(ctx, "k", []byte("pv")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "p/q/k"); err != nil || string(got) != "pv" {
		t.Errorf("prefixed mem URL: %q, %v", got, err)
	}
}

func TestFileLocalPath(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b := stores.Open(t, "file://"+dir)
	if err := b.Put(ctx, "d/x.parquet", []byte("data")); err != nil {
		t.Fatal(err)
	}
	lp, ok := storage.Sub(b, "d").(storage.LocalPather)
	if !ok {
		t.Fatal("Sub of a file bucket is not a LocalPather")
	}
	p, ok := lp.LocalPath("x.parquet")
	if !ok {
		t.Fatal("no local path")
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "data" {
		t.Errorf("local file %s: %q, %v", p, got, err)
	}
	// No temporaries or sidecars are left behind.
	entries, _ := os.ReadDir(dir + "/d")
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1: %v", len(entries), entries)
	}
	if _, ok := lp.LocalPath("../escape"); ok {
		t.Error("LocalPath accepted ..")
	}
}

func ExampleOpen() {
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	fmt.Println(b.PutIfAbsent(ctx, "_log/00000000000000000000.json", []byte("{}")))
	fmt.Println(storage.IsAlreadyExists(b.PutIfAbsent(ctx, "_log/00000000000000000000.json", []byte("{}"))))
	// Output:
	// <nil>
	// true
}
