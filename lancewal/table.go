package lancewal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Sharding transforms of a MemWAL spec, as LanceDB names them.
const (
	Unsharded = "unsharded"
	Bucket    = "bucket"
)

// Config is a table's MemWAL configuration: how keys are routed to shards
// and which base-table indexes the generations carry copies of. It is
// stored in the table's __lance_mem_wal system index, where LanceDB's
// setLsmWriteSpec puts it.
type Config struct {
	// Sharding is Unsharded (one shard) or Bucket (NumBuckets shards by a
	// hash of Column, which must be the primary key, an integer column).
	Sharding   string
	Column     string
	NumBuckets int
	// MaintainedIndexes are btree indexes of the base table a flushed
	// generation carries a copy of.
	MaintainedIndexes []string

	pk *column // the primary key, for ShardFor (set on configurations read from a table)
}

// Table is a Lance table opened for MemWAL writes. It is safe for
// concurrent use. Open one Writer per shard: a second claim of a shard
// fences the first, here as anywhere.
type Table struct {
	b     storage.Bucket
	owned bool
	now   func() time.Time
}

// OpenTable opens the Lance table at url: a local directory (a path or
// file:///abs/path, e.g. db/t.lance) or an object store URL (s3://,
// gs://, azblob://, as compactord's configuration takes them). The table
// must exist.
func OpenTable(ctx context.Context, url string) (*Table, error) {
	u, err := normalizeURL(url)
	if err != nil {
		return nil, err
	}
	b, err := storage.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("lancewal: open %s: %w", url, err)
	}
	t := &Table{b: b, owned: true, now: time.Now}
	if _, _, err := meta.Latest(ctx, b); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("lancewal: %s: %w", url, err)
	}
	return t, nil
}

// Close releases the table's storage.
func (t *Table) Close() error {
	if t.owned {
		return t.b.Close()
	}
	return nil
}

// state is what a writer needs of the table's newest version.
type state struct {
	read    *meta.ManifestFile
	naming  meta.Naming
	details *pb.MemWalIndexDetails // nil without a MemWAL
	cols    []column
	pk      int // index into cols
	// inverted: the maintained full-text indexes, for their generation
	// copies.
	inverted map[string]*invertedIndex
}

