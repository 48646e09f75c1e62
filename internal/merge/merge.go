package merge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Config configures a Merger.
type Config struct {
	// MaxGenerations bounds the generations of one job; 0 means no bound.
	MaxGenerations int `yaml:"max_generations"`
	// ReplanAttempts bounds re-planning after retryable conflicts; 0
	// means 5.
	ReplanAttempts int `yaml:"replan_attempts"`
	// IndexLookupMaxKeys bounds the key sets looked up through a
	// primary-key index (larger ones are scanned); 0 means
	// DefaultIndexLookupMaxKeys, negative never uses the index.
	IndexLookupMaxKeys int `yaml:"index_lookup_max_keys"`
	// LocateBatchKeys bounds the distinct keys a job holds at once (and
	// so its memory); a job with more locates its base rows in several
	// passes over the base key columns. 0 means DefaultLocateBatchKeys.
	// Not a configuration key yet (configs/compactord.yaml documents every
	// key, and the daemon's owner decides what it exposes).
	LocateBatchKeys int `yaml:"-"`
	// IndexLocator overrides how keys are looked up through a primary-key
	// index (tests); nil means IndexLocator{}.
	IndexLocator func(indexName string) Locator `yaml:"-"`
	Logger       *zap.Logger                    `yaml:"-"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxGenerations < 0 || c.ReplanAttempts < 0 || c.LocateBatchKeys < 0 {
		return fmt.Errorf("merge: max_generations, replan_attempts and locate_batch_keys must not be negative")
	}
	return nil
}

// Merger runs merge jobs on one table.
type Merger struct {
	cfg    Config
	t      *ops.Table
	logger *zap.Logger
}

// New checks its arguments and starts nothing.
func New(cfg Config, t *ops.Table) (*Merger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil || t.Bucket == nil || t.Committer == nil {
		return nil, errors.New("merge: table, bucket and committer are required")
	}
	if cfg.ReplanAttempts == 0 {
		cfg.ReplanAttempts = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Merger{cfg: cfg, t: t, logger: cfg.Logger.With(zap.String("component", "merge"))}, nil
}

// Result describes one merge job.
type Result struct {
	Shard string `json:"shard"`
	// From and Through are the generations merged (or planned).
	From    uint64 `json:"from_generation"`
	Through uint64 `json:"through_generation"`
	// ReadVersion is the plan's read version; Version the committed one
	// (0 when nothing was committed).
	ReadVersion uint64 `json:"read_version"`
	Version     uint64 `json:"version,omitempty"`
	// Inserted counts upserts of new keys, Updated upserts that replaced a
	// base row, Deleted base rows removed by tombstones.
	Inserted uint64 `json:"inserted"`
	Updated  uint64 `json:"updated"`
	Deleted  uint64 `json:"deleted"`
	// SSTableRows is the number of records read.
	SSTableRows  uint64 `json:"sstable_rows"`
	NewFragments int    `json:"new_fragments"`
	Lookup       string `json:"lookup,omitempty"`
	Attempts     int    `json:"attempts,omitempty"`
	// Skipped is set when another merge had already committed the
	// generations (commit.ErrIncompatible) or the shard is blocked.
	Skipped bool          `json:"skipped,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Elapsed time.Duration `json:"-"`
}

// ReadShardManifests reads the newest shard manifest of every configured
// shard of m (restricted to shard when non-empty).
func ReadShardManifests(ctx context.Context, t *ops.Table, m *pb.Manifest, shard string) (map[string]*pb.ShardManifest, error) {
	out := map[string]*pb.ShardManifest{}
	for _, s := range table.MemWal(m).GetShards() {
		if shard != "" && s != shard {
			continue
		}
		sm, err := memwal.ReadShardManifest(ctx, t.Bucket, s)
		if err != nil {
			return nil, err
		}
		if sm != nil {
			out[s] = sm
		}
	}
	return out, nil
}

