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

// HintTTL is how long a head hint lets a commit skip finding the head (the
// fast path). The hint is a fact "no version above h existed at t0", t0
// measured on the local monotonic clock.
const HintTTL = 5 * time.Second

// MaxDeadline bounds Config.Deadline. Every put of a version relies on a fact
// established at most HintTTL before the Commit call or during it, and lands
// (or is abandoned) before the Commit's deadline; the cleanup floor must
// exceed that age with room for clock skew.
const MaxDeadline = 4 * time.Minute

// The constant conversion fails to compile if HintTTL + MaxDeadline leaves
// less than half of table.VersionFloor for clock skew.
const _ = uint64(table.VersionFloor - 2*(HintTTL+MaxDeadline))

// Config bounds the commit loop.
type Config struct {
	MaxAttempts int           `yaml:"max_attempts"`
	BaseBackoff time.Duration `yaml:"base_backoff"`
	MaxBackoff  time.Duration `yaml:"max_backoff"`
	// Deadline bounds one Commit call, all attempts included.
	Deadline time.Duration `yaml:"deadline"`
	// ReadBackTimeout bounds resolving an ambiguous put.
	ReadBackTimeout time.Duration `yaml:"read_back_timeout"`
	// TransactionFiles also writes each transaction to
	// _transactions/{read_version}-{uuid}.txn, in parallel with its
	// manifest, and names it in the manifest's transaction_path. Off by
	// default: the manifest carries its transaction, which is all this
	// version reads; the file is for tools and compactord builds from before
	// the transaction was inline (pre-dd2fbb5), which classify conflicts by
	// reading it. The extra put costs each commit a second write request.
	TransactionFiles bool `yaml:"transaction_files"`
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
	case c.Deadline > MaxDeadline:
		// A put must not land long after the fact it relies on; the
		// cleanup floor (table.VersionFloor) covers at most this.
		return fmt.Errorf("commit.deadline must be at most %s (the cleanup floor of %s must exceed the age of a commit), got %s", MaxDeadline, table.VersionFloor, c.Deadline)
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
	fastPath  *prometheus.CounterVec
}

// Fast-path outcomes (compactord_commit_fast_path_total).
const (
	fastCommitted  = "committed"  // landed, and no newer head was seen
	fastFollowed   = "followed"   // landed; the newer head seen was built on it
	fastLost       = "lost"       // the put did not land (lost race or no answer); normal path
	fastGap        = "gap"        // landed below the head: removed; normal path
	fastUnverified = "unverified" // landed; a newer head was seen and could not be checked
	fastAmbiguous  = "ambiguous"  // landed, but the version listed above it is gone: reported ambiguous
)

var fastOutcomes = []string{fastCommitted, fastFollowed, fastLost, fastGap, fastUnverified, fastAmbiguous}

// NewMetrics registers the commit metrics with every series pre-created.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		attempts:  f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_attempts_total", Help: "Put-if-absent attempts of the commit loop, by operation."}, []string{"operation"}),
		conflicts: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_conflicts_total", Help: "Committed transactions found since a read version, by our operation, theirs, and the decision."}, []string{"ours", "theirs", "decision"}),
		rebases:   f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_rebases_total", Help: "Transactions rewritten to apply on top of a newer head, by operation."}, []string{"operation"}),
		ambiguous: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_ambiguous_total", Help: "Puts with an unknown outcome, by how the read-back resolved them."}, []string{"resolution"}),
		commits:   f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commits_total", Help: "Commit calls by operation and result."}, []string{"operation", "result"}),
		fastPath:  f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_commit_fast_path_total", Help: "First attempts that put the next version without finding the head first (fresh head hint), by outcome. gap means a version landed below the head and was removed: a version was deleted younger than the cleanup floor (clock skew, or an old cleanup without the floor)."}, []string{"outcome"}),
	}
	for _, o := range fastOutcomes {
		m.fastPath.WithLabelValues(o)
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
	// last is the newest manifest this committer built or read: a job
	// that plans against the version it just committed (the common case)
	// starts its commit without reading that manifest again.
	last atomic.Pointer[pb.Manifest]
	// hint is the newest head fact this committer holds (see headHint).
	hint atomic.Pointer[headHint]
}

// headHint records the fact "no version above version existed at at". Only
// two observations establish it: a listing of _versions/ that returned
// version as the newest (at = when the listing started), and a successful
// put of version by this committer (at = when the put started: the put
// relied on "nothing above version-1 existed" and succeeded, so, under the
// cleanup floor, nothing above version existed when it started). A manifest
// merely read proves nothing about what follows it.
type headHint struct {
	version uint64
	at      time.Time
}