func (t *Table) state(ctx context.Context) (*state, error) {
	read, naming, err := meta.ReadLatest(ctx, t.b)
	if err != nil {
		return nil, fmt.Errorf("lancewal: %w", err)
	}
	st := &state{read: read, naming: naming, pk: -1}
	for _, f := range read.Manifest.GetFields() {
		if f.GetParentId() != -1 {
			return nil, fmt.Errorf("lancewal: column %q is nested; the MemWAL writer handles top-level scalar columns only", f.GetName())
		}
		c, err := newColumn(f)
		if err != nil {
			return nil, fmt.Errorf("lancewal: %w", err)
		}
		if f.GetName() == TombstoneColumn {
			return nil, fmt.Errorf("lancewal: the table has a column named %s, which the MemWAL reserves", TombstoneColumn)
		}
		if f.GetUnenforcedPrimaryKey() {
			if st.pk >= 0 {
				return nil, errors.New("lancewal: the table has a compound primary key; the writer supports single-column keys")
			}
			st.pk = len(st.cols)
		}
		st.cols = append(st.cols, c)
	}
	if st.pk < 0 {
		return nil, errors.New("lancewal: the table has no primary key (LanceDB setUnenforcedPrimaryKey); the MemWAL needs one")
	}
	if st.cols[st.pk].isVector() {
		return nil, errors.New("lancewal: the primary key is a vector column; the MemWAL needs a scalar key")
	}
	if ix := memwal.Index(read.Indices); ix != nil {
		if st.details, err = memwal.Details(ix); err != nil {
			return nil, fmt.Errorf("lancewal: %w", err)
		}
	}
	if st.details != nil {
		if err := st.loadInverted(ctx, t.b, st.maintained()); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Config returns the table's MemWAL configuration, or nil if it has none.
func (t *Table) Config(ctx context.Context) (*Config, error) {
	st, err := t.state(ctx)
	if err != nil {
		return nil, err
	}
	if st.details == nil {
		return nil, nil
	}
	return configOf(st)
}

func configOf(st *state) (*Config, error) {
	d := st.details
	pk := st.cols[st.pk]
	c := &Config{MaintainedIndexes: slices.Clone(d.GetMaintainedIndexes()), pk: &pk}
	specs := d.GetShardingSpecs()
	if len(specs) != 1 || len(specs[0].GetFields()) != 1 {
		return nil, fmt.Errorf("lancewal: the MemWAL has %d sharding specs; the writer supports one spec of one field", len(specs))
	}
	f := specs[0].GetFields()[0]
	c.Sharding = f.GetTransform()
	switch c.Sharding {
	case Unsharded:
	case Bucket:
		n, err := strconv.Atoi(f.GetParameters()["num_buckets"])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("lancewal: bucket spec has num_buckets %q", f.GetParameters()["num_buckets"])
		}
		c.NumBuckets = n
		if len(f.GetSourceIds()) != 1 {
			return nil, fmt.Errorf("lancewal: bucket spec has %d source columns, want 1", len(f.GetSourceIds()))
		}
		for _, col := range st.cols {
			if col.field.GetId() == f.GetSourceIds()[0] {
				c.Column = col.field.GetName()
			}
		}
		if c.Column == "" {
			return nil, fmt.Errorf("lancewal: bucket spec's source field %d is not a column", f.GetSourceIds()[0])
		}
	default:
		return nil, fmt.Errorf("lancewal: sharding transform %q is not supported (unsharded and bucket are)", c.Sharding)
	}
	return c, nil
}

// EnableMemWAL installs cfg as the table's MemWAL configuration, as
// LanceDB's setLsmWriteSpec does: a CreateIndex of the __lance_mem_wal
// system index. A table that already has one is left alone and its
// configuration returned (changing a live configuration would re-route
// keys under running writers).
func (t *Table) EnableMemWAL(ctx context.Context, cfg Config) (*Config, error) {
	st, err := t.state(ctx)
	if err != nil {
		return nil, err
	}
	if st.details != nil {
		return configOf(st)
	}
	spec := &pb.ShardingField{FieldId: "bucket", ResultType: "int32"}
	num := uint32(1)
	switch cfg.Sharding {
	case Unsharded, "":
		spec.Transform = proto.String(Unsharded)
	case Bucket:
		if cfg.NumBuckets < 1 || cfg.NumBuckets > 1024 {
			return nil, fmt.Errorf("lancewal: num buckets must be in [1, 1024], got %d", cfg.NumBuckets)
		}
		pk := st.cols[st.pk].field
		if cfg.Column != pk.GetName() {
			return nil, fmt.Errorf("lancewal: bucket sharding must hash the primary key %q (got %q): a key routed by another column could land in two shards", pk.GetName(), cfg.Column)
		}
		if _, err := shardFor(&Config{Sharding: Bucket, NumBuckets: 1}, st.cols[st.pk], int64(0)); err != nil {
			return nil, err // a key this writer cannot route
		}
		spec.Transform = proto.String(Bucket)
		spec.SourceIds = []int32{pk.GetId()}
		spec.Parameters = map[string]string{"num_buckets": strconv.Itoa(cfg.NumBuckets)}
		num = uint32(cfg.NumBuckets)
	default:
		return nil, fmt.Errorf("lancewal: sharding %q: want %q or %q", cfg.Sharding, Unsharded, Bucket)
	}
	if err := st.loadInverted(ctx, t.b, cfg.MaintainedIndexes); err != nil {
		return nil, err
	}
	for _, name := range cfg.MaintainedIndexes {
		if err := checkMaintained(st, name); err != nil {
			return nil, err
		}
	}
	details := &pb.MemWalIndexDetails{NumShards: num, ShardingSpecs: []*pb.ShardingSpec{{SpecId: 1, Fields: []*pb.ShardingField{spec}}},
		MaintainedIndexes: slices.Clone(cfg.MaintainedIndexes)}
	any, err := memwal.EncodeDetails(details)
	if err != nil {
		return nil, err
	}
	u, _ := meta.NewUUID()
	ix := &pb.IndexMetadata{Uuid: u, Name: meta.MemWalIndexName, DatasetVersion: st.read.Manifest.GetVersion(), IndexDetails: any,
		IndexVersion: proto.Int32(0), CreatedAt: proto.Uint64(uint64(t.now().UnixMilli()))}
	txn := commit.NewTransaction(st.read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{ix}}}
	c, err := newCommitter(t.b)
	if err != nil {
		return nil, err
	}
	if _, err := c.Commit(ctx, &commit.Txn{Read: st.read, Naming: st.naming, Transaction: txn}); err != nil {
		return nil, fmt.Errorf("lancewal: install the MemWAL configuration: %w", err)
	}
	st, err = t.state(ctx)
	if err != nil {
		return nil, err
	}
	if st.details == nil {
		return nil, errors.New("lancewal: the MemWAL configuration did not land")
	}
	return configOf(st)
}

