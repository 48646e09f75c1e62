package storage_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
)

// fakeS3 answers PUTs with scripted status codes per key, to drive the S3
// error paths that a well-behaved server rarely produces. Scripts are lists
// of S3 error codes ("" = success); the last entry repeats.
type fakeS3 struct {
	mu      sync.Mutex
	scripts map[string][]string
	puts    map[string]int
}

var s3Codes = map[string]int{
	"PreconditionFailed":         http.StatusPreconditionFailed,
	"ConditionalRequestConflict": http.StatusConflict,
	"InternalError":              http.StatusInternalServerError,
	"SlowDown":                   http.StatusServiceUnavailable,
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPut {
		http.Error(w, "unexpected "+r.Method, http.StatusMethodNotAllowed)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/bucket/")
	f.mu.Lock()
	n := f.puts[key]
	f.puts[key]++
	script := f.scripts[key]
	f.mu.Unlock()
	code := script[min(n, len(script)-1)]
	if code == "" {
		w.Header().Set("ETag", `"etag"`)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(s3Codes[code])
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted</Message><RequestId>r</RequestId></Error>`, code)
}

func TestS3ConditionalWriteErrors(t *testing.T) {
	f := &fakeS3{
		scripts: map[string][]string{
			"won-after-conflicts": {"ConditionalRequestConflict", "ConditionalRequestConflict", ""},
			"always-conflict":     {"ConditionalRequestConflict"},
			"exists":              {"PreconditionFailed"},
			"server-error":        {"InternalError"},
			"put-throttled-once":  {"SlowDown", ""},
		},
		puts: map[string]int{},
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	q := url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	b := stores.Open(t, "s3://bucket?"+q.Encode())
	ctx := t.Context()

	err := b.PutIfAbsent(ctx, "won-after-conflicts", []byte("x"))
	if err != nil {
		t.Errorf("PutIfAbsent after two 409s: %v", err)
	}
	err = b.PutIfAbsent(ctx, "always-conflict", []byte("x"))
	if !storage.IsConflict(err) || storage.IsAlreadyExists(err) {
		t.Errorf("PutIfAbsent with endless 409s: %v, want a conflict", err)
	}
	err = b.PutIfAbsent(ctx, "exists", []byte("x"))
	if !storage.IsAlreadyExists(err) {
		t.Errorf("PutIfAbsent on 412: %v, want already exists", err)
	}
	// A 5xx on a conditional write is ambiguous: it must come back as a
	// plain error after exactly one request, since an SDK retry could turn
	// a landed write into a 412 and make the winner believe it lost.
	err = b.PutIfAbsent(ctx, "server-error", []byte("x"))
	if err == nil || storage.IsAlreadyExists(err) || storage.IsConflict(err) {
		t.Errorf("PutIfAbsent on 500: %v, want an unclassified error", err)
	}
	// Ordinary writes keep the SDK's retries.
	if err := b.Put(ctx, "put-throttled-once", []byte("x")); err != nil {
		t.Errorf("Put after one 503: %v", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for key, want := range map[string]int{
		"won-after-conflicts": 3,
		"always-conflict":     5,
		"exists":              1,
		"server-error":        1,
		"put-throttled-once":  2,
	} {
		if got := f.puts[key]; got != want {
			t.Errorf("%s: %d PUT requests, want %d", key, got, want)
		}
	}
}
