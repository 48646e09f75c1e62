package storage

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	storagev1 "google.golang.org/api/storage/v1"
)

// gs:// is served by a gocloud.dev/blob driver written on Google's generated
// client for the Cloud Storage JSON API (google.golang.org/api/storage/v1),
// the same client that cloud.google.com/go/storage uses for its HTTP
// transport, rather than by gocloud.dev/blob/gcsblob.
//
// Why: gcsblob imports cloud.google.com/go/storage, which links and
// initialises, whether or not a gs:// table is configured, its gRPC transport
// with xDS (some 40 Envoy API packages of protobuf descriptors), RLS, the
// Cloud Monitoring exporter and OpenTelemetry metrics. Those init functions
// alone made up about 20 MiB of an idle daemon's resident memory (the binary
// was 30 MB larger), for a transport compactord never used: gcsblob reaches
// GCS over the JSON API by default, as this driver does.
//
// What differs from gcsblob: grpc= and zonal= (Rapid Storage) URLs are not
// supported, and neither are signed URLs (access_id=, private_key_path=),
// which compactord never makes. A 403 is PermissionDenied, not NotFound.
// Conditional writes are sent once, never retried (the S3 path does the
// same; see cloudBucket.cond): a retried put-if-absent whose first response
// was lost would come back 412 and report the writer's own object as
// another's.

// gcsScope is the OAuth scope asked of Application Default Credentials, as
// gcsblob asked.
const gcsScope = storagev1.CloudPlatformScope

// gcsFields are the object fields the driver reads.
const gcsFields = "name,size,updated,timeCreated,md5Hash,etag,contentType,contentEncoding,contentLanguage,contentDisposition,cacheControl,metadata"

var errGCSUnimplemented = errors.New("not supported by compactord's GCS driver")

// gcsClients caches one API client per set of connection options, shared by
// every gs:// bucket: a client holds the connection pool and the credentials'
// token cache. Failures are not cached, so that credentials that appear
// later are found.
var gcsClients struct {
	sync.Mutex
	m map[gcsClientKey]*storagev1.Service
}

type gcsClientKey struct {
	anonymous      bool
	universeDomain string
	emulator       string
}

// openGCS opens gs://bucket. Query parameters: anonymous=true (or
// access_id=-, gcsblob's spelling) for an unauthenticated client;
// universe_domain=. STORAGE_EMULATOR_HOST, as the Google clients honour it,
// points the client at an emulator without authentication.
func openGCS(ctx context.Context, u *url.URL, prefix string) (Bucket, error) {
	if u.Host == "" {
		return nil, errors.New("gs URLs need a bucket name: gs://bucket/prefix")
	}
	var key gcsClientKey
	q := u.Query()
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "anonymous":
			anon, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("invalid value %q for query parameter \"anonymous\": %w", v, err)
			}
			key.anonymous = key.anonymous || anon
		case "access_id":
			if v != "-" {
				return nil, errors.New(`query parameter "access_id" only names the signer of signed URLs, which compactord does not use; "access_id=-" (anonymous) is accepted`)
			}
			key.anonymous = true
		case "universe_domain":
			key.universeDomain = v
		case "grpc", "zonal":
			return nil, fmt.Errorf("query parameter %q: compactord reaches Cloud Storage over its JSON API only (no gRPC, no Rapid Storage zonal buckets)", k)
		default:
			return nil, fmt.Errorf("invalid query parameter %q (want anonymous or universe_domain)", k)
		}
	}
	key.emulator = os.Getenv("STORAGE_EMULATOR_HOST")
	svc, err := gcsClient(ctx, key)
	if err != nil {
		return nil, err
	}
	b := blob.NewBucket(&gcsBucket{svc: svc, name: u.Host, retry: defaultGCSRetry})
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	return &cloudBucket{b: b, cond: b}, nil
}

