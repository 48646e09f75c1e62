package trim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Config of a trim run.
type Config struct {
	// Concurrency bounds parallel deletes.
	Concurrency int `yaml:"concurrency"`
	// KeepShardManifests is how many newest shard-manifest versions to keep
	// (at least 2).
	KeepShardManifests int  `yaml:"keep_shard_manifests"`
	DryRun             bool `yaml:"-"`
	// MaxAttempts bounds publishing a shard manifest against racing writers.
	MaxAttempts int `yaml:"max_attempts"`
}

// DefaultConfig is used for zero fields.
func DefaultConfig() Config {
	return Config{Concurrency: 16, KeepShardManifests: 10, MaxAttempts: 10}
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("trim concurrency must be at least 1, got %d", c.Concurrency)
	case c.KeepShardManifests < 2:
		return fmt.Errorf("trim keep_shard_manifests must be at least 2, got %d", c.KeepShardManifests)
	case c.MaxAttempts < 1:
		return fmt.Errorf("trim max_attempts must be at least 1, got %d", c.MaxAttempts)
	}
	return nil
}

// Result of a run.
type Result struct {
	Version         uint64     `json:"version"`
	Decisions       []Decision `json:"sstables"`
	RetiredSSTables int        `json:"retired_sstables"`
	BytesTrimmed    uint64     `json:"bytes_trimmed"`
	WALDeleted      int        `json:"wal_entries_deleted"`
	ManifestsPruned int        `json:"shard_manifests_deleted"`
	OrphansDeleted  int        `json:"orphan_sstables_deleted"`
	// Retained bytes by reason.
	Retained map[string]uint64 `json:"retained_bytes"`
	DryRun   bool              `json:"dry_run"`
}

// Run plans and (unless DryRun) executes a trim of every shard.
func Run(ctx context.Context, b storage.Bucket, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	d := table.MemWal(latest)
	res := &Result{Version: latest.Version, Decisions: []Decision{}, Retained: map[string]uint64{}, DryRun: cfg.DryRun}
	for _, r := range Reasons {
		res.Retained[r] = 0
	}
	if d == nil {
		return res, nil
	}
	versions, err := table.ListVersions(ctx, b)
	if err != nil {
		return nil, err
	}
	oldest, err := oldestReaders(ctx, b, versions, latest)
	if err != nil {
		return nil, err
	}
	shards := map[string]*pb.ShardManifest{}
	for _, s := range d.Shards {
		sm, err := memwal.ReadShardManifest(ctx, b, s)
		if err != nil {
			return nil, err
		}
		shards[s] = sm
	}
	res.Decisions = Decide(latest, oldest, shards)
	for _, dec := range res.Decisions {
		if dec.Retire {
			res.RetiredSSTables++
			res.BytesTrimmed += dec.Bytes
		} else {
			res.Retained[dec.Reason] += dec.Bytes
		}
	}
	if cfg.DryRun {
		return res, nil
	}
	for _, s := range d.Shards {
		if shards[s] == nil {
			continue
		}
		if err := trimShard(ctx, b, cfg, latest, oldest, s, res); err != nil {
			return res, fmt.Errorf("trim shard %q: %w", s, err)
		}
	}
	return res, nil
}

// oldestReaders returns, as a manifest whose MemWAL details hold per shard
// the lowest compacted position of any retained version that reads that
// shard's SSTables. A reader of version V reads the SSTables above V's
// compacted position; a version from before the MemWAL (or the shard)
// existed reads none. compacted_sstables only grows, so the oldest version
// naming the shard has the lowest position; versions are read from the
// oldest up until every shard is found.
func oldestReaders(ctx context.Context, b storage.Bucket, versions []uint64, latest *pb.Manifest) (*pb.Manifest, error) {
	want := map[string]bool{}
	for _, s := range table.MemWal(latest).GetShards() {
		want[s] = true
	}
	low := map[string]uint64{}
	for i := len(versions) - 1; i >= 0 && len(low) < len(want); i-- {
		m := latest
		if versions[i] != latest.Version {
			var err error
			if m, err = table.ReadManifest(ctx, b, versions[i]); err != nil {
				return nil, fmt.Errorf("read retained version %d: %w", versions[i], err)
			}
		}
		d := table.MemWal(m)
		for _, s := range d.GetShards() {
			if _, seen := low[s]; !seen && want[s] {
				low[s] = d.CompactedSstables[s]
			}
		}
	}
	return &pb.Manifest{Indices: []*pb.IndexMetadata{{Name: table.MemWalIndexName, Type: table.MemWalIndexName,
		Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{Shards: table.MemWal(latest).GetShards(), CompactedSstables: low}}}}}, nil
}

