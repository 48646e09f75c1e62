package commit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Metrics of the commit loop. One instance per process, shared by tables.
type Metrics struct {
	attempts  *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	rebases   *prometheus.CounterVec
	ambiguous *prometheus.CounterVec
	commits   *prometheus.CounterVec
}

var results = []string{"success", "retryable", "incompatible", "ambiguous", "error", "unchanged"}

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
	// The operations compactord commits; conflicts against any theirs.
	for _, o := range []string{"append", "delete", "create_index", "rewrite", "update", "reserve_fragments"} {
		m.attempts.WithLabelValues(o)
		m.rebases.WithLabelValues(o)
		for _, r := range results {
			m.commits.WithLabelValues(o, r)
		}
	}
	for _, r := range []string{"ours", "theirs", "absent", "unresolved"} {
		m.ambiguous.WithLabelValues(r)
	}
	return m
}

// Committer runs Lance's commit protocol for one table.
type Committer struct {
	cfg     Config
	bucket  storage.Bucket
	clock   clock.Clock
	metrics *Metrics
	logger  *zap.Logger

	mu  sync.Mutex
	rng *rand.Rand
}

// NewCommitter checks its arguments; it starts nothing.
func NewCommitter(cfg Config, b storage.Bucket, clk clock.Clock, metrics *Metrics, logger *zap.Logger) (*Committer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil || clk == nil || metrics == nil || logger == nil {
		return nil, errors.New("commit: bucket, clock, metrics and logger are required")
	}
	return &Committer{cfg: cfg, bucket: b, clock: clk, metrics: metrics, logger: logger,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6c616e6365))}, nil
}

// Txn is one transaction to commit.
type Txn struct {
	// Read is the manifest file at Transaction.read_version, as the job
	// read it when it planned. It is the read state of the catch-up
	// derivation and is never replaced by the head.
	Read   *meta.ManifestFile
	Naming meta.Naming
	// Transaction carries read_version, uuid and the operation.
	Transaction *pb.Transaction
	// Files are the objects the job wrote for this transaction (data,
	// deletion and index files). They are removed when the transaction
	// certainly did not commit, and kept when the outcome is unknown.
	Files []string
	// Extra is content of the version the transaction does not carry (a
	// deferred Rewrite's fragment-reuse entry). When it holds a
	// fragment-reuse entry built on the read version's, a version since
	// the read that changed that index sends the commit back to re-plan.
	Extra Extra
	// Rebase, when set, rewrites a Rewrite over version f, whose
	// transaction theirs changed rows of the rewritten fragments in place
	// (Classify said Rebase): it returns the transaction to commit
	// instead, under a new uuid, and the files it wrote for it.
	Rebase func(ctx context.Context, cur, theirs *pb.Transaction, f *meta.ManifestFile) (*pb.Transaction, []string, error)
	// Prepare, when set, runs once per attempt after the classification
	// and before the transaction file is written: a Rebase that only
	// recorded what changed writes its files here, once for all the
	// versions it rebased over. It returns the transaction to commit.
	Prepare func(ctx context.Context, cur *pb.Transaction) (*pb.Transaction, []string, error)
	// AppendClash, when set, reads the keys of fragments an append (or a
	// merge-insert without an inserted-key filter) landed
	// after the read version and returns a reason when any of them is a key
	// the transaction writes ("" when none is): a MemWAL merge then commits
	// over an append of other keys instead of planning again (a steady
	// stream of appends would otherwise starve it).
	AppendClash func(ctx context.Context, frags []*pb.DataFragment) (string, error)
	// RecordOnly marks a transaction whose version changes nothing but
	// the MemWAL catch-up positions BuildManifest derives (NewRecordOnly).
	// When the version built on the head would raise no position above
	// the head's (another commit recorded them meanwhile, or withdrew the
	// coverage), nothing is put and Commit returns ErrNothingToRecord.
	RecordOnly bool
}

// Result describes a landed commit.
type Result struct {
	Version  uint64
	Attempts int
	Rebases  int
	// Manifest is the version as committed.
	Manifest *meta.ManifestFile
	// Transaction is what committed (a rebase may have changed it).
	Transaction *pb.Transaction
}

// NewTransaction returns a transaction skeleton with a fresh uuid.
func NewTransaction(readVersion uint64) *pb.Transaction {
	_, id := meta.NewUUID()
	return &pb.Transaction{ReadVersion: readVersion, Uuid: id}
}