func gcsClient(ctx context.Context, key gcsClientKey) (*storagev1.Service, error) {
	gcsClients.Lock()
	defer gcsClients.Unlock()
	if svc := gcsClients.m[key]; svc != nil {
		return svc, nil
	}
	opts := []option.ClientOption{option.WithScopes(gcsScope), option.WithUserAgent("compactord")}
	if key.universeDomain != "" {
		opts = append(opts, option.WithUniverseDomain(key.universeDomain))
	}
	if key.anonymous {
		opts = append(opts, option.WithoutAuthentication())
	}
	if host := key.emulator; host != "" {
		// As cloud.google.com/go/storage reads it: a host:port, or a URL.
		ep := &url.URL{Scheme: "http", Host: host}
		if strings.Contains(host, "://") {
			var err error
			if ep, err = url.Parse(host); err != nil {
				return nil, fmt.Errorf("STORAGE_EMULATOR_HOST: %w", err)
			}
		}
		ep.Path = "/storage/v1/"
		opts = append(opts, option.WithEndpoint(ep.String()), option.WithoutAuthentication())
	}
	// The client outlives the open that creates it: its credentials refresh
	// tokens long after ctx is gone.
	svc, err := storagev1.NewService(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, fmt.Errorf("google cloud storage client: %w", err)
	}
	if gcsClients.m == nil {
		gcsClients.m = map[gcsClientKey]*storagev1.Service{}
	}
	gcsClients.m[key] = svc
	return svc, nil
}

// gcsRetry retries idempotent requests (reads, listings, metadata) that met
// a transient failure, as cloud.google.com/go/storage does by default:
// 408, 429, 5xx and network errors, with jittered exponential backoff.
// Writes and deletes are sent once; callers see IsTransient errors and retry
// at their level.
type gcsRetry struct {
	attempts  int
	base, max time.Duration
}

var defaultGCSRetry = gcsRetry{attempts: 4, base: 250 * time.Millisecond, max: 4 * time.Second}

func (r gcsRetry) do(ctx context.Context, fn func() error) error {
	backoff := r.base
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= r.attempts || ctx.Err() != nil || !gcsRetryable(err) {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, r.max)
	}
}

func gcsRetryable(err error) bool {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code == http.StatusRequestTimeout || g.Code == http.StatusTooManyRequests || g.Code >= 500
	}
	return IsTransient(err)
}

// gcsBucket implements driver.Bucket.
type gcsBucket struct {
	svc   *storagev1.Service
	name  string
	retry gcsRetry
}

var _ driver.Bucket = (*gcsBucket)(nil)

func (b *gcsBucket) ErrorCode(err error) gcerrors.ErrorCode {
	switch {
	case errors.Is(err, context.Canceled):
		return gcerrors.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return gcerrors.DeadlineExceeded
	case errors.Is(err, errGCSUnimplemented):
		return gcerrors.Unimplemented
	}
	var g *googleapi.Error
	if errors.As(err, &g) {
		switch {
		case g.Code == http.StatusNotFound:
			return gcerrors.NotFound
		case g.Code == http.StatusPreconditionFailed:
			// ifGenerationMatch=0 on an existing object.
			return gcerrors.FailedPrecondition
		case g.Code == http.StatusTooManyRequests:
			return gcerrors.ResourceExhausted
		case g.Code == http.StatusUnauthorized || g.Code == http.StatusForbidden:
			return gcerrors.PermissionDenied
		case g.Code == http.StatusBadRequest:
			return gcerrors.InvalidArgument
		case g.Code >= 500:
			return gcerrors.Internal
		}
	}
	return gcerrors.Unknown
}

// As exposes the API client as *storagev1.Service.
func (b *gcsBucket) As(i any) bool {
	p, ok := i.(**storagev1.Service)
	if ok {
		*p = b.svc
	}
	return ok
}

// ErrorAs exposes *googleapi.Error.
func (b *gcsBucket) ErrorAs(err error, i any) bool {
	p, ok := i.(**googleapi.Error)
	return ok && errors.As(err, p)
}

func (b *gcsBucket) Close() error { return nil }

