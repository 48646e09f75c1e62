// Package inspect builds the `compactord inspect` document (docs/format.md) for
// one version of a real Lance dataset, from its metadata alone: the
// manifest, the transaction that made the version, tags, the MemWAL shard
// manifests under _mem_wal/ and the fragment-reuse index.
//
// The document is a contract scripts rely on: field names never change,
// every list whose order carries no meaning is sorted, and an absent
// optional value is null rather than missing, so two runs over the same
// bytes print the same JSON.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Doc is the inspect document of one version.
type Doc struct {
	Version uint64 `json:"version"`
	// ReadVersion and Operation come from the transaction that made the
	// version; null when the version has none (transaction files disabled,
	// or removed).
	ReadVersion   *uint64      `json:"read_version"`
	Operation     *string      `json:"operation"`
	Timestamp     string       `json:"timestamp"`
	Writer        string       `json:"writer"`
	DataFormat    string       `json:"data_format"`
	FeatureFlags  FeatureFlags `json:"feature_flags"`
	Schema        []Field      `json:"schema"`
	PrimaryKey    []string     `json:"primary_key"`
	Fragments     []Fragment   `json:"fragments"`
	Rows          uint64       `json:"rows"`
	MaxFragmentID *uint32      `json:"max_fragment_id"`
	Indices       []Index      `json:"indices"`
	Tags          []Tag        `json:"tags"`
	MemWal        *MemWal      `json:"mem_wal"`
	FragReuse     *FragReuse   `json:"frag_reuse"`
}

// FeatureFlags are the manifest's reader and writer flags with the names
// of the bits set in either.
type FeatureFlags struct {
	Reader uint64   `json:"reader"`
	Writer uint64   `json:"writer"`
	Names  []string `json:"names"`
}