// PlanLatest plans against the newest version.
func (mg *Merger) PlanLatest(ctx context.Context, shard string) (*pb.Manifest, []Job, []Blocked, error) {
	head, err := table.ReadLatest(ctx, mg.t.Bucket)
	if err != nil {
		return nil, nil, nil, err
	}
	d := table.MemWal(head)
	if d == nil {
		return nil, nil, nil, fmt.Errorf("the table has no MemWAL configured (run wal configure)")
	}
	if shard != "" && !slices.Contains(d.Shards, shard) {
		return nil, nil, nil, fmt.Errorf("shard %q is not configured (shards: %s)", shard, strings.Join(d.Shards, ", "))
	}
	sms, err := ReadShardManifests(ctx, mg.t, head, shard)
	if err != nil {
		return nil, nil, nil, err
	}
	jobs, blocked := Plan(head, sms, Env{Shard: shard, MaxGenerations: mg.cfg.MaxGenerations})
	return head, jobs, blocked, nil
}

// Run merges every pending generation of every shard (or of shard),
// re-planning from a fresh read after a retryable conflict. Generations
// another merge already committed are skipped, never merged twice.
func (mg *Merger) Run(ctx context.Context, shard string) ([]Result, error) {
	var results []Result
	failures := 0
	// lostFrom is, per shard, the first generation of the last job another
	// merge beat us to. Losing to progress is not a failure; losing twice
	// at the same position is (the conflict is not progress elsewhere).
	lostFrom := map[string]uint64{}
	for {
		_, jobs, blocked, err := mg.PlanLatest(ctx, shard)
		if err != nil {
			return results, err
		}
		// Only shards not yet reported as blocked or done are reported again.
		for _, bl := range blocked {
			if !slices.ContainsFunc(results, func(r Result) bool { return r.Shard == bl.Shard && r.Skipped }) {
				results = append(results, Result{Shard: bl.Shard, Skipped: true, Reason: bl.Reason})
			}
		}
		if len(jobs) == 0 {
			return results, nil
		}
		job := jobs[0]
		res, err := mg.Execute(ctx, job)
		switch {
		case err == nil:
			results = append(results, *res)
			continue
		case errors.Is(err, commit.ErrIncompatible):
			// Another instance merged these generations first: skip them;
			// the next plan starts above its position.
			mg.logger.Info("generations already merged elsewhere; skipped", zap.String("shard", job.Shard),
				zap.Uint64("from", job.From), zap.Uint64("through", job.Through), zap.Error(err))
			results = append(results, Result{Shard: job.Shard, From: job.From, Through: job.Through,
				ReadVersion: job.ReadVersion, Skipped: true, Reason: err.Error()})
			if prev, seen := lostFrom[job.Shard]; !seen || job.From > prev {
				lostFrom[job.Shard] = job.From
				continue
			}
		case errors.Is(err, commit.ErrRetryable):
			mg.logger.Info("merge conflicted; re-planning", zap.String("shard", job.Shard), zap.Error(err))
		default:
			return results, err
		}
		failures++
		if failures > mg.cfg.ReplanAttempts {
			return results, fmt.Errorf("merge shard %q: gave up after %d conflicts: %w", job.Shard, failures, err)
		}
	}
}

