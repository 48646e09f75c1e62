package commit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Clock is the time source; tests inject one.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Config bounds the commit loop.
type Config struct {
	MaxAttempts int           `yaml:"max_attempts"`
	BaseBackoff time.Duration `yaml:"base_backoff"`
	MaxBackoff  time.Duration `yaml:"max_backoff"`
	// Deadline bounds one Commit call, all attempts included.
	Deadline time.Duration `yaml:"deadline"`
	// ReadBackTimeout bounds resolving an ambiguous put.
	ReadBackTimeout time.Duration `yaml:"read_back_timeout"`
}

// DefaultConfig is the configuration used when a field is zero.
func DefaultConfig() Config {
	return Config{MaxAttempts: 20, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 2 * time.Second,
		Deadline: 2 * time.Minute, ReadBackTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.MaxAttempts < 1:
		return fmt.Errorf("commit.max_attempts must be at least 1, got %d", c.MaxAttempts)
	case c.BaseBackoff < 0 || c.MaxBackoff < c.BaseBackoff:
		return fmt.Errorf("commit backoff: need 0 <= base_backoff <= max_backoff")
	case c.Deadline <= 0:
		return fmt.Errorf("commit.deadline must be positive")
	}
	return nil
}

// Metrics of the commit loop. One instance per process, shared by tables.
type Metrics struct {
	attempts  *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	rebases   *prometheus.CounterVec
	ambiguous *prometheus.CounterVec
	commits   *prometheus.CounterVec
}

// NewMetrics registers the commit metrics with every series pre-created.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		attempts:  f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_attempts_total", Help: "Put-if-absent attempts of the commit loop, by operation."}, []string{"operation"}),
		conflicts: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_conflicts_total", Help: "Committed transactions found since a read version, by our operation, theirs, and the decision."}, []string{"ours", "theirs", "decision"}),
		rebases:   f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_rebases_total", Help: "Transactions rewritten to apply on top of a newer head, by operation."}, []string{"operation"}),
		ambiguous: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_ambiguous_total", Help: "Puts with an unknown outcome, by how the read-back resolved them."}, []string{"resolution"}),
		commits:   f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commits_total", Help: "Commit calls by operation and result."}, []string{"operation", "result"}),
	}
	for _, o := range OpNames {
		m.attempts.WithLabelValues(o)
		m.rebases.WithLabelValues(o)
		for _, r := range []string{"success", "retryable", "incompatible", "ambiguous", "error"} {
			m.commits.WithLabelValues(o, r)
		}
		for _, t := range OpNames {
			for _, d := range []Decision{Compatible, Rebase, Retryable, Incompatible} {
				m.conflicts.WithLabelValues(o, t, d.String())
			}
		}
	}
	for _, r := range []string{"ours", "theirs", "absent", "unresolved"} {
		m.ambiguous.WithLabelValues(r)
	}
	return m
}

// Committer runs the commit loop for one table.
type Committer struct {
	cfg     Config
	bucket  storage.Bucket
	clock   Clock
	metrics *Metrics
	logger  *zap.Logger
	rng     *rand.Rand
	// last is the newest manifest this committer built or read: a job
	// that plans against the version it just committed (the common case)
	// starts its commit without reading that manifest again.
	last atomic.Pointer[pb.Manifest]
}

// LatestVersion returns the head version with one listing of _versions/
// (newest first: one entry on object stores). A forward probe from the last
// version seen ("v+1 is absent, so v is the head") was faster on file:// but
// unsound: cleanup may delete v+1 while keeping a tagged v, and a commit at
// v+1 would then land below the real head, invisible.
func (c *Committer) LatestVersion(ctx context.Context) (uint64, error) {
	return table.LatestVersion(ctx, c.bucket)
}

// manifest returns version v, from the cache when it holds it.
func (c *Committer) manifest(ctx context.Context, v uint64) (*pb.Manifest, error) {
	if m := c.last.Load(); m != nil && m.Version == v {
		return m, nil
	}
	m, err := table.ReadManifest(ctx, c.bucket, v)
	if err == nil {
		c.remember(m)
	}
	return m, err
}