// Commit publishes txn as the next version.
//
// Each attempt: find the head; classify every version committed since the
// last one checked against ours (rebase or give up); write the transaction
// file; build the manifest on the head; put it with put-if-absent. A lost
// race goes round again. A put with an unknown outcome is resolved by
// reading the version back; one never resolved is an AmbiguousError, and
// then nothing the transaction wrote is deleted.
func (c *Committer) Commit(ctx context.Context, txn *Txn) (*Result, error) {
	if txn.Read == nil || txn.Transaction == nil {
		return nil, errors.New("commit: a transaction needs its read state")
	}
	if txn.Read.Manifest.GetVersion() != txn.Transaction.GetReadVersion() {
		return nil, fmt.Errorf("commit: read state is version %d, transaction read version %d",
			txn.Read.Manifest.GetVersion(), txn.Transaction.GetReadVersion())
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Deadline)
	defer cancel()
	a := &attempt{c: c, txn: txn, cur: proto.Clone(txn.Transaction).(*pb.Transaction),
		checked: txn.Transaction.GetReadVersion(), head: txn.Read,
		uuids: map[string]bool{txn.Transaction.GetUuid(): true}}
	op := OpName(txn.Transaction)
	res, err := a.run(ctx)
	result := "success"
	var ce *ConflictError
	var ae *AmbiguousError
	switch {
	case err == nil:
	case errors.Is(err, ErrNothingToRecord):
		result = "unchanged"
	case errors.As(err, &ae):
		result = "ambiguous"
	case errors.As(err, &ce) && errors.Is(err, ErrIncompatible):
		result = "incompatible"
	case errors.As(err, &ce):
		result = "retryable"
	default:
		result = "error"
	}
	c.metrics.commits.WithLabelValues(op, result).Inc()
	if err != nil && ae == nil && !a.mayHaveLanded {
		a.removeFiles()
	}
	return res, err
}

// attempt holds the state of one Commit call across its tries.
type attempt struct {
	c   *Committer
	txn *Txn
	// cur is the transaction as rebased so far.
	cur *pb.Transaction
	// checked is the newest version classified against cur; head is its
	// manifest file.
	checked uint64
	head    *meta.ManifestFile
	// txnFiles are the transaction files written, newest last.
	txnFiles      []string
	writtenFor    []byte
	rebases       int
	mayHaveLanded bool
	// uuids are every uuid the transaction was written under (a rebase
	// gives a new one), so a landed earlier attempt is recognised.
	uuids map[string]bool
	// rebaseFiles are files rebases wrote.
	rebaseFiles []string
}

func (a *attempt) run(ctx context.Context) (*Result, error) {
	c := a.c
	op := OpName(a.cur)
	var lastErr error
	for n := 1; n <= c.cfg.MaxAttempts; n++ {
		if n > 1 {
			if err := a.backoff(ctx, n); err != nil {
				return a.giveUp(ctx, err)
			}
		}
		head, _, err := meta.Latest(ctx, c.bucket)
		if err != nil {
			lastErr = err
			continue
		}
		if head < a.checked {
			return nil, fmt.Errorf("commit: the table's newest version %d is older than version %d already seen (was it restored or rewritten outside Lance's protocol?)", head, a.checked)
		}
		if done, res, err := a.classifyUpTo(ctx, head); err != nil || done {
			return res, err
		}
		if a.txn.Prepare != nil {
			next, files, err := a.txn.Prepare(ctx, a.cur)
			a.rebaseFiles = append(a.rebaseFiles, files...)
			if err != nil {
				return nil, err
			}
			if next != a.cur {
				a.cur = next
				a.uuids[next.GetUuid()] = true
			}
		}
		if a.txn.RecordOnly {
			if err := a.recordsSomething(); err != nil {
				return nil, err
			}
		}
		if err := a.writeTransactionFile(ctx); err != nil {
			lastErr = err
			continue
		}
		next, err := BuildManifestExtra(a.head, a.cur, a.txn.Read, c.clock.Now(), a.txn.Extra)
		if err != nil {
			return nil, fmt.Errorf("build version %d: %w", head+1, err)
		}
		data, err := meta.EncodeManifestFile(next)
		if err != nil {
			return nil, err
		}
		v := head + 1
		c.metrics.attempts.WithLabelValues(op).Inc()
		var found *meta.ManifestFile // the version read back after an ambiguous put
		out, err := storage.PutNext(ctx, c.bucket, meta.ManifestKey(a.txn.Naming, v), data, a.readBack(&found))
		switch out {
		case storage.PutLanded:
			if found != nil {
				// An ambiguous put that the read-back found landed.
				c.metrics.ambiguous.WithLabelValues("ours").Inc()
				return a.landed(ctx, v, found, n), nil
			}
			return a.landed(ctx, v, next, n), nil
		case storage.PutFailed:
			return nil, fmt.Errorf("put version %d: %w", v, err)
		case storage.PutLost:
			if found != nil {
				c.metrics.ambiguous.WithLabelValues("theirs").Inc()
				a.mayHaveLanded = true
			}
		case storage.PutAbsent:
			c.metrics.ambiguous.WithLabelValues("absent").Inc()
			a.mayHaveLanded = true
		case storage.PutUnknown:
			c.metrics.ambiguous.WithLabelValues("unresolved").Inc()
			a.mayHaveLanded = true
		}
		lastErr = err
	}
	return a.giveUp(ctx, lastErr)
}