func (b *gcsBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	var o *storagev1.Object
	err := b.retry.do(ctx, func() error {
		var err error
		o, err = b.svc.Objects.Get(b.name, escapeGCSKey(key)).Fields(gcsFields).Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	md5, _ := base64.StdEncoding.DecodeString(o.Md5Hash)
	etag := o.Etag
	if etag != "" && !strings.HasPrefix(etag, `"`) && !strings.HasPrefix(etag, `W/"`) {
		etag = strconv.Quote(etag)
	}
	return &driver.Attributes{
		CacheControl:       o.CacheControl,
		ContentDisposition: o.ContentDisposition,
		ContentEncoding:    o.ContentEncoding,
		ContentLanguage:    o.ContentLanguage,
		ContentType:        o.ContentType,
		Metadata:           o.Metadata,
		CreateTime:         gcsTime(o.TimeCreated),
		ModTime:            gcsTime(o.Updated),
		Size:               int64(o.Size),
		MD5:                md5,
		ETag:               etag,
		AsFunc:             func(any) bool { return false },
	}, nil
}

func gcsTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func (b *gcsBucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if opts.BeforeList != nil {
		if err := opts.BeforeList(func(any) bool { return false }); err != nil {
			return nil, err
		}
	}
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = 1000
	}
	call := b.svc.Objects.List(b.name).Prefix(escapeGCSKey(opts.Prefix)).MaxResults(int64(pageSize)).
		Fields("items(name,size,updated,md5Hash),prefixes,nextPageToken").Context(ctx)
	if opts.Delimiter != "" {
		call.Delimiter(escapeGCSKey(opts.Delimiter))
	}
	if len(opts.PageToken) > 0 {
		call.PageToken(string(opts.PageToken))
	}
	var res *storagev1.Objects
	err := b.retry.do(ctx, func() error {
		var err error
		res, err = call.Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: []byte(res.NextPageToken)}
	for _, o := range res.Items {
		md5, _ := base64.StdEncoding.DecodeString(o.Md5Hash)
		page.Objects = append(page.Objects, &driver.ListObject{Key: unescapeGCSKey(o.Name), ModTime: gcsTime(o.Updated),
			Size: int64(o.Size), MD5: md5, AsFunc: func(any) bool { return false }})
	}
	for _, p := range res.Prefixes {
		page.Objects = append(page.Objects, &driver.ListObject{Key: unescapeGCSKey(p), IsDir: true, AsFunc: func(any) bool { return false }})
	}
	// The service returns "directories" after the objects of a page.
	slices.SortFunc(page.Objects, func(x, y *driver.ListObject) int { return strings.Compare(x.Key, y.Key) })
	return page, nil
}

func (b *gcsBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	if opts.BeforeRead != nil {
		if err := opts.BeforeRead(func(any) bool { return false }); err != nil {
			return nil, err
		}
	}
	if length == 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, err
		}
		return &gcsReader{body: http.NoBody, attrs: driver.ReaderAttributes{ContentType: a.ContentType, ModTime: a.ModTime, Size: a.Size}}, nil
	}
	call := b.svc.Objects.Get(b.name, escapeGCSKey(key)).Context(ctx)
	switch {
	case length > 0:
		call.Header().Set("Range", fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		call.Header().Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	var res *http.Response
	err := b.retry.do(ctx, func() error {
		var err error
		res, err = call.Download()
		return err
	})
	var g *googleapi.Error
	if errors.As(err, &g) && g.Code == http.StatusRequestedRangeNotSatisfiable {
		// The object exists and ends before offset: nothing to read.
		size, _ := contentRangeSize(g.Header.Get("Content-Range"))
		return &gcsReader{body: http.NoBody, attrs: driver.ReaderAttributes{Size: size}}, nil
	}
	if err != nil {
		return nil, err
	}
	r := &gcsReader{body: res.Body, attrs: driver.ReaderAttributes{ContentType: res.Header.Get("Content-Type"), Size: res.ContentLength}}
	if t, err := http.ParseTime(res.Header.Get("Last-Modified")); err == nil {
		r.attrs.ModTime = t
	}
	switch {
	case res.StatusCode == http.StatusPartialContent:
		size, err := contentRangeSize(res.Header.Get("Content-Range"))
		if err != nil {
			res.Body.Close()
			return nil, err
		}
		r.attrs.Size = size
	case offset > 0:
		res.Body.Close()
		return nil, fmt.Errorf("gcs: read %s at %d: the service answered %s to a range request", key, offset, res.Status)
	case length < 0 && !res.Uncompressed && res.Header.Get("Content-Encoding") == "":
		// The whole object as stored: check it against the service's CRC32C,
		// as cloud.google.com/go/storage does.
		if want, ok := gcsCRC32C(res.Header); ok {
			r.crc, r.want = crc32.New(crc32.MakeTable(crc32.Castagnoli)), want
		}
	}
	if length > 0 {
		r.limit = length
	} else {
		r.limit = -1
	}
	return r, nil
}

// contentRangeSize reads the total of "bytes a-b/size" or "bytes */size".
func contentRangeSize(cr string) (int64, error) {
	i := strings.LastIndexByte(cr, '/')
	if !strings.HasPrefix(cr, "bytes ") || i < 0 {
		return 0, fmt.Errorf("gcs: invalid Content-Range %q", cr)
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("gcs: invalid Content-Range %q", cr)
	}
	return n, nil
}

// gcsCRC32C reads "X-Goog-Hash: crc32c=<base64>,md5=<base64>".
func gcsCRC32C(h http.Header) (uint32, bool) {
	for _, v := range h.Values("X-Goog-Hash") {
		for part := range strings.SplitSeq(v, ",") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(part), "crc32c="); ok {
				b, err := base64.StdEncoding.DecodeString(s)
				if err == nil && len(b) == 4 {
					return binary.BigEndian.Uint32(b), true
				}
			}
		}
	}
	return 0, false
}