// learn records a head fact; the hint keeps the newest.
func (c *Committer) learn(v uint64, at time.Time) {
	if v == 0 {
		return
	}
	h := &headHint{version: v, at: at}
	for {
		cur := c.hint.Load()
		if cur != nil && (cur.version > v || cur.version == v && !at.After(cur.at)) {
			return
		}
		if c.hint.CompareAndSwap(cur, h) {
			return
		}
	}
}

// fresh reports whether the hint says, less than HintTTL ago, that nothing
// above v existed.
func (c *Committer) fresh(v uint64) bool {
	h := c.hint.Load()
	return v > 0 && h != nil && h.version == v && c.clock.Now().Sub(h.at) < HintTTL
}

// LatestVersion returns the head version with one listing of _versions/
// (newest first: one entry on object stores), and records it as a head
// hint. A forward probe from the last version seen ("v+1 is absent, so v is
// the head") is unsound: cleanup may delete v+1 while keeping a tagged v,
// and a commit at v+1 would then land below the real head, invisible. The
// fast path of Commit (see there) skips the listing only on a fresh fact,
// under the cleanup floor.
func (c *Committer) LatestVersion(ctx context.Context) (uint64, error) {
	start := c.clock.Now()
	v, err := table.LatestVersion(ctx, c.bucket)
	if err == nil {
		c.learn(v, start)
	}
	return v, err
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
		logger: logger.With(zap.String("component", "commit"))}, nil
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
		remove := written[:len(written):len(written)]
		if c.cfg.TransactionFiles {
			remove = append(remove, txnKey)
		}
		for _, k := range remove {
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

	// The fast path's head listing runs alongside its put; it is stopped
	// and joined on every way out.
	var probe *headProbe
	defer func() {
		if probe != nil {
			probe.stop()
		}
	}()

	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.backoff(ctx, attempt); err != nil {
				return fail(fmt.Errorf("commit %s: %w", op, err))
			}
		}
		var headV uint64
		if attempt == 1 && c.fresh(txn.ReadVersion) {
			// Fast path: less than HintTTL ago nothing above the read
			// version existed, so it is very likely still the head: build
			// on it and put the next version without finding the head
			// first. The listing still runs, alongside the put, to catch a
			// put that landed below the head (see checkLanded). A lost race
			// goes round the normal path.
			headV = txn.ReadVersion
			probe = c.probeHead(ctx)
		} else {
			var err error
			headV, err = c.LatestVersion(ctx)
			if errors.Is(err, table.ErrNoTable) {
				headV, err = 0, nil
			}
			if err != nil {
				return fail(err)
			}
		}
		needRebase := false
		prev := head // the version below v, when known
		if prev == nil {
			prev = read
		}
		for v := checked + 1; v <= headV; v++ {
			m, err := c.manifest(ctx, v)
			if err != nil {
				return fail(err)
			}
			// Every version names the one it was built on. A break in the
			// chain is a gap: a version was deleted younger than the floor
			// and another put landed in its place, below the head.
			// Classifying against that stray version would apply changes
			// that were never committed.
			if prev != nil && prev.Version == v-1 && m.ParentTransactionUuid != "" && prev.TransactionUuid != "" && m.ParentTransactionUuid != prev.TransactionUuid {
				c.logger.Error("versions do not chain: a version younger than the cleanup floor was deleted and another landed in its place", zap.Uint64("version", v))
				return fail(fmt.Errorf("commit %s: version %d was not built on version %d (a gap left by a deleted version); plan again from the head", op, v, v-1))
			}
			prev = m
			if m.TransactionUuid == txn.Uuid {
				// An earlier attempt's put landed after all. If the head
				// is above it, it must have been built on it (a gap would
				// mean a version was deleted younger than the floor).
				if v < headV {
					switch c.onLine(ctx, v, txn.Uuid) {
					case lineGap:
						delete(unresolved, v)
						if err := c.removeGap(ctx, v, headV); err != nil {
							unresolved[v] = true
							return fail(err)
						}
						return fail(fmt.Errorf("commit %s: version %d landed below the head %d (a version younger than the cleanup floor was deleted) and was removed", op, v, headV))
					case lineMissing:
						unresolved[v] = true
						return fail(fmt.Errorf("commit %s: version %d is ours but version %d, listed above it, is gone", op, v, v+1))
					}
				}
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
		next, err := BuildManifest(head, cur, read)
		if err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) {
				ce.Version = headV
				return fail(ce)
			}
			return fail(fmt.Errorf("build version %d: %w", headV+1, err))
		}
		if !c.cfg.TransactionFiles {
			next.TransactionPath = "" // the transaction is inline only
		}
		stampCommitTime(next, head, c.clock.Now())
		mdata, err := table.EncodeProto(next)
		if err != nil {
			return nil, err
		}
		c.metrics.attempts.WithLabelValues(op).Inc()
		// With TransactionFiles, the transaction file and the manifest are
		// written in parallel: the manifest carries the transaction inline,
		// so nobody needs the file to classify against this version.
		putStart := c.clock.Now()
		var txnDone chan error
		if c.cfg.TransactionFiles {
			data, err := table.EncodeProto(cur)
			if err != nil {
				return nil, err
			}
			txnDone = make(chan error, 1)
			go func() { txnDone <- c.bucket.Put(ctx, txnKey, data) }()
		}
		perr := c.bucket.PutIfAbsent(ctx, table.ManifestKey(next.Version), mdata)
		if txnDone != nil {
			if terr := <-txnDone; terr != nil {
				c.logger.Warn("could not write the transaction file; the manifest carries the transaction", zap.String("key", txnKey), zap.Error(terr))
			}
		}
		// landed is our version when the put is known to have landed.
		var landed *pb.Manifest
		if perr == nil {
			landed = next
		} else {
			if ctx.Err() != nil && !storage.IsAlreadyExists(perr) {
				unresolved[next.Version] = true
				return nil, &AmbiguousError{Version: next.Version, Err: perr}
			}
			// Lost race or unknown outcome: read the version back. A lost
			// race can also hide our own landed write (a retried put that
			// got 412).
			got, rerr := c.readBack(ctx, next.Version)
			switch {
			case rerr == nil && got.TransactionUuid == txn.Uuid:
				if !storage.IsAlreadyExists(perr) {
					c.metrics.ambiguous.WithLabelValues("ours").Inc()
				}
				landed = got
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
				// We cannot tell; the next attempt's scan recognises our
				// uuid if the put landed.
				unresolved[next.Version] = true
				c.metrics.ambiguous.WithLabelValues("unresolved").Inc()
			}
			if landed == nil && !storage.IsAlreadyExists(perr) {
				c.logger.Warn("put of a version had an unknown outcome", zap.Uint64("version", next.Version), zap.Error(perr))
			}
		}
		if probe != nil {
			p := probe
			probe = nil
			if landed == nil {
				p.stop()
				c.metrics.fastPath.WithLabelValues(fastLost).Inc()
				continue
			}
			outcome, err := c.checkLanded(ctx, p, landed.Version, txn.Uuid)
			c.metrics.fastPath.WithLabelValues(outcome).Inc()
			if outcome == fastGap {
				if err != nil {
					unresolved[landed.Version] = true
					return fail(err)
				}
				// Removed: nothing was built on it (checkLanded). Go round
				// the normal path, as after a lost race.
				continue
			}
			if err != nil {
				unresolved[landed.Version] = true
				return fail(err)
			}
		}
		if landed == nil {
			continue
		}
		c.learn(landed.Version, putStart)
		if perr == nil {
			c.remember(next)
			return &Result{Manifest: next, Attempts: attempt, Rebased: rebased, Transaction: cur, Garbage: garbage(append(written, deletionFiles(txn)...), cur, len(unresolved) > 0)}, nil
		}
		return &Result{Manifest: landed, Attempts: attempt, Rebased: rebased, Transaction: cur}, nil
	}
	return fail(&ConflictError{Class: ErrRetryable, Ours: op, Reason: fmt.Sprintf("gave up after %d attempts", c.cfg.MaxAttempts)})
}