// Field is one schema field. Parent is -1 for a top-level field.
type Field struct {
	ID       int32  `json:"id"`
	Parent   int32  `json:"parent"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Fragment is one fragment of the version.
type Fragment struct {
	ID           uint64        `json:"id"`
	PhysicalRows uint64        `json:"physical_rows"`
	DeletedRows  uint64        `json:"deleted_rows"`
	Files        []DataFile    `json:"files"`
	DeletionFile *DeletionFile `json:"deletion_file"`
}

// DataFile is one data file of a fragment. Path is relative to data/;
// Size is 0 when the writer did not record it.
type DataFile struct {
	Path    string  `json:"path"`
	Fields  []int32 `json:"fields"`
	Size    uint64  `json:"size"`
	Version string  `json:"version"`
}

// DeletionFile is a fragment's deletion file.
type DeletionFile struct {
	Path           string `json:"path"`
	Type           string `json:"type"` // arrow or bin
	ReadVersion    uint64 `json:"read_version"`
	ID             uint64 `json:"id"`
	NumDeletedRows uint64 `json:"num_deleted_rows"`
}

// Index is one index segment. FragmentBitmap is null when the index records
// none (system indexes, old writers): it covers an unknown set.
type Index struct {
	Name           string   `json:"name"`
	UUID           string   `json:"uuid"`
	Type           string   `json:"type"`
	Fields         []int32  `json:"fields"`
	Columns        []string `json:"columns"`
	DatasetVersion uint64   `json:"dataset_version"`
	FragmentBitmap []uint32 `json:"fragment_bitmap"`
	CreatedAt      *string  `json:"created_at"`
}

// Tag is one tag of the main branch.
type Tag struct {
	Name      string `json:"name"`
	Version   uint64 `json:"version"`
	CreatedAt string `json:"created_at,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// MemWal is the MemWAL state: shards as their newest shard manifests say
// (the shard manifests are not versioned with the table), compacted and
// catch-up positions as this version's MemWAL index records them.
type MemWal struct {
	// IndexUUID is null when the version has no MemWAL index but the
	// table has shard directories (an older version is being inspected,
	// or the spec was unset).
	IndexUUID         *string  `json:"index_uuid"`
	NumShards         uint32   `json:"num_shards"`
	Shards            []Shard  `json:"shards"`
	MaintainedIndexes []string `json:"maintained_indexes"`
	// MaintainAllIndexes is Lance 13.1's flag: set, every index is
	// maintained whatever maintained_indexes lists (it is then empty).
	MaintainAllIndexes bool                         `json:"maintain_all_indexes"`
	IndexCatchup       map[string]map[string]uint64 `json:"index_catchup"`
	ShardingSpecs      []ShardingSpec               `json:"sharding_specs"`
}

// Shard is one MemWAL shard. ManifestVersion is 0 for a shard directory
// without a manifest (a writer crashed before its first claim) and for a
// shard only the index names.
type Shard struct {
	ID                          string    `json:"id"`
	ManifestVersion             uint64    `json:"manifest_version"`
	WriterEpoch                 uint64    `json:"writer_epoch"`
	CompactedSSTables           uint64    `json:"compacted_sstables"`
	CurrentGeneration           uint64    `json:"current_generation"`
	ReplayAfterWalEntryPosition uint64    `json:"replay_after_wal_entry_position"`
	WalEntries                  []uint64  `json:"wal_entries"`
	SSTables                    []SSTable `json:"sstables"`
}

// SSTable is one flushed generation.
type SSTable struct {
	Generation   uint64  `json:"generation"`
	Path         string  `json:"path"`
	PhysicalRows *uint64 `json:"physical_rows"`
}

// ShardingSpec is one of the MemWAL index's sharding specs.
type ShardingSpec struct {
	SpecID uint32          `json:"spec_id"`
	Fields []ShardingField `json:"fields"`
}

// ShardingField is one field of a sharding spec.
type ShardingField struct {
	FieldID    string            `json:"field_id"`
	SourceIDs  []int32           `json:"source_ids"`
	Transform  string            `json:"transform"`
	Expression string            `json:"expression"`
	ResultType string            `json:"result_type"`
	Parameters map[string]string `json:"parameters"`
}

// FragReuse is the fragment-reuse index.
type FragReuse struct {
	UUID     string       `json:"uuid"`
	Versions []FRIVersion `json:"versions"`
}

// FRIVersion is one compaction the FRI remembers.
type FRIVersion struct {
	DatasetVersion   uint64     `json:"dataset_version"`
	Groups           []FRIGroup `json:"groups"`
	RemovedFragments []uint32   `json:"removed_fragments"`
}

// FRIGroup is one rewrite group: old fragments replaced by new ones, and
// how many old row addresses survived.
type FRIGroup struct {
	Old         []uint64 `json:"old"`
	New         []uint64 `json:"new"`
	ChangedRows uint64   `json:"changed_rows"`
}

// Build is the document of version (0 = the latest).
func Build(ctx context.Context, b storage.Bucket, version uint64) (*Doc, error) {
	vs, naming, err := meta.ListVersions(ctx, b)
	if err != nil {
		return nil, err
	}
	if version == 0 {
		version = vs[len(vs)-1]
	} else if i := sort.Search(len(vs), func(i int) bool { return vs[i] >= version }); i == len(vs) || vs[i] != version {
		return nil, fmt.Errorf("%w: version %d is not retained (versions %d to %d are listed)", ErrNoVersion, version, vs[0], vs[len(vs)-1])
	}
	f, err := meta.ReadVersion(ctx, b, naming, version)
	if err != nil {
		return nil, err
	}
	if err := meta.CheckRead(f.Manifest); err != nil {
		return nil, err
	}
	return FromManifest(ctx, b, f)
}

// FromManifest builds the document of a decoded manifest file.
func FromManifest(ctx context.Context, b storage.Bucket, f *meta.ManifestFile) (*Doc, error) {
	m := f.Manifest
	d := &Doc{
		Version:    m.GetVersion(),
		Writer:     joinNonEmpty(m.GetWriterVersion().GetLibrary(), m.GetWriterVersion().GetVersion()),
		DataFormat: joinNonEmpty(m.GetDataFormat().GetFileFormat(), m.GetDataFormat().GetVersion()),
		FeatureFlags: FeatureFlags{
			Reader: m.GetReaderFeatureFlags(),
			Writer: m.GetWriterFeatureFlags(),
			Names:  meta.FlagNames(m.GetReaderFeatureFlags() | m.GetWriterFeatureFlags()),
		},
		Schema:     []Field{},
		PrimaryKey: []string{},
		Fragments:  []Fragment{},
		Indices:    []Index{},
		Tags:       []Tag{},
	}
	if ts := m.GetTimestamp(); ts != nil {
		d.Timestamp = ts.AsTime().UTC().Format(time.RFC3339Nano)
	}
	if m.MaxFragmentId != nil {
		v := m.GetMaxFragmentId()
		d.MaxFragmentID = &v
	}
	txn, err := meta.ReadTransaction(ctx, b, f)
	switch {
	case err != nil && !storage.IsNotFound(err):
		return nil, err
	case txn != nil:
		rv, op := txn.GetReadVersion(), meta.OperationName(txn)
		d.ReadVersion, d.Operation = &rv, &op
	}

	names := map[int32]string{}
	type pk struct {
		pos  uint32
		id   int32
		name string
	}
	var pks []pk
	for _, fl := range m.GetFields() {
		d.Schema = append(d.Schema, Field{ID: fl.GetId(), Parent: fl.GetParentId(), Name: fl.GetName(), Type: fl.GetLogicalType(), Nullable: fl.GetNullable()})
		names[fl.GetId()] = fl.GetName()
		if fl.GetUnenforcedPrimaryKey() {
			pks = append(pks, pk{fl.GetUnenforcedPrimaryKeyPosition(), fl.GetId(), fl.GetName()})
		}
	}
	sort.Slice(pks, func(i, j int) bool {
		if pks[i].pos != pks[j].pos {
			return pks[i].pos < pks[j].pos
		}
		return pks[i].id < pks[j].id
	})
	for _, p := range pks {
		d.PrimaryKey = append(d.PrimaryKey, p.name)
	}

	for _, fr := range m.GetFragments() {
		out, err := fragment(ctx, b, fr)
		if err != nil {
			return nil, err
		}
		d.Fragments = append(d.Fragments, out)
		if out.DeletedRows < out.PhysicalRows {
			d.Rows += out.PhysicalRows - out.DeletedRows
		}
	}
	sort.Slice(d.Fragments, func(i, j int) bool { return d.Fragments[i].ID < d.Fragments[j].ID })

	for _, ix := range f.Indices {
		out, err := index(ix, names, uint64(m.GetMaxFragmentId())+1)
		if err != nil {
			return nil, err
		}
		d.Indices = append(d.Indices, out)
	}
	sort.Slice(d.Indices, func(i, j int) bool {
		if d.Indices[i].Name != d.Indices[j].Name {
			return d.Indices[i].Name < d.Indices[j].Name
		}
		return d.Indices[i].UUID < d.Indices[j].UUID
	})

	tags, err := meta.LoadTags(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		d.Tags = append(d.Tags, Tag{Name: t.Name, Version: t.Version, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt})
	}
	sort.Slice(d.Tags, func(i, j int) bool { return d.Tags[i].Name < d.Tags[j].Name })

	if d.MemWal, err = memWal(ctx, b, f.Indices); err != nil {
		return nil, err
	}
	if d.FragReuse, err = fragReuse(ctx, b, f.Indices, uint64(m.GetMaxFragmentId())+1); err != nil {
		return nil, err
	}
	return d, nil
}

func joinNonEmpty(a, b string) string {
	if a == "" && b == "" {
		return ""
	}
	return a + "/" + b
}

// fragment describes one fragment. The deleted-row count is the manifest's
// num_deleted_rows; only when a deletion file leaves it unrecorded (0, as
// old writers did) is the file read to count, as Lance itself does.
func fragment(ctx context.Context, b storage.Bucket, fr *pb.DataFragment) (Fragment, error) {
	out := Fragment{ID: fr.GetId(), PhysicalRows: fr.GetPhysicalRows(), Files: []DataFile{}}
	for _, df := range fr.GetFiles() {
		fields := df.GetFields()
		if fields == nil {
			fields = []int32{}
		}
		out.Files = append(out.Files, DataFile{
			Path: df.GetPath(), Fields: fields, Size: df.GetFileSizeBytes(),
			Version: fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()),
		})
	}
	del := fr.GetDeletionFile()
	if del == nil {
		return out, nil
	}
	key := deletion.Key(fr.GetId(), del)
	out.DeletionFile = &DeletionFile{
		Path: key, Type: deletion.Suffix(del.GetFileType()), ReadVersion: del.GetReadVersion(),
		ID: del.GetId(), NumDeletedRows: del.GetNumDeletedRows(),
	}
	out.DeletedRows = del.GetNumDeletedRows()
	if out.DeletedRows == 0 {
		data, err := b.Get(ctx, key)
		if err != nil {
			return out, fmt.Errorf("fragment %d: read its deletion file: %w", fr.GetId(), err)
		}
		bm, err := deletion.Decode(del, data, fr.GetPhysicalRows())
		if err != nil {
			return out, &meta.CorruptError{Key: key, Err: err}
		}
		out.DeletedRows = bm.GetCardinality()
	}
	return out, nil
}