// writable refuses, before the writer claims anything, a table whose
// metadata says more than the writer models: writer feature flags a newer
// Lance defined, MemWAL details with fields this build does not name (they
// may change what a generation must carry, as maintain_all_indexes did),
// or a maintained index the writer cannot copy into a generation. A
// generation flushed without a maintained index's copy would hide its rows
// from that index's LSM readers.
func (st *state) writable() error {
	if err := meta.CheckWrite(st.read.Manifest); err != nil {
		return fmt.Errorf("lancewal: %w", err)
	}
	if u := st.details.ProtoReflect().GetUnknown(); len(u) > 0 {
		return fmt.Errorf("lancewal: the MemWAL index details carry %d bytes of fields the writer does not know (a newer Lance's): %w", len(u), meta.ErrUnsupportedFeature)
	}
	for _, name := range st.maintained() {
		if err := checkMaintained(st, name); err != nil {
			return err
		}
	}
	return nil
}

// checkMaintained refuses a maintained index the writer cannot copy into
// a generation: btree, vector and full-text indexes it can.
func checkMaintained(st *state, name string) error {
	if isVectorIndex(st, name) {
		_, err := maintainedVector(st, name)
		return err
	}
	_, err := maintainedBTree(st, name)
	return err
}

// maintained are the indexes each flushed generation carries a copy of:
// the named ones the table still has, or every index with
// maintain_all_indexes.
func (st *state) maintained() []string {
	return memwal.Maintained(st.details, st.read.Indices)
}

// maintainedBTree returns the column of a maintained btree index (a
// full-text index's: maintainedInverted). LanceDB's MemWAL maintains btree,
// vector and full-text indexes.
func maintainedBTree(st *state, name string) (column, error) {
	segs := meta.FindIndex(st.read.Indices, name)
	if len(segs) == 0 {
		return column{}, fmt.Errorf("lancewal: maintained index %q is not an index of the table", name)
	}
	ix := segs[0]
	if meta.IndexKind(ix) == index.KindInverted {
		return maintainedInverted(st, name)
	}
	if k := meta.IndexKind(ix); k != "btree" {
		return column{}, fmt.Errorf("lancewal: maintained index %q is a %s index; the writer maintains btree, vector and full-text indexes only (LanceDB cannot maintain bitmap indexes either)", name, k)
	}
	if len(ix.GetFields()) != 1 {
		return column{}, fmt.Errorf("lancewal: maintained index %q covers %d fields, want 1", name, len(ix.GetFields()))
	}
	for _, c := range st.cols {
		if c.field.GetId() == ix.GetFields()[0] {
			return c, nil
		}
	}
	return column{}, fmt.Errorf("lancewal: maintained index %q is on field %d, which is not a column", name, ix.GetFields()[0])
}

// ShardFor returns the id of the shard that owns key under the table's
// MemWAL configuration. Every write of a key must go to its shard: the
// read view takes a key's newest value within a shard.
func (t *Table) ShardFor(ctx context.Context, key any) (string, error) {
	st, err := t.state(ctx)
	if err != nil {
		return "", err
	}
	if st.details == nil {
		return "", errors.New("lancewal: the table has no MemWAL configuration (EnableMemWAL or LanceDB setLsmWriteSpec)")
	}
	cfg, err := configOf(st)
	if err != nil {
		return "", err
	}
	return shardFor(cfg, st.cols[st.pk], key)
}

// ShardFor is Table.ShardFor without reading the table: the shard of key
// under this configuration (one read from a table: Table.Config).
func (c *Config) ShardFor(key any) (string, error) {
	if c.pk == nil {
		return "", errors.New("lancewal: the configuration was not read from a table (use Table.Config)")
	}
	return shardFor(c, *c.pk, key)
}

// Shards lists the shard ids the configuration can route to.
func (c *Config) Shards() []string {
	if c.Sharding == Bucket {
		out := make([]string, c.NumBuckets)
		for i := range out {
			out[i] = shardUUID("bucket-" + strconv.Itoa(i))
		}
		return out
	}
	return []string{shardUUID(Unsharded)}
}

func shardFor(cfg *Config, pk column, key any) (string, error) {
	if cfg.Sharding == Unsharded {
		return shardUUID(Unsharded), nil
	}
	ch := newChunk(pk, 1)
	if err := ch.add(key); err != nil {
		return "", fmt.Errorf("lancewal: key: %w", err)
	}
	var data []byte
	switch v := ch.value(0).(type) {
	case int64:
		data = appendLE64(nil, uint64(v))
	case uint64:
		data = appendLE64(nil, v)
	default:
		// LanceDB 0.39 does not bucket strings by murmur3 of their UTF-8
		// bytes (Iceberg's rule): its writer refused keys so routed. Until
		// its string hash is matched, only integer keys are routed.
		return "", fmt.Errorf("lancewal: bucket sharding of a %s key is not supported (integer keys are; use an unsharded spec)", pk.t)
	}
	b := int(murmur3(data)&0x7fffffff) % cfg.NumBuckets
	return shardUUID("bucket-" + strconv.Itoa(b)), nil
}

func appendLE64(b []byte, v uint64) []byte {
	for i := 0; i < 8; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func newCommitter(b storage.Bucket) (*commit.Committer, error) {
	return commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
}