func (c *Committer) remember(m *pb.Manifest) {
	for {
		cur := c.last.Load()
		if cur != nil && cur.Version >= m.Version {
			return
		}
		if c.last.CompareAndSwap(cur, m) {
			return
		}
	}
}

// NewCommitter checks its arguments and starts nothing. Zero config fields
// take DefaultConfig values; metrics and logger may be nil.
func NewCommitter(cfg Config, b storage.Bucket, clock Clock, metrics *Metrics, logger *zap.Logger) (*Committer, error) {
	d := DefaultConfig()
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff = d.BaseBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(d.MaxBackoff, cfg.BaseBackoff)
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = d.Deadline
	}
	if cfg.ReadBackTimeout == 0 {
		cfg.ReadBackTimeout = d.ReadBackTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("commit: nil bucket")
	}
	if clock == nil {
		clock = RealClock{}
	}
	if metrics == nil {
		metrics = NewMetrics(prometheus.NewRegistry())
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Committer{cfg: cfg, bucket: b, clock: clock, metrics: metrics,
		logger: logger.With(zap.String("component", "commit")), rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}, nil
}

// Result of a successful commit.
type Result struct {
	Manifest *pb.Manifest
	Attempts int
	Rebased  bool
	// Transaction is the transaction as committed (after any rebase).
	Transaction *pb.Transaction
	// Garbage lists files this commit wrote that the committed version does
	// not reference (superseded rebase output); safe to delete.
	Garbage []string
}