func index(ix *pb.IndexMetadata, names map[int32]string, maxFragments uint64) (Index, error) {
	out := Index{
		Name: ix.GetName(), UUID: meta.UUIDString(ix.GetUuid()), Type: meta.IndexKind(ix),
		Fields: ix.GetFields(), Columns: []string{}, DatasetVersion: ix.GetDatasetVersion(),
	}
	if out.Fields == nil {
		out.Fields = []int32{}
	}
	for _, id := range out.Fields {
		out.Columns = append(out.Columns, names[id])
	}
	bm, known, err := meta.FragmentBitmap(ix)
	if err != nil {
		return out, err
	}
	if known {
		// A damaged bitmap can claim billions of ids in a few bytes (one
		// run container); listing them would exhaust memory. No index
		// covers more fragments than the table ever had.
		if n := bm.GetCardinality(); n > uint64(maxFragments) {
			return out, fmt.Errorf("index %s (%s): fragment bitmap holds %d fragments, more than the table ever had (%d)", out.Name, out.UUID, n, maxFragments)
		}
		out.FragmentBitmap = bm.ToArray()
		if out.FragmentBitmap == nil {
			out.FragmentBitmap = []uint32{}
		}
	}
	if ix.CreatedAt != nil {
		s := time.UnixMilli(int64(ix.GetCreatedAt())).UTC().Format(time.RFC3339Nano)
		out.CreatedAt = &s
	}
	return out, nil
}