// headProbe is the head listing of the fast path, run alongside its put.
type headProbe struct {
	cancel  context.CancelFunc
	done    chan struct{}
	version uint64
	err     error
}

func (c *Committer) probeHead(ctx context.Context) *headProbe {
	pctx, cancel := context.WithCancel(ctx)
	p := &headProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.version, p.err = c.LatestVersion(pctx)
		if errors.Is(p.err, table.ErrNoTable) {
			p.version, p.err = 0, nil
		}
	}()
	return p
}

// result waits for the listing.
func (p *headProbe) result() (uint64, error) {
	<-p.done
	p.cancel()
	return p.version, p.err
}

// stop abandons the listing and waits for it to end.
func (p *headProbe) stop() {
	p.cancel()
	<-p.done
}

// checkLanded is the defence of the fast path, run once its put of version
// v has landed. The put relied on the hint "nothing above v-1 existed at
// t0", at most HintTTL before the put. It landed below the head only if a
// version v existed after t0 and was deleted before the put, younger than
// the cleanup floor: impossible unless a host running cleanup has a clock
// far ahead of the store's, or runs a cleanup without the floor. The check
// catches such a gap when it predates the listing.
//
// A listing that shows a head above v is not proof of a gap by itself: it
// ran in parallel with the put and may have seen versions committed on top
// of ours after it landed (the common case under contention). Version v+1
// tells them apart: built on ours, its parent_transaction_uuid is our uuid;
// built on another parent, it was in place before ours could land (that
// parent held v, and ours landed only once it was gone), so nothing is or
// ever will be built on ours, and removing ours loses nothing: that is the
// gap outcome, after which the caller goes round the normal path.
func (c *Committer) checkLanded(ctx context.Context, p *headProbe, v uint64, uuid string) (string, error) {
	listed, err := p.result()
	if err != nil {
		listed, err = c.LatestVersion(ctx)
	}
	if err != nil {
		c.logger.Warn("fast path: could not list the head after a commit; relying on the cleanup floor", zap.Uint64("version", v), zap.Error(err))
		return fastUnverified, nil
	}
	if listed <= v {
		return fastCommitted, nil
	}
	switch c.onLine(ctx, v, uuid) {
	case lineOn:
		return fastFollowed, nil
	case lineGap:
		return fastGap, c.removeGap(ctx, v, listed)
	case lineMissing:
		return fastAmbiguous, fmt.Errorf("version %d is ours but version %d, listed above it, is gone (a version younger than the cleanup floor was deleted?)", v, v+1)
	}
	return fastUnverified, nil
}