func (a *attempt) giveUp(ctx context.Context, lastErr error) (*Result, error) {
	if a.mayHaveLanded {
		// One last look: a put we could not resolve may have landed.
		bg := context.WithoutCancel(ctx)
		if v, _, err := meta.Latest(bg, a.c.bucket); err == nil {
			for w := a.checked + 1; w <= v; w++ {
				if f, err := meta.ReadVersion(bg, a.c.bucket, a.txn.Naming, w); err == nil && a.uuids[f.Transaction.GetUuid()] {
					return a.landed(ctx, w, f, a.c.cfg.MaxAttempts), nil
				}
			}
		}
		return nil, &AmbiguousError{Version: a.checked + 1, Err: lastErr}
	}
	return nil, &ConflictError{Class: ErrRetryable, Ours: OpName(a.cur), Reason: fmt.Sprintf("gave up after %d attempts: %v", a.c.cfg.MaxAttempts, lastErr)}
}

// classifyUpTo classifies the versions after a.checked up to head. done
// reports that the commit is decided (ours was found already landed).
func (a *attempt) classifyUpTo(ctx context.Context, head uint64) (done bool, res *Result, err error) {
	c := a.c
	for v := a.checked + 1; v <= head; v++ {
		f, err := meta.ReadVersion(ctx, c.bucket, a.txn.Naming, v)
		if err != nil {
			if storage.IsNotFound(err) {
				// A cleaner removed a version between our read and the
				// head: what it did cannot be classified.
				return false, nil, &ConflictError{Class: ErrRetryable, Ours: OpName(a.cur), Version: v,
					Reason: "the version was cleaned up before it could be classified"}
			}
			return false, nil, err
		}
		theirs, err := meta.ReadTransaction(ctx, c.bucket, f)
		if err != nil && !storage.IsNotFound(err) {
			return false, nil, err
		}
		if theirs != nil && a.uuids[theirs.GetUuid()] {
			// An earlier attempt's put landed after all.
			return true, a.landed(ctx, v, f, 0), nil
		}
		vd := Classify(a.cur, theirs)
		if vd.Decision == Compatible && (a.txn.Extra.FragReuse != nil || replacesFRI(a.cur)) && friUUID(f) != friUUID(a.head) {
			// Our entry extends (or trims) the read version's; theirs
			// changed it (a trim, or a deferred compaction whose
			// transaction does not show it), so ours would drop what
			// theirs recorded.
			vd = Verdict{Retryable, "the fragment-reuse index changed meanwhile"}
		}
		if vd.Decision == Compatible && friUUID(f) != friUUID(a.head) {
			if ix := firstUserIndex(a.cur.GetCreateIndex().GetNewIndices()); ix != nil {
				// Our segment is built on the read version's addresses and
				// stamped with its dataset_version. A version theirs added
				// to the FRI (a deferred compaction, whose dataset_version
				// is its own older read) remaps addresses ours holds, yet
				// once LanceDB stores the remapped bitmap (it does on its
				// next Delete or Update) nothing shows the segment still
				// needs that version, and a trim drops it: the segment
				// then covers the compacted fragment without entries for
				// its rows. A trim meanwhile is the same race the other
				// way (see friRace).
				vd = Verdict{Retryable, fmt.Sprintf("the fragment-reuse index changed meanwhile; the new segment of index %q holds addresses it may remap", ix.GetName())}
			}
		}
		if vd.Decision == Compatible {
			if id := missingSegment(a.cur, f); id != "" {
				// Another writer removed or replaced a segment ours
				// replaces without a transaction naming it (LanceDB
				// drops a segment whose fragments all left the table,
				// in a Delete or Update): ours re-plans on what is there.
				vd = Verdict{Retryable, fmt.Sprintf("index segment %s to replace was removed meanwhile", id)}
			}
		}
		if vd.Decision == Retryable && (vd.Reason == reasonAppendedKeys || vd.Reason == reasonInsertedKeys) && a.txn.AppendClash != nil {
			frags := theirs.GetAppend().GetFragments()
			if vd.Reason == reasonInsertedKeys {
				frags = theirs.GetUpdate().GetNewFragments()
			}
			why, err := a.txn.AppendClash(ctx, frags)
			if err != nil {
				return false, nil, err
			}
			if why == "" {
				vd = Verdict{Compatible, "the rows landed meanwhile hold none of our keys"}
			} else {
				vd.Reason = why
			}
		}
		if vd.Decision == Rebase && a.cur.GetRewrite() != nil && a.txn.Rebase == nil {
			vd.Decision = Retryable
		}
		c.metrics.conflicts.WithLabelValues(OpName(a.cur), OpName(theirs), vd.Decision.String()).Inc()
		switch vd.Decision {
		case Compatible:
		case Rebase:
			var next *pb.Transaction
			var err error
			if a.cur.GetRewrite() != nil && a.txn.Rebase != nil {
				var files []string
				next, files, err = a.txn.Rebase(ctx, a.cur, theirs, f)
				a.rebaseFiles = append(a.rebaseFiles, files...)
			} else {
				next, err = rebase(a.cur, f)
			}
			if err != nil {
				return false, nil, err
			}
			a.cur = next
			a.uuids[next.GetUuid()] = true
			a.rebases++
			c.metrics.rebases.WithLabelValues(OpName(a.cur)).Inc()
		default:
			cls := ErrRetryable
			if vd.Decision == Incompatible {
				cls = ErrIncompatible
			}
			return false, nil, &ConflictError{Class: cls, Ours: OpName(a.cur), Theirs: OpName(theirs), Version: v, Reason: vd.Reason}
		}
		a.checked, a.head = v, f
	}
	return false, nil, nil
}