type gcsReader struct {
	body  io.ReadCloser
	attrs driver.ReaderAttributes
	limit int64 // bytes left to return; -1: no limit
	crc   hash.Hash32
	want  uint32
}

func (r *gcsReader) Read(p []byte) (int, error) {
	if r.limit == 0 {
		return 0, io.EOF
	}
	if r.limit > 0 && int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.body.Read(p)
	if r.limit > 0 {
		r.limit -= int64(n)
	}
	if r.crc != nil {
		r.crc.Write(p[:n])
		if err == io.EOF && r.crc.Sum32() != r.want {
			return n, fmt.Errorf("gcs: the object's CRC32C is %08x, the data read has %08x: %w", r.want, r.crc.Sum32(), io.ErrUnexpectedEOF)
		}
	}
	return n, err
}

func (r *gcsReader) Close() error                         { return r.body.Close() }
func (r *gcsReader) Attributes() *driver.ReaderAttributes { return &r.attrs }
func (r *gcsReader) As(any) bool                          { return false }

func (b *gcsBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	if opts.BeforeWrite != nil {
		if err := opts.BeforeWrite(func(any) bool { return false }); err != nil {
			return nil, err
		}
	}
	obj := &storagev1.Object{Name: escapeGCSKey(key), ContentType: contentType, CacheControl: opts.CacheControl,
		ContentDisposition: opts.ContentDisposition, ContentEncoding: opts.ContentEncoding,
		ContentLanguage: opts.ContentLanguage, Metadata: opts.Metadata}
	if len(opts.ContentMD5) > 0 {
		obj.Md5Hash = base64.StdEncoding.EncodeToString(opts.ContentMD5)
	}
	// Uploads of up to one chunk (16 MiB by default) are one request; larger
	// ones are resumable uploads of chunk-sized requests. A negative
	// BufferSize streams one request without buffering.
	chunk := googleapi.DefaultUploadChunkSize
	switch {
	case opts.BufferSize > 0:
		chunk = opts.BufferSize
	case opts.BufferSize < 0:
		chunk = 0
	}
	return &gcsWriter{ctx: ctx, b: b, obj: obj, chunk: chunk, ifNotExist: opts.IfNotExist}, nil
}

// gcsWriter uploads what is written through a pipe into one insert call, or
// hands Upload's reader to it directly.
type gcsWriter struct {
	ctx        context.Context
	b          *gcsBucket
	obj        *storagev1.Object
	chunk      int
	ifNotExist bool

	pw       *io.PipeWriter
	done     chan struct{}
	err      error // set before done closes
	uploaded bool
}

func (w *gcsWriter) insert(r io.Reader) error {
	call := w.b.svc.Objects.Insert(w.b.name, w.obj).Context(w.ctx).
		Media(r, googleapi.ContentType(w.obj.ContentType), googleapi.ChunkSize(w.chunk), googleapi.EnableAutoChecksum())
	if w.ifNotExist {
		call.IfGenerationMatch(0)
	}
	_, err := call.Do()
	return err
}

