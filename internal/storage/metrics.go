package storage

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Op names a kind of bucket operation. The names are the metric label values
// and the operation kinds that fault rules match on.
type Op string

// Operation kinds. OpUpload is a streamed write (NewWriter ... Close);
// OpGetRange is NewRangeReader.
const (
	OpGet         Op = "get"
	OpGetRange    Op = "get_range"
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put_if_absent"
	OpAttributes  Op = "attributes"
	OpList        Op = "list"
	OpDelete      Op = "delete"
	OpUpload      Op = "upload"
)

// AllOps lists every operation kind.
var AllOps = []Op{OpGet, OpGetRange, OpPut, OpPutIfAbsent, OpAttributes, OpList, OpDelete, OpUpload}

// Result label values.
const (
	resultSuccess       = "success"
	resultNotFound      = "not_found"
	resultAlreadyExists = "already_exists"
	resultError         = "error"
	resultCanceled      = "canceled"
)

var allResults = []string{resultSuccess, resultNotFound, resultAlreadyExists, resultError, resultCanceled}

// Metrics holds the object-store metrics. One Metrics can serve many buckets
// (WithMetrics); the series are not labelled per bucket, to keep cardinality
// independent of the number of tables.
type Metrics struct {
	ops          *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	bytesRead    prometheus.Counter
	bytesWritten prometheus.Counter
}

// NewMetrics registers the metrics with reg. It never touches the default
// registry: the caller decides where metrics go, and tests use a fresh
// registry each.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		ops: f.NewCounterVec(prometheus.CounterOpts{
			Name: "compactord_objstore_operations_total",
			Help: "Object store operations by kind and result.",
		}, []string{"operation", "result"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "compactord_objstore_operation_duration_seconds",
			Help:    "Object store operation latency. get_range measures opening the reader; upload spans NewWriter to Close.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1ms .. ~65s
		}, []string{"operation"}),
		bytesRead: f.NewCounter(prometheus.CounterOpts{
			Name: "compactord_objstore_bytes_read_total",
			Help: "Bytes read from the object store.",
		}),
		bytesWritten: f.NewCounter(prometheus.CounterOpts{
			Name: "compactord_objstore_bytes_written_total",
			Help: "Bytes successfully written to the object store.",
		}),
	}
	// Pre-create every series so that rates and absent() alerts work from
	// the first scrape, not from the first occurrence of each result.
	for _, op := range AllOps {
		m.duration.WithLabelValues(string(op))
		for _, r := range allResults {
			m.ops.WithLabelValues(string(op), r)
		}
	}
	return m
}

func (m *Metrics) observe(op Op, start time.Time, err error) {
	m.ops.WithLabelValues(string(op), resultLabel(err)).Inc()
	m.duration.WithLabelValues(string(op)).Observe(time.Since(start).Seconds())
}

func resultLabel(err error) string {
	switch {
	case err == nil:
		return resultSuccess
	case IsNotFound(err):
		return resultNotFound
	case IsAlreadyExists(err):
		return resultAlreadyExists
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resultCanceled
	default:
		return resultError
	}
}

// WithMetrics returns b instrumented with m. Objects read through the
// LocalPather fast path (os.Open of the returned path) bypass the bucket and
// are not counted.
func WithMetrics(b Bucket, m *Metrics) Bucket {
	return &metricsBucket{b: b, m: m}
}

type metricsBucket struct {
	b Bucket
	m *Metrics
}

var (
	_ Bucket      = (*metricsBucket)(nil)
	_ LocalPather = (*metricsBucket)(nil)
)

func (mb *metricsBucket) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	data, err := mb.b.Get(ctx, key)
	mb.m.observe(OpGet, start, err)
	mb.m.bytesRead.Add(float64(len(data)))
	return data, err
}

func (mb *metricsBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	start := time.Now()
	r, err := mb.b.NewRangeReader(ctx, key, offset, length)
	mb.m.observe(OpGetRange, start, err)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: r, c: mb.m.bytesRead}, nil
}

type countingReader struct {
	io.ReadCloser
	c prometheus.Counter
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.c.Add(float64(n))
	return n, err
}

func (mb *metricsBucket) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := mb.b.Put(ctx, key, data)
	mb.m.observe(OpPut, start, err)
	if err == nil {
		mb.m.bytesWritten.Add(float64(len(data)))
	}
	return err
}

func (mb *metricsBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	start := time.Now()
	w, err := mb.b.NewWriter(ctx, key)
	if err != nil {
		mb.m.observe(OpUpload, start, err)
		return nil, err
	}
	return &countingWriter{WriteCloser: w, m: mb.m, start: start}, nil
}

type countingWriter struct {
	io.WriteCloser
	m     *Metrics
	start time.Time
	n     int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.WriteCloser.Write(p)
	w.n += int64(n)
	return n, err
}

// BuffersWrites forwards the wrapped writer's (see storage.BuffersWrites).
func (w *countingWriter) BuffersWrites() bool { return BuffersWrites(w.WriteCloser) }

// ReadFrom forwards to the wrapped writer's ReadFrom, so that a copy into
// a local file stays in the kernel (see fileWriter.ReadFrom).
func (w *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := w.WriteCloser.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{w.WriteCloser}, r)
	}
	w.n += n
	return n, err
}

func (w *countingWriter) Close() error {
	err := w.WriteCloser.Close()
	w.m.observe(OpUpload, w.start, err)
	if err == nil {
		w.m.bytesWritten.Add(float64(w.n))
	}
	return err
}

func (mb *metricsBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := mb.b.PutIfAbsent(ctx, key, data)
	mb.m.observe(OpPutIfAbsent, start, err)
	if err == nil {
		mb.m.bytesWritten.Add(float64(len(data)))
	}
	return err
}

func (mb *metricsBucket) Attributes(ctx context.Context, key string) (Attrs, error) {
	start := time.Now()
	a, err := mb.b.Attributes(ctx, key)
	mb.m.observe(OpAttributes, start, err)
	return a, err
}

// List counts an error returned by fn as a successful listing: the store did
// its part, the caller chose to stop.
func (mb *metricsBucket) List(ctx context.Context, prefix string, fn func(Attrs) error) error {
	start := time.Now()
	var fnErr error
	err := mb.b.List(ctx, prefix, func(a Attrs) error {
		fnErr = fn(a)
		return fnErr
	})
	if fnErr != nil && errors.Is(err, fnErr) {
		mb.m.observe(OpList, start, nil)
	} else {
		mb.m.observe(OpList, start, err)
	}
	return err
}

func (mb *metricsBucket) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := mb.b.Delete(ctx, key)
	mb.m.observe(OpDelete, start, err)
	return err
}

// LocalPath forwards to the wrapped bucket when it has local files.
func (mb *metricsBucket) LocalPath(key string) (string, bool) {
	if lp, ok := mb.b.(LocalPather); ok {
		return lp.LocalPath(key)
	}
	return "", false
}

func (mb *metricsBucket) Close() error { return mb.b.Close() }