type lineVerdict int

const (
	lineOn         lineVerdict = iota // v+1 was built on our v
	lineGap                           // v+1 was built on another v: ours is below the head
	lineMissing                       // v+1 is gone
	lineUnverified                    // v+1 predates parent uuids, or could not be read
)

// onLine tells, for our version v with a head above it, whether v+1 was
// built on it.
func (c *Committer) onLine(ctx context.Context, v uint64, uuid string) lineVerdict {
	next, err := c.readBack(ctx, v+1)
	switch {
	case err == nil && next.ParentTransactionUuid == uuid:
		return lineOn
	case err == nil && next.ParentTransactionUuid == "":
		c.logger.Warn("cannot tell whether the version above ours was built on it (written before parent uuids); relying on the cleanup floor", zap.Uint64("version", v))
		return lineUnverified
	case err == nil:
		return lineGap
	case errors.Is(err, table.ErrVersionNotFound):
		c.logger.Error("the version above ours is gone: a version younger than the cleanup floor was deleted", zap.Uint64("version", v+1))
		return lineMissing
	}
	c.logger.Warn("cannot read the version above ours; relying on the cleanup floor", zap.Uint64("version", v+1), zap.Error(err))
	return lineUnverified
}

// removeGap deletes our version v, found below the head built on another
// parent (see checkLanded for why nothing depends on it).
func (c *Committer) removeGap(ctx context.Context, v, head uint64) error {
	c.logger.Error("a commit landed below the head: a version younger than the cleanup floor was deleted (a cleanup host's clock ahead of the store's, or a cleanup without the floor); removing it",
		zap.Uint64("version", v), zap.Uint64("head", head))
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ReadBackTimeout)
	defer cancel()
	if err := c.bucket.Delete(dctx, table.ManifestKey(v)); err != nil && !storage.IsNotFound(err) {
		return fmt.Errorf("version %d landed below the head %d and could not be removed: %w", v, head, err)
	}
	return nil
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
	// The package-level source: a Committer is shared by goroutines, and a
	// *rand.Rand is not safe for concurrent use (a data race before).
	return c.clock.Sleep(ctx, time.Duration(rand.Int64N(int64(d))))
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

// stampCommitTime sets a version's timestamp to when it is committed, not
// when its transaction started (a long job commits late), and never below
// its parent's: timestamps then grow with versions even across committers
// whose clocks disagree. Cleanup's age cutoff and trim's reader grace both
// read it as "committed at"; a start time made a late commit look old.
func stampCommitTime(next, head *pb.Manifest, now time.Time) {
	ts := now.UnixMicro()
	if head != nil {
		ts = max(ts, head.TimestampMicros)
	}
	next.TimestampMicros = ts
}
