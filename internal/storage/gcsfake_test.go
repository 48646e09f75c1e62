package storage

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeGCS is an in-process stand-in for the Cloud Storage JSON API, as far
// as the gs:// driver uses it: object metadata, media downloads with
// ranges, multipart and resumable uploads with ifGenerationMatch, listings
// with prefix, delimiter and pages, deletes and rewrites. Every request is
// served under one mutex, so conditional writes are atomic. Fault, when set,
// can answer a request with an error status before (or, for uploads, after)
// the request takes effect (SetFault).
type FakeGCS struct {
	URL string

	mu      sync.Mutex
	objects map[string]*fakeGCSObject // bucket + "/" + name
	uploads map[string]*fakeGCSUpload
	nextGen int64
	nextID  int
	// Requests counts requests by "METHOD kind" (kind: get, media, list,
	// insert, chunk, delete, rewrite).
	Requests map[string]int
	fault    func(method, kind, object string) (status int, apply bool)
	corrupt  bool
	checksum int // uploads that carried a CRC32C (checked)
}

// SetFault installs fn, which returns a status to answer instead of serving
// a request, and whether the request takes effect first; 0 serves it.
func (f *FakeGCS) SetFault(fn func(method, kind, object string) (status int, apply bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fn
}

// SetCorrupt makes every full download come back with one byte flipped.
func (f *FakeGCS) SetCorrupt(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrupt = on
}

type fakeGCSObject struct {
	data        []byte
	gen         int64
	contentType string
	created     time.Time
	updated     time.Time
}

type fakeGCSUpload struct {
	bucket   string
	meta     fakeGCSMeta
	ifGen    string
	received []byte
}

type fakeGCSMeta struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	Crc32c      string `json:"crc32c"`
	Md5Hash     string `json:"md5Hash"`
}

// NewFakeGCS starts a fake and points STORAGE_EMULATOR_HOST at it for the
// test.
func NewFakeGCS(t testing.TB) *FakeGCS {
	f := &FakeGCS{objects: map[string]*fakeGCSObject{}, uploads: map[string]*fakeGCSUpload{}, Requests: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	return f
}

// Count returns Requests[key] under the lock.
func (f *FakeGCS) Count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Requests[key]
}

// Checksums counts the uploads that carried a CRC32C.
func (f *FakeGCS) Checksums() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checksum
}

// Object returns an object's data.
func (f *FakeGCS) Object(bucket, name string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[bucket+"/"+name]
	if !ok {
		return nil, false
	}
	return slices.Clone(o.data), true
}

func gcsError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []map[string]string{{"message": msg, "reason": http.StatusText(code)}}}})
}

// segments splits the escaped path and unescapes each segment.
func segments(r *http.Request) []string {
	var out []string
	for s := range strings.SplitSeq(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			u = s
		}
		out = append(out, u)
	}
	return out
}

func (f *FakeGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client gave up on the request: nothing lands
	}
	seg := segments(r)
	q := r.URL.Query()
	var kind, bucket, object string
	switch {
	case len(seg) == 5 && seg[0] == "storage" && seg[2] == "b" && seg[4] == "o":
		kind, bucket = "list", seg[3]
	case len(seg) == 6 && seg[0] == "storage" && seg[2] == "b" && seg[4] == "o":
		kind, bucket, object = "get", seg[3], seg[5]
		if q.Get("alt") == "media" {
			kind = "media"
		}
		if r.Method == http.MethodDelete {
			kind = "delete"
		}
	case len(seg) == 10 && seg[0] == "storage" && seg[6] == "rewriteTo":
		kind, bucket, object = "rewrite", seg[3], seg[5]
	case len(seg) == 6 && seg[0] == "upload" && seg[3] == "b" && seg[5] == "o":
		kind, bucket = "insert", seg[4]
		if q.Get("upload_id") != "" {
			kind = "chunk"
		}
	default:
		gcsError(w, http.StatusNotFound, "no route "+r.URL.Path)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Requests[r.Method+" "+kind]++
	status, apply := 0, false
	if f.fault != nil {
		status, apply = f.fault(r.Method, kind, object)
	}
	if status != 0 && !apply {
		gcsError(w, status, "injected")
		return
	}
	orig := w
	if status != 0 {
		w = &discardWriter{header: http.Header{}}
	}
	switch kind {
	case "list":
		f.list(w, bucket, q)
	case "get":
		f.get(w, bucket, object)
	case "media":
		f.media(w, r, bucket, object)
	case "delete":
		if _, ok := f.objects[bucket+"/"+object]; !ok {
			gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+object)
			return
		}
		delete(f.objects, bucket+"/"+object)
		w.WriteHeader(http.StatusNoContent)
	case "rewrite":
		src, ok := f.objects[bucket+"/"+object]
		if !ok {
			gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+object)
			return
		}
		dst := seg[9]
		f.nextGen++
		now := time.Now().UTC()
		f.objects[seg[7]+"/"+dst] = &fakeGCSObject{data: slices.Clone(src.data), gen: f.nextGen, contentType: src.contentType, created: now, updated: now}
		writeJSON(w, map[string]any{"kind": "storage#rewriteResponse", "done": true, "resource": f.resource(seg[7], dst)})
	case "insert":
		f.insert(w, r, body, bucket, q)
	case "chunk":
		f.chunk(w, r, body, q)
	}
	if status != 0 {
		gcsError(orig, status, "injected after the request took effect")
	}
}