// memWal is nil for a table that never had a MemWAL (no index, no shard
// directories).
func memWal(ctx context.Context, b storage.Bucket, ixs []*pb.IndexMetadata) (*MemWal, error) {
	shardIDs, err := memwal.ListShards(ctx, b)
	if err != nil {
		return nil, err
	}
	ix := memwal.Index(ixs)
	if ix == nil && len(shardIDs) == 0 {
		return nil, nil
	}
	out := &MemWal{Shards: []Shard{}, MaintainedIndexes: []string{}, IndexCatchup: map[string]map[string]uint64{}, ShardingSpecs: []ShardingSpec{}}
	compacted := map[string]uint64{}
	if ix != nil {
		u := meta.UUIDString(ix.GetUuid())
		out.IndexUUID = &u
		det, err := memwal.Details(ix)
		if err != nil {
			return nil, err
		}
		out.NumShards = det.GetNumShards()
		compacted = memwal.Compacted(det)
		out.IndexCatchup = memwal.Catchup(det)
		out.MaintainedIndexes = append(out.MaintainedIndexes, det.GetMaintainedIndexes()...)
		out.MaintainAllIndexes = det.GetMaintainAllIndexes()
		sort.Strings(out.MaintainedIndexes)
		for _, s := range det.GetShardingSpecs() {
			spec := ShardingSpec{SpecID: s.GetSpecId(), Fields: []ShardingField{}}
			for _, f := range s.GetFields() {
				src, params := f.GetSourceIds(), f.GetParameters()
				if src == nil {
					src = []int32{}
				}
				if params == nil {
					params = map[string]string{}
				}
				spec.Fields = append(spec.Fields, ShardingField{
					FieldID: f.GetFieldId(), SourceIDs: src, Transform: f.GetTransform(),
					Expression: f.GetExpression(), ResultType: f.GetResultType(), Parameters: params,
				})
			}
			out.ShardingSpecs = append(out.ShardingSpecs, spec)
		}
		sort.Slice(out.ShardingSpecs, func(i, j int) bool { return out.ShardingSpecs[i].SpecID < out.ShardingSpecs[j].SpecID })
	}
	all := map[string]bool{}
	for _, id := range shardIDs {
		all[id] = true
	}
	for id := range compacted {
		all[id] = true
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		sh := Shard{ID: id, CompactedSSTables: compacted[id], WalEntries: []uint64{}, SSTables: []SSTable{}}
		st, err := memwal.ReadShard(ctx, b, id)
		if err != nil {
			return nil, err
		}
		if m := st.Manifest; m != nil {
			sh.ManifestVersion = m.GetVersion()
			sh.WriterEpoch = m.GetWriterEpoch()
			sh.CurrentGeneration = m.GetCurrentGeneration()
			sh.ReplayAfterWalEntryPosition = m.GetReplayAfterWalEntryPosition()
			for _, s := range m.GetSstables() {
				t := SSTable{Generation: s.GetGeneration(), Path: s.GetPath()}
				if s.PhysicalRows != nil {
					n := s.GetPhysicalRows()
					t.PhysicalRows = &n
				}
				sh.SSTables = append(sh.SSTables, t)
			}
			sort.Slice(sh.SSTables, func(i, j int) bool { return sh.SSTables[i].Generation < sh.SSTables[j].Generation })
		}
		if sh.WalEntries, err = memwal.ListWAL(ctx, b, id); err != nil {
			return nil, err
		}
		if sh.WalEntries == nil {
			sh.WalEntries = []uint64{}
		}
		out.Shards = append(out.Shards, sh)
	}
	return out, nil
}