// Upload implements driver.Uploader. Its error is reported by Close, which
// gocloud wraps with the error code (it returns Upload's error unwrapped).
func (w *gcsWriter) Upload(r io.Reader) error {
	w.uploaded = true
	w.err = w.insert(r)
	return nil
}

func (w *gcsWriter) Write(p []byte) (int, error) {
	if w.pw == nil {
		pr, pw := io.Pipe()
		w.pw, w.done = pw, make(chan struct{})
		go func() {
			defer close(w.done)
			w.err = w.insert(pr)
			pr.CloseWithError(errors.Join(errUploadEnded, w.err))
		}()
	}
	return w.pw.Write(p)
}

// Close finishes the upload, or abandons it if ctx is done: the insert then
// fails on its body, and no object is written.
func (w *gcsWriter) Close() error {
	switch {
	case w.uploaded:
		return w.err
	case w.pw == nil:
		if err := w.ctx.Err(); err != nil {
			return err
		}
		return w.insert(bytes.NewReader(nil))
	}
	if err := w.ctx.Err(); err != nil {
		w.pw.CloseWithError(err)
		<-w.done
		return err
	}
	w.pw.Close()
	<-w.done
	return w.err
}

func (b *gcsBucket) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	if opts.BeforeCopy != nil {
		if err := opts.BeforeCopy(func(any) bool { return false }); err != nil {
			return err
		}
	}
	var token string
	for {
		call := b.svc.Objects.Rewrite(b.name, escapeGCSKey(srcKey), b.name, escapeGCSKey(dstKey), &storagev1.Object{}).Context(ctx)
		if token != "" {
			call.RewriteToken(token)
		}
		res, err := call.Do()
		if err != nil {
			return err
		}
		if res.Done {
			return nil
		}
		token = res.RewriteToken
	}
}

func (b *gcsBucket) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	if opts.BeforeDelete != nil {
		if err := opts.BeforeDelete(func(any) bool { return false }); err != nil {
			return err
		}
	}
	return b.svc.Objects.Delete(b.name, escapeGCSKey(key)).Context(ctx).Do()
}

func (b *gcsBucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", fmt.Errorf("signed URLs: %w", errGCSUnimplemented)
}

// escapeGCSKey escapes keys as gcsblob did, so that objects it wrote keep
// their names: line feeds and carriage returns, which the service does not
// take, and the slash of "../" become __0x<hex>__, and so does the first
// underscore of anything that would read as such an escape. compactord's own
// keys (see ValidateKey) never need it.
func escapeGCSKey(key string) string {
	if !strings.ContainsAny(key, "\n\r") && !strings.Contains(key, "../") && !strings.Contains(key, "__0x") {
		return key
	}
	runes := []rune(key)
	var sb strings.Builder
	for i, r := range runes {
		esc := r == '\n' || r == '\r' || (r == '/' && i >= 2 && runes[i-1] == '.' && runes[i-2] == '.')
		if ok, _, _ := unescapeAt(runes, i); esc || ok {
			fmt.Fprintf(&sb, "__%#x__", r)
		} else {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// unescapeGCSKey reverses escapeGCSKey.
func unescapeGCSKey(key string) string {
	if !strings.Contains(key, "__0x") {
		return key
	}
	runes := []rune(key)
	var sb strings.Builder
	for i := 0; i < len(runes); i++ {
		if ok, r, last := unescapeAt(runes, i); ok {
			sb.WriteRune(r)
			i = last
		} else {
			sb.WriteRune(runes[i])
		}
	}
	return sb.String()
}

// unescapeAt parses "__0x<hex>__" at r[i], returning the rune and the index
// of the sequence's last rune.
func unescapeAt(r []rune, i int) (bool, rune, int) {
	const lead = "__0x"
	for k := range len(lead) {
		if i+k >= len(r) || r[i+k] != rune(lead[k]) {
			return false, 0, 0
		}
	}
	j := i + len(lead)
	start := j
	for j < len(r) && r[j] != '_' {
		j++
	}
	if j+1 >= len(r) || r[j+1] != '_' {
		return false, 0, 0
	}
	v, err := strconv.ParseInt(string(r[start:j]), 16, 32)
	if err != nil {
		return false, 0, 0
	}
	return true, rune(v), j + 1
}