// Commit publishes txn. The read state is captured once, before the loop,
// and never replaced by the head: committing a plan against the head hides
// the deletes made in between and brings those rows back (Lance #6653).
//
// On a retryable or incompatible conflict the transaction file and the
// files the loop itself wrote are removed; the caller removes its own data
// files. On an AmbiguousError nothing may be removed.
func (c *Committer) Commit(ctx context.Context, txn *pb.Transaction) (res *Result, err error) {
	op := OpName(txn)
	defer func() {
		result := "success"
		var ce *ConflictError
		var ae *AmbiguousError
		switch {
		case err == nil:
		case errors.As(err, &ae):
			result = "ambiguous"
		case errors.As(err, &ce) && errors.Is(err, ErrIncompatible):
			result = "incompatible"
		case errors.Is(err, ErrRetryable):
			result = "retryable"
		default:
			result = "error"
		}
		c.metrics.commits.WithLabelValues(op, result).Inc()
	}()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Deadline)
	defer cancel()

	var read *pb.Manifest
	if txn.ReadVersion > 0 {
		if read, err = c.manifest(ctx, txn.ReadVersion); err != nil {
			return nil, fmt.Errorf("read version %d: %w", txn.ReadVersion, err)
		}
	}
	txnKey := table.TransactionKey(txn.ReadVersion, txn.Uuid)
	checked := txn.ReadVersion // every version <= checked is classified
	var head *pb.Manifest
	var since []committed // versions after our read, in order
	var written []string  // files the loop wrote (rebased deletion files)
	// unresolved holds the versions an attempt of ours put without
	// learning whether the put landed. A version read back as someone
	// else's leaves the set: put-if-absent cannot land there any more.
	unresolved := map[uint64]bool{}
	rebased := false
	cur := txn
	cleanup := func() {
		if len(unresolved) > 0 {
			return // Lance #8123: an ambiguous put may be live; never delete its files
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		for _, k := range append(written, txnKey) {
			if derr := c.bucket.Delete(dctx, k); derr != nil && !storage.IsNotFound(derr) {
				c.logger.Warn("could not remove file of a failed commit", zap.String("key", k), zap.Error(derr))
			}
		}
	}

	// fail ends the Commit with err. While a put of ours is unresolved,
	// every failure is ambiguous: a plain error would let the caller
	// delete the files of a version that may be committed (found by the
	// fault campaign: a failed head probe after an unresolved put).
	fail := func(err error) (*Result, error) {
		if len(unresolved) > 0 {
			var v uint64
			for u := range unresolved {
				v = max(v, u)
			}
			return nil, &AmbiguousError{Version: v, Err: err}
		}
		cleanup()
		return nil, err
	}

	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.backoff(ctx, attempt); err != nil {
				return fail(fmt.Errorf("commit %s: %w", op, err))
			}
		}
		headV, err := c.LatestVersion(ctx)
		if errors.Is(err, table.ErrNoTable) {
			headV, err = 0, nil
		}
		if err != nil {
			return fail(err)
		}
		needRebase := false
		for v := checked + 1; v <= headV; v++ {
			m, err := c.manifest(ctx, v)
			if err != nil {
				return fail(err)
			}
			if m.TransactionUuid == txn.Uuid {
				// An earlier attempt's put landed after all.
				c.metrics.ambiguous.WithLabelValues("ours").Inc()
				return &Result{Manifest: m, Attempts: attempt, Rebased: rebased, Transaction: cur}, nil
			}
			delete(unresolved, v)
			theirs := m.Transaction
			if theirs == nil { // written before transactions were inlined
				theirs, err = table.ReadTransaction(ctx, c.bucket, m.TransactionPath)
			}
			if err != nil {
				return fail(fmt.Errorf("classify against version %d: %w", v, err))
			}
			verdict := Classify(cur, theirs)
			c.metrics.conflicts.WithLabelValues(op, OpName(theirs), verdict.Decision.String()).Inc()
			switch verdict.Decision {
			case Rebase:
				needRebase = true
			case Retryable, Incompatible:
				class := ErrRetryable
				if verdict.Decision == Incompatible {
					class = ErrIncompatible
				}
				return fail(&ConflictError{Class: class, Ours: op, Theirs: OpName(theirs), Version: v, Reason: verdict.Reason})
			}
			since = append(since, committed{manifest: m, txn: theirs})
			head = m
		}
		checked = max(checked, headV)
		if head == nil || head.Version != headV {
			if headV > 0 {
				if head, err = c.manifest(ctx, headV); err != nil {
					return fail(err)
				}
			}
		}
		if needRebase {
			r := &rebaser{b: c.bucket, read: read, head: head, since: since}
			nt, err := c.rebase(ctx, r, txn)
			written = append(written, r.written...)
			if err != nil {
				return fail(err)
			}
			cur, rebased = nt, true
			c.metrics.rebases.WithLabelValues(op).Inc()
		}
		data, err := table.EncodeProto(cur)
		if err != nil {
			return nil, err
		}
		next, err := BuildManifest(head, cur, read)
		if err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) {
				ce.Version = headV
				return fail(ce)
			}
			return fail(fmt.Errorf("build version %d: %w", headV+1, err))
		}
		mdata, err := table.EncodeProto(next)
		if err != nil {
			return nil, err
		}
		c.metrics.attempts.WithLabelValues(op).Inc()
		// The transaction file and the manifest are written in parallel:
		// the manifest carries the transaction inline, so nobody needs the
		// file to classify against this version, and the commit costs one
		// round trip. The file stays for audits and older readers.
		txnDone := make(chan error, 1)
		go func() { txnDone <- c.bucket.Put(ctx, txnKey, data) }()
		perr := c.bucket.PutIfAbsent(ctx, table.ManifestKey(next.Version), mdata)
		if terr := <-txnDone; terr != nil {
			c.logger.Warn("could not write the transaction file; the manifest carries the transaction", zap.String("key", txnKey), zap.Error(terr))
		}
		if perr == nil {
			c.remember(next)
			return &Result{Manifest: next, Attempts: attempt, Rebased: rebased, Transaction: cur, Garbage: garbage(append(written, deletionFiles(txn)...), cur, len(unresolved) > 0)}, nil
		}
		if ctx.Err() != nil && !storage.IsAlreadyExists(perr) {
			unresolved[next.Version] = true
			return nil, &AmbiguousError{Version: next.Version, Err: perr}
		}
		// Lost race or unknown outcome: read the version back. A lost race
		// can also hide our own landed write (a retried put that got 412).
		got, rerr := c.readBack(ctx, next.Version)
		switch {
		case rerr == nil && got.TransactionUuid == txn.Uuid:
			if !storage.IsAlreadyExists(perr) {
				c.metrics.ambiguous.WithLabelValues("ours").Inc()
			}
			return &Result{Manifest: got, Attempts: attempt, Rebased: rebased, Transaction: cur}, nil
		case storage.IsAlreadyExists(perr):
			c.logger.Debug("lost the race for a version", zap.Uint64("version", next.Version))
		case rerr == nil:
			c.metrics.ambiguous.WithLabelValues("theirs").Inc()
		case errors.Is(rerr, table.ErrVersionNotFound):
			if isPermanent(perr) {
				return fail(fmt.Errorf("write version %d: %w", next.Version, perr))
			}
			c.metrics.ambiguous.WithLabelValues("absent").Inc()
		default:
			// We cannot tell; the next attempt's scan recognises our uuid
			// if the put landed.
			unresolved[next.Version] = true
			c.metrics.ambiguous.WithLabelValues("unresolved").Inc()
		}
		if !storage.IsAlreadyExists(perr) {
			c.logger.Warn("put of a version had an unknown outcome", zap.Uint64("version", next.Version), zap.Error(perr))
		}
	}
	return fail(&ConflictError{Class: ErrRetryable, Ours: op, Reason: fmt.Sprintf("gave up after %d attempts", c.cfg.MaxAttempts)})
}