// recordsSomething builds the version on the head before anything is
// written: a record-only transaction that raises no catch-up position
// there is not worth a version.
func (a *attempt) recordsSomething() error {
	next, err := BuildManifestExtra(a.head, a.cur, a.txn.Read, a.c.clock.Now(), a.txn.Extra)
	if err != nil {
		return fmt.Errorf("build version %d: %w", a.head.Manifest.GetVersion()+1, err)
	}
	adv, err := CatchupAdvances(a.head.Indices, next.Indices)
	if err != nil {
		return err
	}
	if len(adv) == 0 {
		return ErrNothingToRecord
	}
	return nil
}

// writeTransactionFile writes the transaction as it stands, once per
// distinct content: other writers classify their conflicts from it. A table
// with transaction files disabled gets none.
func (a *attempt) writeTransactionFile(ctx context.Context) error {
	if a.head.Manifest.GetWriterFeatureFlags()&meta.FlagNoTxnFiles != 0 {
		return nil
	}
	data, err := meta.EncodeTransaction(a.cur)
	if err != nil {
		return err
	}
	if a.writtenFor != nil && string(a.writtenFor) == string(data) {
		return nil
	}
	key := meta.TransactionKey(meta.TransactionName(a.cur.GetReadVersion(), a.cur.GetUuid()))
	if err := a.c.bucket.Put(ctx, key, data); err != nil {
		return fmt.Errorf("write transaction file: %w", err)
	}
	a.txnFiles = append(a.txnFiles, key)
	a.writtenFor = data
	return nil
}

func (a *attempt) landed(ctx context.Context, v uint64, f *meta.ManifestFile, n int) *Result {
	// The hint is advisory; losing it costs readers a listing.
	if err := meta.WriteHint(context.WithoutCancel(ctx), a.c.bucket, v); err != nil {
		a.c.logger.Warn("could not write the latest-version hint", zap.Uint64("version", v), zap.Error(err))
	}
	// Transaction files of superseded rebases are garbage.
	if len(a.txnFiles) > 1 {
		a.removeKeys(ctx, a.txnFiles[:len(a.txnFiles)-1])
	}
	return &Result{Version: v, Attempts: n, Rebases: a.rebases, Manifest: f, Transaction: a.cur}
}

