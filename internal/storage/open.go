package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob:// with blob.DefaultURLMux
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"
)

// Open opens the bucket named by rawURL:
//
//	file:///abs/dir                  local directory (created if missing)
//	mem://name                       in-memory, shared by name within the process
//	mem://                           in-memory, fresh on every call
//	s3://bucket/prefix?region=...    Amazon S3 or compatible (endpoint=,
//	                                 use_path_style=, disable_https=, ...)
//	gs://bucket/prefix               Google Cloud Storage (anonymous=true,
//	                                 universe_domain=; see gcs.go)
//	azblob://container/prefix        Azure Blob Storage
//
// For object stores the URL path is a key prefix: the returned bucket sees
// only keys below it, with the prefix stripped. Query parameters are those of
// the gocloud.dev driver for the scheme (for gs://, of this package's own
// driver); credentials come from the environment, as the Google, AWS and
// Azure SDKs document.
func Open(ctx context.Context, rawURL string) (Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket: %w", err)
	}
	switch u.Scheme {
	case "file":
		return openFileURL(u)
	case "mem":
		return openMem(u)
	case "s3", "gs", "azblob":
		prefix, err := urlPrefix(u)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		u.Path, u.RawPath = "", ""
		var b Bucket
		switch u.Scheme {
		case "s3":
			b, err = openS3(ctx, u, prefix)
		case "gs":
			b, err = openGCS(ctx, u, prefix)
		default:
			b, err = openGocloud(ctx, u, prefix)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("unsupported URL scheme %q in %q (want file, mem, s3, gs or azblob)", u.Scheme, rawURL)
	}
}

func openFileURL(u *url.URL) (Bucket, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("open %s: file URLs need an absolute path (file:///dir), got host %q", u, u.Host)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("open %s: file URLs take no query parameters", u)
	}
	if !strings.HasPrefix(u.Path, "/") {
		return nil, fmt.Errorf("open %s: file URLs need an absolute path (file:///dir)", u)
	}
	b, err := openFile(u.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u, err)
	}
	return b, nil
}

// urlPrefix returns the key prefix named by the URL path, with a trailing
// slash, or "" for none.
func urlPrefix(u *url.URL) (string, error) {
	p := strings.Trim(u.Path, "/")
	if p == "" {
		return "", nil
	}
	if err := validatePrefix(p); err != nil {
		return "", err
	}
	return p + "/", nil
}

// memRegistry holds the named in-memory buckets. It is process-wide on
// purpose: a mem:// URL is a name like a file:// path is, and code under test
// opens the same table URL more than once (a writer and a reader, or a reopen
// after a simulated restart) and must see the same objects. Named buckets live
// until the process exits; use a bare mem:// for a private one.
var memRegistry struct {
	sync.Mutex
	buckets map[string]*cloudBucket
}

func openMem(u *url.URL) (Bucket, error) {
	if u.RawQuery != "" {
		return nil, fmt.Errorf("open %s: mem URLs take no query parameters", u)
	}
	prefix, err := urlPrefix(u)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u, err)
	}
	var b Bucket
	if u.Host == "" {
		mb := memblob.OpenBucket(nil)
		b = &cloudBucket{b: mb, cond: mb}
	} else {
		memRegistry.Lock()
		if memRegistry.buckets == nil {
			memRegistry.buckets = make(map[string]*cloudBucket)
		}
		shared, ok := memRegistry.buckets[u.Host]
		if !ok {
			mb := memblob.OpenBucket(nil)
			shared = &cloudBucket{b: mb, cond: mb, shared: true}
			memRegistry.buckets[u.Host] = shared
		}
		memRegistry.Unlock()
		// Each Open gets its own handle so that closing one does not make
		// the others fail; the objects are shared.
		b = &cloudBucket{b: shared.b, cond: shared.cond, shared: true}
	}
	if prefix != "" {
		b = &subBucket{b: b, prefix: prefix, owns: true}
	}
	return b, nil
}