// readBack reads a version on a detached context: it must finish even if
// the caller's deadline has passed, because its answer decides whether files
// may be deleted.
func (c *Committer) readBack(ctx context.Context, v uint64) (*pb.Manifest, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ReadBackTimeout)
	defer cancel()
	var last error
	for i := 0; i < 3; i++ {
		m, err := table.ReadManifest(rctx, c.bucket, v)
		if err == nil || errors.Is(err, table.ErrVersionNotFound) {
			return m, err
		}
		last = err
		if c.clock.Sleep(rctx, c.cfg.BaseBackoff<<i) != nil {
			break
		}
	}
	return nil, last
}

func (c *Committer) rebase(ctx context.Context, r *rebaser, orig *pb.Transaction) (*pb.Transaction, error) {
	switch orig.GetOperation().(type) {
	case *pb.Transaction_Delete, *pb.Transaction_MergeSstables:
		return r.rebaseDeletions(ctx, orig)
	case *pb.Transaction_Rewrite:
		return r.rebaseRewrite(ctx, orig)
	}
	return nil, fmt.Errorf("rebase: %s cannot be rebased", OpName(orig))
}

// backoff sleeps a jittered slot: uniform in [0, min(max, base·2^attempt)).
func (c *Committer) backoff(ctx context.Context, attempt int) error {
	d := c.cfg.BaseBackoff << min(attempt, 20)
	if d <= 0 || d > c.cfg.MaxBackoff {
		d = c.cfg.MaxBackoff
	}
	if d <= 0 {
		return ctx.Err()
	}
	return c.clock.Sleep(ctx, time.Duration(c.rng.Int64N(int64(d))))
}

// garbage lists files the loop wrote that the committed transaction does not
// reference: deletion files of superseded rebases. After an ambiguous
// attempt none is garbage: that attempt may have landed.
func garbage(written []string, txn *pb.Transaction, ambiguous bool) []string {
	if ambiguous || len(written) == 0 {
		return nil
	}
	used := map[string]bool{}
	mark := func(frags []*pb.Fragment) {
		for _, f := range frags {
			used[f.GetDeletionFile().GetPath()] = true
		}
	}
	mark(txn.GetDelete().GetUpdatedFragments())
	mark(txn.GetMergeSstables().GetUpdatedFragments())
	for _, g := range txn.GetRewrite().GetGroups() {
		mark(g.NewFragments)
	}
	var out []string
	for _, w := range written {
		if w == "" {
			continue
		}
		if !used[w] {
			out = append(out, w)
		}
	}
	return out
}

// deletionFiles lists the deletion files a transaction references; after a
// rebase the original ones are superseded.
func deletionFiles(txn *pb.Transaction) []string {
	var out []string
	add := func(fs []*pb.Fragment) {
		for _, f := range fs {
			if p := f.GetDeletionFile().GetPath(); p != "" {
				out = append(out, p)
			}
		}
	}
	add(txn.GetDelete().GetUpdatedFragments())
	add(txn.GetMergeSstables().GetUpdatedFragments())
	for _, g := range txn.GetRewrite().GetGroups() {
		add(g.NewFragments)
	}
	return out
}