func fragReuse(ctx context.Context, b storage.Bucket, ixs []*pb.IndexMetadata, maxFragments uint64) (*FragReuse, error) {
	segs := meta.FindIndex(ixs, meta.FragReuseIndexName)
	if len(segs) == 0 {
		return nil, nil
	}
	if len(segs) > 1 {
		return nil, fmt.Errorf("the version has %d fragment-reuse index segments; Lance keeps exactly one", len(segs))
	}
	ix := segs[0]
	content, err := meta.FragReuseContent(ctx, b, ix)
	if err != nil {
		return nil, err
	}
	out := &FragReuse{UUID: meta.UUIDString(ix.GetUuid()), Versions: []FRIVersion{}}
	for _, v := range content.GetVersions() {
		fv, err := friVersion(v, maxFragments)
		if err != nil {
			return nil, fmt.Errorf("index %s (%s): version %d: %w", ix.GetName(), out.UUID, v.GetDatasetVersion(), err)
		}
		out.Versions = append(out.Versions, fv)
	}
	sort.SliceStable(out.Versions, func(i, j int) bool { return out.Versions[i].DatasetVersion < out.Versions[j].DatasetVersion })
	return out, nil
}

func friVersion(v *pb.FragmentReuseIndexDetails_Version, maxFragments uint64) (FRIVersion, error) {
	out := FRIVersion{DatasetVersion: v.GetDatasetVersion(), Groups: []FRIGroup{}, RemovedFragments: []uint32{}}
	if raw := v.GetRemovedFragments(); len(raw) > 0 {
		bm := roaring.New()
		if err := bm.UnmarshalBinary(raw); err != nil {
			return out, fmt.Errorf("removed fragments: %w", err)
		}
		if n := bm.GetCardinality(); n > uint64(maxFragments) {
			return out, fmt.Errorf("removed fragments: %d, more than the table ever had (%d)", n, maxFragments)
		}
		out.RemovedFragments = bm.ToArray()
	}
	for _, g := range v.GetGroups() {
		fg := FRIGroup{Old: []uint64{}, New: []uint64{}}
		for _, f := range g.GetOldFragments() {
			fg.Old = append(fg.Old, f.GetId())
		}
		for _, f := range g.GetNewFragments() {
			fg.New = append(fg.New, f.GetId())
		}
		n, err := ChangedRows(g)
		if err != nil {
			return out, err
		}
		fg.ChangedRows = n
		out.Groups = append(out.Groups, fg)
	}
	return out, nil
}

// ChangedRows is the number of surviving old row addresses a group maps
// (its changed_row_addrs, a RoaringTreemap in the roaring64 portable form).
func ChangedRows(g *pb.FragmentReuseIndexDetails_Group) (uint64, error) {
	raw := g.GetChangedRowAddrs()
	if len(raw) == 0 {
		return 0, nil
	}
	bm := roaring64.New()
	if _, err := bm.ReadFrom(strings.NewReader(string(raw))); err != nil {
		return 0, fmt.Errorf("changed row addresses: %w", err)
	}
	return bm.GetCardinality(), nil
}

// ErrNoVersion is returned for a --version the table does not retain.
var ErrNoVersion = errors.New("no such version")