// discardWriter swallows a response that a fault replaces.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func crcOf(data []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(b[:])
}

func md5Of(data []byte) string {
	s := md5.Sum(data)
	return base64.StdEncoding.EncodeToString(s[:])
}

func (f *FakeGCS) resource(bucket, name string) map[string]any {
	o := f.objects[bucket+"/"+name]
	return map[string]any{"kind": "storage#object", "bucket": bucket, "name": name,
		"size": strconv.Itoa(len(o.data)), "generation": strconv.FormatInt(o.gen, 10),
		"contentType": o.contentType, "timeCreated": o.created.Format(time.RFC3339Nano),
		"updated": o.updated.Format(time.RFC3339Nano), "md5Hash": md5Of(o.data), "crc32c": crcOf(o.data),
		"etag": "CN" + strconv.FormatInt(o.gen, 10)}
}

func (f *FakeGCS) get(w http.ResponseWriter, bucket, name string) {
	if _, ok := f.objects[bucket+"/"+name]; !ok {
		gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+name)
		return
	}
	writeJSON(w, f.resource(bucket, name))
}

func (f *FakeGCS) media(w http.ResponseWriter, r *http.Request, bucket, name string) {
	o, ok := f.objects[bucket+"/"+name]
	if !ok {
		gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+name)
		return
	}
	h := w.Header()
	h.Set("Content-Type", o.contentType)
	h.Set("X-Goog-Generation", strconv.FormatInt(o.gen, 10))
	h.Set("X-Goog-Hash", "crc32c="+crcOf(o.data)+",md5="+md5Of(o.data))
	h.Set("Last-Modified", o.updated.Format(http.TimeFormat))
	size := int64(len(o.data))
	rng := r.Header.Get("Range")
	if rng == "" {
		data := slices.Clone(o.data)
		if f.corrupt && len(data) > 0 {
			data[len(data)/2] ^= 0xff
		}
		h.Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
		return
	}
	spec, ok := strings.CutPrefix(rng, "bytes=")
	a, b, _ := strings.Cut(spec, "-")
	start, err1 := strconv.ParseInt(a, 10, 64)
	end := size - 1
	var err2 error
	if b != "" {
		end, err2 = strconv.ParseInt(b, 10, 64)
	}
	if !ok || err1 != nil || err2 != nil || (b != "" && end < start) {
		gcsError(w, http.StatusBadRequest, "bad range "+rng)
		return
	}
	if start >= size {
		h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		gcsError(w, http.StatusRequestedRangeNotSatisfiable, "The requested range cannot be satisfied.")
		return
	}
	end = min(end, size-1)
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	h.Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(o.data[start : end+1])
}