// Execute merges one job and commits it with the job's read version. An
// error matching commit.ErrIncompatible means the generations were merged
// by someone else; nothing of this job landed and its files are removed.
//
// Memory: records stream through; at most Config.LocateBatchKeys keys are
// held at once, whatever the job's size.
func (mg *Merger) Execute(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	res := &Result{Shard: job.Shard, From: job.From, Through: job.Through, ReadVersion: job.ReadVersion}
	if len(job.SSTables) == 0 || job.Through < job.From {
		return nil, fmt.Errorf("merge shard %q: empty job", job.Shard)
	}
	base, err := table.ReadManifest(ctx, mg.t.Bucket, job.ReadVersion)
	if err != nil {
		return nil, err
	}
	var work progress.Units
	for _, sst := range job.SSTables {
		work.Rows += int64(sst.Rows)
		work.Bytes += int64(sst.Bytes)
	}
	progress.From(ctx).Start("merge shard "+job.Shard, work)

	// 1-3. Fold the generations in ascending order (a later generation's
	// record for a key replaces an earlier one; SSTables are key-sorted,
	// so the fold is a streaming merge of sorted runs), write every
	// upsert, key-sorted, into new fragments as it streams past, and find
	// the base rows the records supersede.
	var keys commit.KeySetBuilder
	marks, frags, files, err := mg.fold(ctx, base, job, res, &keys)
	fail := func(err error) (*Result, error) {
		mg.removeFiles(ctx, files)
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	// The base rows of these keys were found at the read version: an
	// append or another shard's merge of one of them since conflicts.
	ks, err := keys.KeySet()
	if err != nil {
		return fail(err)
	}
	op := &pb.MergeSSTables{Shard: job.Shard, ThroughGeneration: job.Through, NewFragments: frags, Keys: ks}
	res.NewFragments = len(frags)

	// 4. Deletions of superseded and tombstoned base rows, unioned with
	// the fragment's deletions at the read version.
	for _, f := range base.Fragments {
		bm, ok := marks[f.Id]
		if !ok {
			continue
		}
		prior, err := table.ReadDeletionFile(ctx, mg.t.Bucket, f.DeletionFile)
		if err != nil {
			return fail(err)
		}
		bm.Or(prior)
		if bm.GetCardinality() >= f.PhysicalRows {
			op.RemovedFragmentIds = append(op.RemovedFragmentIds, f.Id)
			continue
		}
		df, err := table.WriteDeletionFile(ctx, mg.t.Bucket, f.Id, base.Version, bm)
		if err != nil {
			return fail(err)
		}
		files = append(files, df.Path)
		op.UpdatedFragments = append(op.UpdatedFragments, &pb.Fragment{Id: f.Id, DataFile: f.DataFile, PhysicalRows: f.PhysicalRows, DeletionFile: df})
	}

	// 5. One commit lands the rows and moves compacted_sstables[shard].
	// The read version is the plan's (Lance #6653).
	txn := mg.t.NewTxn(job.ReadVersion)
	txn.Operation = &pb.Transaction_MergeSstables{MergeSstables: op}
	cres, err := mg.t.CommitOrClean(ctx, txn, files)
	if err != nil {
		return nil, fmt.Errorf("merge shard %q generations %d..%d: %w", job.Shard, job.From, job.Through, err)
	}
	res.Version, res.Attempts, res.Elapsed = cres.Manifest.Version, cres.Attempts, time.Since(start)
	mg.logger.Info("merged", zap.String("shard", job.Shard), zap.Uint64("from", job.From), zap.Uint64("through", job.Through),
		zap.Uint64("version", res.Version), zap.Uint64("inserted", res.Inserted), zap.Uint64("updated", res.Updated),
		zap.Uint64("deleted", res.Deleted), zap.String("lookup", res.Lookup), zap.Duration("elapsed", res.Elapsed))
	return res, nil
}

// locator picks how a job of keys keys finds base rows: through a
// primary-key index when there is one and the job is small, else a scan.
func (mg *Merger) locator(m *pb.Manifest, keys int) Locator {
	name := PrimaryKeyIndex(m)
	if name == "" {
		return ScanLocator{}
	}
	if mg.cfg.IndexLocator != nil {
		if l := mg.cfg.IndexLocator(name); l != nil {
			return l
		}
	}
	limit := mg.cfg.IndexLookupMaxKeys
	if limit == 0 {
		limit = DefaultIndexLookupMaxKeys
	}
	if limit < 0 || keys > limit {
		return ScanLocator{}
	}
	return IndexLocator{Index: name}
}

func (mg *Merger) removeFiles(ctx context.Context, files []string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, f := range files {
		if err := mg.t.Bucket.Delete(dctx, f); err != nil && !storage.IsNotFound(err) {
			mg.logger.Warn("could not remove an uncommitted file; orphan cleanup will", zap.String("key", f), zap.Error(err))
		}
	}
}
