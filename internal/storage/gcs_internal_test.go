package storage

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"slices"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
)

// GCSListPages lists prefix in a gs:// bucket through the driver (at
// STORAGE_EMULATOR_HOST), pageSize objects a page, and returns each page's
// keys: Bucket.List cannot choose a page size, and takes 1000 a page.
// TestGCSEmulator checks pagination against an emulator with it.
func GCSListPages(ctx context.Context, bucket, prefix string, pageSize int) ([][]string, error) {
	svc, err := gcsClient(ctx, gcsClientKey{emulator: os.Getenv("STORAGE_EMULATOR_HOST")})
	if err != nil {
		return nil, err
	}
	b := &gcsBucket{svc: svc, name: bucket, retry: defaultGCSRetry}
	var pages [][]string
	var token []byte
	for {
		p, err := b.ListPaged(ctx, &driver.ListOptions{Prefix: prefix, PageSize: pageSize, PageToken: token})
		if err != nil {
			return pages, err
		}
		var keys []string
		for _, o := range p.Objects {
			keys = append(keys, o.Key)
		}
		pages = append(pages, keys)
		if len(p.NextPageToken) == 0 {
			return pages, nil
		}
		if len(pages) >= 1000 {
			return pages, errors.New("the listing does not end")
		}
		token = p.NextPageToken
	}
}

// Keys are escaped as gcsblob escaped them, so that objects it wrote keep
// their names.
func TestGCSKeyEscaping(t *testing.T) {
	for key, want := range map[string]string{
		"plain/key.parquet": "plain/key.parquet",
		"a\nb\rc":           "a__0xa__b__0xd__c",
		"x/../y":            "x/..__0x2f__y",
		"lit__0x41__eral":   "lit__0x5f___0x41__eral",
		"__0x":              "__0x",
		"ünï/çødé":          "ünï/çødé",
	} {
		if got := escapeGCSKey(key); got != want {
			t.Errorf("escapeGCSKey(%q) = %q, want %q", key, got, want)
		}
		if got := unescapeGCSKey(escapeGCSKey(key)); got != key {
			t.Errorf("round trip of %q = %q", key, got)
		}
	}
}

// Objects larger than the buffer go up as resumable uploads in chunks,
// through the writer's Write path, with the precondition kept.
func TestGCSResumableUpload(t *testing.T) {
	f := NewFakeGCS(t)
	ctx := t.Context()
	svc, err := gcsClient(ctx, gcsClientKey{emulator: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	b := blob.NewBucket(&gcsBucket{svc: svc, name: "bucket", retry: defaultGCSRetry})
	defer b.Close()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB
	write := func(ctx context.Context) error {
		w, err := b.NewWriter(ctx, "big", &blob.WriterOptions{ContentType: contentType, BufferSize: 256 << 10, IfNotExist: true})
		if err != nil {
			return err
		}
		for chunk := range slices.Chunk(payload, 100<<10) {
			if _, err := w.Write(chunk); err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	}
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Object("bucket", "big"); !ok || !bytes.Equal(got, payload) {
		t.Fatalf("stored %d bytes, %v", len(got), ok)
	}
	if n := f.Count("POST chunk") + f.Count("PUT chunk"); n != 3 {
		t.Errorf("%d chunks, want 3", n)
	}
	if f.Checksums() != 1 {
		t.Errorf("the upload carried no CRC32C")
	}
	if err := write(ctx); !IsAlreadyExists(classify(err)) {
		t.Errorf("second conditional upload: %v, want already exists", err)
	}
	// Written through the driver, read back through the bucket.
	got, err := (&cloudBucket{b: b, cond: b, shared: true}).Get(ctx, "big")
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
}

// The emulator host may be a URL.
func TestGCSEmulatorURL(t *testing.T) {
	f := NewFakeGCS(t)
	t.Setenv("STORAGE_EMULATOR_HOST", f.URL)
	u, _ := url.Parse("gs://bucket")
	b, err := openGCS(t.Context(), u, "p/")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Object("bucket", "p/k"); !ok {
		t.Error("object not under its prefix")
	}
}