// openS3 opens an S3 bucket twice over one configuration: once for ordinary
// operations, and once through a client with SDK retries disabled for
// PutIfAbsent (see cloudBucket.cond).
func openS3(ctx context.Context, u *url.URL, prefix string) (Bucket, error) {
	q := u.Query()
	opener := &s3blob.URLOpener{}
	b, err := opener.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, err
	}
	var client *s3.Client
	if !b.As(&client) {
		b.Close()
		return nil, errors.New("s3blob bucket does not expose its *s3.Client")
	}
	noRetry := s3.New(client.Options(), func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 1
	})
	cond, err := s3blob.OpenBucket(ctx, noRetry, u.Host, &s3blob.Options{
		EncryptionType:             s3types.ServerSideEncryption(q.Get("ssetype")),
		KMSEncryptionID:            q.Get("kmskeyid"),
		RequestChecksumCalculation: client.Options().RequestChecksumCalculation,
	})
	if err != nil {
		b.Close()
		return nil, err
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
		cond = blob.PrefixedBucket(cond, prefix)
	}
	return &cloudBucket{b: b, cond: cond}, nil
}

func openGocloud(ctx context.Context, u *url.URL, prefix string) (Bucket, error) {
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, u)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	return &cloudBucket{b: b, cond: b}, nil
}

// Sub returns a view of b in which every key is relative to prefix (a slash
// is appended if missing). It is how one root holding many tables is split
// into per-table buckets. The view shares b's resources: closing it does
// nothing, close b instead. An invalid prefix yields a bucket whose every
// operation fails with the validation error.
func Sub(b Bucket, prefix string) Bucket {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return &subBucket{b: b}
	}
	if err := validatePrefix(prefix); err != nil {
		return &subBucket{b: b, err: fmt.Errorf("sub-bucket: %w", err)}
	}
	return &subBucket{b: b, prefix: prefix + "/"}
}

// subBucket prefixes keys. owns is set when the view is the only handle on b
// (a mem:// URL with a path), so that Close reaches b.
type subBucket struct {
	b      Bucket
	prefix string
	err    error
	owns   bool
}

var (
	_ Bucket      = (*subBucket)(nil)
	_ LocalPather = (*subBucket)(nil)
)

func (s *subBucket) key(key string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

func (s *subBucket) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return s.b.Get(ctx, k)
}

func (s *subBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return s.b.NewRangeReader(ctx, k, offset, length)
}

func (s *subBucket) Put(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return s.b.Put(ctx, k, data)
}

func (s *subBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", key, err)
	}
	return s.b.NewWriter(ctx, k)
}

func (s *subBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	return s.b.PutIfAbsent(ctx, k, data)
}

func (s *subBucket) Attributes(ctx context.Context, key string) (Attrs, error) {
	k, err := s.key(key)
	if err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, err)
	}
	a, err := s.b.Attributes(ctx, k)
	a.Key = key
	return a, err
}

func (s *subBucket) List(ctx context.Context, prefix string, fn func(Attrs) error) error {
	if s.err != nil {
		return fmt.Errorf("list %s: %w", prefix, s.err)
	}
	if err := validatePrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	return s.b.List(ctx, s.prefix+prefix, func(a Attrs) error {
		a.Key = strings.TrimPrefix(a.Key, s.prefix)
		return fn(a)
	})
}

func (s *subBucket) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return s.b.Delete(ctx, k)
}

// LocalPath implements LocalPather by forwarding to b when b has local files.
func (s *subBucket) LocalPath(key string) (string, bool) {
	lp, ok := s.b.(LocalPather)
	if !ok {
		return "", false
	}
	k, err := s.key(key)
	if err != nil {
		return "", false
	}
	return lp.LocalPath(k)
}

func (s *subBucket) Close() error {
	if s.owns {
		return s.b.Close()
	}
	return nil
}