// readBack resolves an ambiguous put of a version: the version is ours when
// its transaction is one of this commit's attempts (whose uuids a.uuids
// holds); *found is set to the version read.
func (a *attempt) readBack(found **meta.ManifestFile) storage.ReadBack {
	c := a.c
	return storage.ReadBack{
		Timeout: c.cfg.ReadBackTimeout,
		Ours: func(ctx context.Context, got []byte) (bool, error) {
			f, err := meta.DecodeManifestFile(got)
			if err != nil {
				return false, err
			}
			*found = f
			t, err := meta.ReadTransaction(ctx, c.bucket, f)
			return err == nil && t != nil && a.uuids[t.GetUuid()], nil
		},
		Wait: func(ctx context.Context, i int) error { return clock.Sleep(ctx, c.clock, c.cfg.BaseBackoff<<min(i, 8)) },
	}
}

func (a *attempt) backoff(ctx context.Context, n int) error {
	c := a.c
	d := c.cfg.BaseBackoff << min(n-2, 20)
	if d > c.cfg.MaxBackoff || d <= 0 {
		d = c.cfg.MaxBackoff
	}
	c.mu.Lock()
	j := time.Duration(c.rng.Int64N(int64(d) + 1))
	c.mu.Unlock()
	return clock.Sleep(ctx, c.clock, j)
}

func (a *attempt) removeFiles() {
	keys := append(append([]string(nil), a.txn.Files...), a.txnFiles...)
	a.removeKeys(context.Background(), append(keys, a.rebaseFiles...))
}

// replacesFRI reports whether t is a CreateIndex that removes or adds the
// fragment-reuse index (an FRI trim).
func replacesFRI(t *pb.Transaction) bool {
	return touchesFRI(t.GetCreateIndex())
}

// missingSegment is the uuid of a segment t removes or remaps that version
// f no longer has, "" when every one is there.
func missingSegment(t *pb.Transaction, f *meta.ManifestFile) string {
	var want []*pb.UUID
	for _, ix := range t.GetCreateIndex().GetRemovedIndices() {
		want = append(want, ix.GetUuid())
	}
	for _, ri := range t.GetRewrite().GetRewrittenIndices() {
		want = append(want, ri.GetOldId())
	}
	for _, u := range want {
		id := meta.UUIDString(u)
		found := false
		for _, ix := range f.Indices {
			if meta.UUIDString(ix.GetUuid()) == id {
				found = true
				break
			}
		}
		if !found {
			return id
		}
	}
	return ""
}

// friUUID is the uuid of a version's fragment-reuse index entry, "" for none.
func friUUID(f *meta.ManifestFile) string {
	for _, ix := range f.Indices {
		if ix.GetName() == meta.FragReuseIndexName {
			return meta.UUIDString(ix.GetUuid())
		}
	}
	return ""
}

func (a *attempt) removeKeys(ctx context.Context, keys []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.c.cfg.ReadBackTimeout)
	defer cancel()
	for _, k := range keys {
		if err := a.c.bucket.Delete(ctx, k); err != nil && !storage.IsNotFound(err) {
			a.c.logger.Warn("could not remove a file of an uncommitted transaction; cleanup removes it after min_age", zap.String("key", k), zap.Error(err))
		}
	}
}

// rebase rewrites ours to apply on top of f, after Classify said Rebase.
func rebase(ours *pb.Transaction, f *meta.ManifestFile) (*pb.Transaction, error) {
	d := ours.GetDelete()
	if d == nil {
		return nil, fmt.Errorf("no rebase of %s over version %d", OpName(ours), f.Manifest.GetVersion())
	}
	live := map[uint64]bool{}
	for _, fr := range f.Manifest.GetFragments() {
		live[fr.GetId()] = true
	}
	out := proto.Clone(ours).(*pb.Transaction)
	nd := out.GetDelete()
	nd.DeletedFragmentIds = nd.DeletedFragmentIds[:0]
	for _, id := range d.GetDeletedFragmentIds() {
		if live[id] {
			nd.DeletedFragmentIds = append(nd.DeletedFragmentIds, id)
		}
	}
	// The rebased transaction is a different transaction: a new uuid, so
	// its file and manifest never pass for the original's.
	_, out.Uuid = meta.NewUUID()
	return out, nil
}