func (f *FakeGCS) list(w http.ResponseWriter, bucket string, q url.Values) {
	prefix, delim, token := q.Get("prefix"), q.Get("delimiter"), q.Get("pageToken")
	max := 1000
	if m := q.Get("maxResults"); m != "" {
		max, _ = strconv.Atoi(m)
	}
	var names []string
	for k := range f.objects {
		if b, name, _ := strings.Cut(k, "/"); b == bucket && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var items []map[string]any
	var prefixes []string
	next := ""
	for _, name := range names {
		entry := name
		if delim != "" {
			if i := strings.Index(name[len(prefix):], delim); i >= 0 {
				entry = name[:len(prefix)+i+len(delim)]
			}
		}
		if entry <= token {
			continue
		}
		if len(items)+len(prefixes) == max {
			next = prev(items, prefixes)
			break
		}
		if entry != name {
			if !slices.Contains(prefixes, entry) {
				prefixes = append(prefixes, entry)
			}
			continue
		}
		items = append(items, f.resource(bucket, name))
	}
	out := map[string]any{"kind": "storage#objects"}
	if len(items) > 0 {
		out["items"] = items
	}
	if len(prefixes) > 0 {
		out["prefixes"] = prefixes
	}
	if next != "" {
		out["nextPageToken"] = next
	}
	writeJSON(w, out)
}

// prev is the largest entry returned so far: the next page starts after it.
func prev(items []map[string]any, prefixes []string) string {
	last := ""
	for _, it := range items {
		last = max(last, it["name"].(string))
	}
	for _, p := range prefixes {
		last = max(last, p)
	}
	return last
}

func (f *FakeGCS) insert(w http.ResponseWriter, r *http.Request, body []byte, bucket string, q url.Values) {
	switch q.Get("uploadType") {
	case "multipart":
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/related" {
			gcsError(w, http.StatusBadRequest, "want multipart/related")
			return
		}
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		var meta fakeGCSMeta
		var data []byte
		for i := 0; ; i++ {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				gcsError(w, http.StatusBadRequest, err.Error())
				return
			}
			b, _ := io.ReadAll(p)
			if i == 0 {
				if err := json.Unmarshal(b, &meta); err != nil {
					gcsError(w, http.StatusBadRequest, err.Error())
					return
				}
			} else {
				data = b
				if meta.ContentType == "" {
					meta.ContentType = p.Header.Get("Content-Type")
				}
			}
		}
		f.finish(w, bucket, meta, q.Get("ifGenerationMatch"), data)
	case "resumable":
		var meta fakeGCSMeta
		if err := json.Unmarshal(body, &meta); err != nil {
			gcsError(w, http.StatusBadRequest, err.Error())
			return
		}
		if q.Get("ifGenerationMatch") == "0" {
			if _, ok := f.objects[bucket+"/"+meta.Name]; ok {
				gcsError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
				return
			}
		}
		f.nextID++
		id := strconv.Itoa(f.nextID)
		f.uploads[id] = &fakeGCSUpload{bucket: bucket, meta: meta, ifGen: q.Get("ifGenerationMatch")}
		w.Header().Set("Location", f.URL+"/upload/storage/v1/b/"+bucket+"/o?uploadType=resumable&upload_id="+id)
		w.WriteHeader(http.StatusOK)
	default:
		gcsError(w, http.StatusBadRequest, "uploadType "+q.Get("uploadType"))
	}
}

// chunk takes one request of a resumable upload: "Content-Range: bytes a-b/*"
// (more to come), "bytes a-b/total" (last) or "bytes */total".
func (f *FakeGCS) chunk(w http.ResponseWriter, r *http.Request, body []byte, q url.Values) {
	u, ok := f.uploads[q.Get("upload_id")]
	if !ok {
		gcsError(w, http.StatusNotFound, "no such upload")
		return
	}
	cr := strings.TrimPrefix(r.Header.Get("Content-Range"), "bytes ")
	rng, total, _ := strings.Cut(cr, "/")
	if rng != "*" {
		a, _, _ := strings.Cut(rng, "-")
		start, _ := strconv.Atoi(a)
		if start != len(u.received) {
			gcsError(w, http.StatusBadRequest, fmt.Sprintf("chunk at %d, have %d", start, len(u.received)))
			return
		}
		u.received = append(u.received, body...)
	}
	if total == "*" {
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", len(u.received)-1))
		if r.Header.Get("X-GUploader-No-308") == "yes" {
			// As the upload service answers clients that ask for it.
			w.Header().Set("X-Http-Status-Code-Override", "308")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusPermanentRedirect)
		return
	}
	if h := r.Header.Get("X-Goog-Hash"); h != "" {
		if h != "crc32c="+crcOf(u.received) {
			gcsError(w, http.StatusBadRequest, "Provided CRC32C "+h+" does not match the data")
			return
		}
		u.meta.Crc32c = crcOf(u.received)
	}
	if n, _ := strconv.Atoi(total); n != len(u.received) {
		gcsError(w, http.StatusBadRequest, fmt.Sprintf("total %d, received %d", n, len(u.received)))
		return
	}
	delete(f.uploads, q.Get("upload_id"))
	f.finish(w, u.bucket, u.meta, u.ifGen, u.received)
}

func (f *FakeGCS) finish(w http.ResponseWriter, bucket string, meta fakeGCSMeta, ifGen string, data []byte) {
	key := bucket + "/" + meta.Name
	if ifGen == "0" {
		if _, ok := f.objects[key]; ok {
			gcsError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
			return
		}
	}
	if meta.Crc32c != "" && meta.Crc32c != crcOf(data) {
		gcsError(w, http.StatusBadRequest, "Provided CRC32C does not match the data")
		return
	}
	if meta.Crc32c != "" {
		f.checksum++
	}
	if meta.Md5Hash != "" && meta.Md5Hash != md5Of(data) {
		gcsError(w, http.StatusBadRequest, "Provided MD5 hash does not match the data")
		return
	}
	f.nextGen++
	now := time.Now().UTC()
	created := now
	if old, ok := f.objects[key]; ok {
		created = old.created
	}
	f.objects[key] = &fakeGCSObject{data: data, gen: f.nextGen, contentType: meta.ContentType, created: created, updated: now}
	writeJSON(w, f.resource(bucket, meta.Name))
}