// trimShard publishes a shard manifest without the retired SSTables, then
// deletes their files, the covered WAL entries and old shard manifests.
// Manifest first: a crash afterwards leaves only unreferenced files, which
// the next run sweeps by generation.
func trimShard(ctx context.Context, b storage.Bucket, cfg Config, latest, oldest *pb.Manifest, shard string, res *Result) error {
	var sm *pb.ShardManifest
	var retired []*pb.SSTable
	for attempt := 0; ; attempt++ {
		cur, err := memwal.ReadShardManifest(ctx, b, shard)
		if err != nil {
			return err
		}
		sm, retired = cur, nil
		next := proto.Clone(cur).(*pb.ShardManifest)
		next.Sstables = nil
		for _, sst := range cur.Sstables {
			dec := decideOne(table.MemWal(latest), table.MemWal(oldest).GetCompactedSstables(), Decision{Shard: shard, Generation: sst.Generation})
			if dec.Retire {
				retired = append(retired, sst)
				next.TrimmedThroughGeneration = max(next.TrimmedThroughGeneration, sst.Generation)
			} else {
				next.Sstables = append(next.Sstables, sst)
			}
		}
		if len(retired) == 0 {
			break
		}
		// The writer's epoch is kept: trim is not a writer, and the writer
		// adopts a newer version carrying its own epoch.
		next.Version = cur.Version + 1
		next.TimestampMicros = time.Now().UnixMicro()
		data, err := table.EncodeProto(next)
		if err != nil {
			return err
		}
		err = b.PutIfAbsent(ctx, memwal.ShardManifestKey(shard, next.Version), data)
		if err == nil {
			sm = next
			break
		}
		if !storage.IsAlreadyExists(err) {
			return fmt.Errorf("publish shard manifest version %d: %w", next.Version, err)
		}
		if attempt+1 >= cfg.MaxAttempts {
			return fmt.Errorf("publish shard manifest: lost the race to writers %d times", cfg.MaxAttempts)
		}
	}
	var del []string
	for _, sst := range retired {
		del = append(del, sst.Path)
	}
	// Sweep SSTable files at or below the trimmed generation that no
	// manifest names (left by a crash between publish and delete, or by a
	// failed flush). A flush in progress writes a generation above it.
	named := map[string]bool{}
	for _, sst := range sm.Sstables {
		named[sst.Path] = true
	}
	retiredSet := map[string]bool{}
	for _, p := range del {
		retiredSet[p] = true
	}
	if err := b.List(ctx, memwal.SSTableDir(shard), func(a storage.Attrs) error {
		gen, ok := sstGeneration(shard, a.Key)
		if ok && gen <= sm.TrimmedThroughGeneration && !named[a.Key] && !retiredSet[a.Key] {
			del = append(del, a.Key)
			res.OrphansDeleted++
		}
		return nil
	}); err != nil {
		return err
	}
	positions, err := memwal.ListWALPositions(ctx, b, shard)
	if err != nil {
		return err
	}
	var walDel []string
	for _, p := range WALDeletions(positions, sm.ReplayAfterWalPosition) {
		walDel = append(walDel, memwal.WALKey(shard, p))
	}
	var old []string
	if err := b.List(ctx, memwal.ShardManifestDir(shard), func(a storage.Attrs) error {
		if v, ok := memwal.ParseShardManifestKey(shard, a.Key); ok && v+uint64(cfg.KeepShardManifests) <= sm.Version {
			old = append(old, a.Key)
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := storage.DeleteAll(ctx, b, del, cfg.Concurrency); err != nil {
		return err
	}
	n, err := storage.DeleteAll(ctx, b, walDel, cfg.Concurrency)
	res.WALDeleted += n
	if err != nil {
		return err
	}
	n, err = storage.DeleteAll(ctx, b, old, cfg.Concurrency)
	res.ManifestsPruned += n
	return err
}

func sstGeneration(shard, key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, memwal.SSTableDir(shard))
	if !ok || len(name) < 21 || name[20] != '-' {
		return 0, false
	}
	var g uint64
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, false
		}
		g = g*10 + uint64(c-'0')
	}
	return g, true
}
