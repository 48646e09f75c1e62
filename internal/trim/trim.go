package trim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/inflight"
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
	// ReaderGrace is how long a version keeps the SSTables its LSM view
	// reads after it stopped being the latest (see the package doc).
	// Readers that take longer register an in-flight marker.
	ReaderGrace time.Duration `yaml:"reader_grace"`
	// Now is the clock (nil: time.Now).
	Now func() time.Time `yaml:"-"`
}

// DefaultConfig is used for zero fields.
func DefaultConfig() Config {
	return Config{Concurrency: 16, KeepShardManifests: 10, MaxAttempts: 10, ReaderGrace: time.Minute}
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
	case c.ReaderGrace < 0:
		return fmt.Errorf("trim reader_grace must not be negative, got %s", c.ReaderGrace)
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
	// Readers is, per shard, the version that may still be read with the
	// lowest compacted position (absent: only the latest reads the shard).
	Readers Readers `json:"readers"`
	DryRun  bool    `json:"dry_run"`
}

// Waiting says some SSTable is kept only by a pin that time alone ends
// (the reader grace, an in-flight marker): a later run may retire it
// although the table did not change.
func (r *Result) Waiting() bool {
	for _, d := range r.Decisions {
		if !d.Retire && d.Reason == ReasonVersionRetention && r.Readers[d.Shard].Passing {
			return true
		}
	}
	return false
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
	now := time.Now()
	if cfg.Now != nil {
		now = cfg.Now()
	}
	readers, err := findReaders(ctx, b, cfg.ReaderGrace, now, versions, latest)
	if err != nil {
		return nil, err
	}
	res.Readers = readers
	shards := map[string]*pb.ShardManifest{}
	for _, s := range d.Shards {
		sm, err := memwal.ReadShardManifest(ctx, b, s)
		if err != nil {
			return nil, err
		}
		shards[s] = sm
	}
	res.Decisions = Decide(latest, readers, shards)
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
		if err := trimShard(ctx, b, cfg, latest, readers, s, res); err != nil {
			return res, fmt.Errorf("trim shard %q: %w", s, err)
		}
	}
	return res, nil
}

// findReaders returns, per shard, the version with the lowest compacted
// position among those that may still be read with their SSTable view:
// versions that stopped being the latest less than grace ago (or whose
// successor's commit time is unknown), tagged versions, and the oldest
// read version of a live in-flight marker. versions is newest first. A
// version from before the MemWAL (or the shard) existed reads none of its
// SSTables. compacted_sstables only grows with the version, so the oldest
// such version naming a shard has the lowest position.
func findReaders(ctx context.Context, b storage.Bucket, grace time.Duration, now time.Time, versions []uint64, latest *pb.Manifest) (Readers, error) {
	want := map[string]bool{}
	for _, s := range table.MemWal(latest).GetShards() {
		want[s] = true
	}
	read := map[uint64]*pb.Manifest{latest.Version: latest}
	get := func(v uint64) (*pb.Manifest, error) {
		if m := read[v]; m != nil {
			return m, nil
		}
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			return nil, err
		}
		read[v] = m
		return m, nil
	}
	why := map[uint64]string{}
	passing := map[uint64]bool{}
	// The reader grace: walk down from the newest while the successor is
	// younger than the grace. A successor cleanup removed meanwhile is
	// skipped: the next one up was committed later, which only widens the
	// window.
	for i := 1; i < len(versions); i++ {
		succ, err := get(versions[i-1])
		if errors.Is(err, table.ErrVersionNotFound) {
			why[versions[i]], passing[versions[i]] = "its successor vanished during the run", true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read version %d: %w", versions[i-1], err)
		}
		if succ.TimestampMicros == 0 {
			why[versions[i]] = fmt.Sprintf("version %d has no commit time", succ.Version)
			continue
		}
		ago := now.Sub(time.UnixMicro(succ.TimestampMicros))
		if ago >= grace {
			break
		}
		why[versions[i]], passing[versions[i]] = fmt.Sprintf("the latest until %s ago, within the %s reader grace", ago.Round(time.Second), grace), true
	}
	exists := map[uint64]bool{}
	for _, v := range versions {
		exists[v] = true
	}
	tags, err := table.LoadTags(ctx, b)
	if err != nil {
		return nil, err
	}
	for v, name := range tags {
		if exists[v] {
			why[v], passing[v] = fmt.Sprintf("tagged %q", name), false
		}
	}
	wm, err := inflight.Load(ctx, b, now)
	if err != nil {
		return nil, err
	}
	if wm.ReadVersion > 0 {
		// The marker's version, or the oldest retained one above it.
		for i := len(versions) - 1; i >= 0; i-- {
			if versions[i] >= wm.ReadVersion {
				if _, tagged := why[versions[i]]; !tagged || passing[versions[i]] {
					why[versions[i]], passing[versions[i]] = fmt.Sprintf("an in-flight job or reader read version %d", wm.ReadVersion), true
				}
				break
			}
		}
	}
	pinned := make([]uint64, 0, len(why))
	for v := range why {
		pinned = append(pinned, v)
	}
	slices.Sort(pinned)
	out := Readers{}
	for _, v := range pinned {
		if len(out) == len(want) {
			break
		}
		m, err := get(v)
		if errors.Is(err, table.ErrVersionNotFound) {
			continue // deleted meanwhile: nobody can open it any more
		}
		if err != nil {
			return nil, fmt.Errorf("read version %d: %w", v, err)
		}
		d := table.MemWal(m)
		for _, s := range d.GetShards() {
			if _, seen := out[s]; !seen && want[s] {
				out[s] = Reader{Version: v, Compacted: d.CompactedSstables[s], Why: why[v], Passing: passing[v]}
			}
		}
	}
	return out, nil
}

// trimShard publishes a shard manifest without the retired SSTables, then
// deletes their files, the covered WAL entries and old shard manifests.
// Manifest first: a crash afterwards leaves only unreferenced files, which
// the next run sweeps by generation.
func trimShard(ctx context.Context, b storage.Bucket, cfg Config, latest *pb.Manifest, readers Readers, shard string, res *Result) error {
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
			dec := decideOne(table.MemWal(latest), readers, Decision{Shard: shard, Generation: sst.Generation})
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
