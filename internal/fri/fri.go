package fri

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Digest is a fragment as a compaction saw it (Lance's FragmentDigest).
type Digest struct{ ID, PhysicalRows, NumDeletedRows uint64 }

// Group is one rewrite: Old fragments replaced by New ones.
type Group struct {
	Old, New []Digest
	// Changed holds the surviving old row addresses. Lance maps them in
	// ascending order onto the rows of New (in order); every other row of
	// Old is deleted. A writer must copy survivors in that order: Old
	// ascending by id, offsets ascending.
	Changed *roaring64.Bitmap
}

// Version is one deferred compaction.
type Version struct {
	// DatasetVersion is the compaction's read version (Lance writes
	// dataset.manifest.version before the commit).
	DatasetVersion uint64
	Groups         []Group
	// Removed: fragments an index covered that were gone at the read
	// version (every row deleted); their addresses remap to deleted.
	// compactord's field 4; nil or empty when none.
	Removed *roaring.Bitmap
}

// Index is the decoded FRI of one table version.
type Index struct {
	// Versions oldest to newest.
	Versions []Version
	// Meta is the FRI's index metadata (nil for an Index built in memory).
	Meta  *pb.IndexMetadata
	chain *Chain
}

// New validates versions (oldest to newest) and compiles them.
func New(versions []Version) (*Index, error) {
	c, err := compile(versions)
	if err != nil {
		return nil, err
	}
	return &Index{Versions: versions, chain: c}, nil
}

// Load reads the FRI of mf; nil, nil when the version has none. Its details
// may be inline or in an external file.
func Load(ctx context.Context, b storage.Bucket, mf *meta.ManifestFile) (*Index, error) {
	segs := meta.FindIndex(mf.Indices, meta.FragReuseIndexName)
	switch {
	case len(segs) == 0:
		return nil, nil
	case len(segs) > 1:
		return nil, fmt.Errorf("version %d has %d fragment-reuse index segments; Lance keeps exactly one", mf.Manifest.GetVersion(), len(segs))
	}
	// Lance 13's FRI (index_version 1) records transitions this reader
	// does not decode; remapping through only its legacy versions would
	// send rows to the wrong addresses.
	if err := meta.CheckIndexVersion(segs[0]); err != nil {
		return nil, err
	}
	content, err := meta.FragReuseContent(ctx, b, segs[0])
	if err != nil {
		return nil, err
	}
	ix, err := FromProto(content)
	if err != nil {
		return nil, fmt.Errorf("index %s (%s): %w", meta.FragReuseIndexName, meta.UUIDString(segs[0].GetUuid()), err)
	}
	ix.Meta = segs[0]
	return ix, nil
}

// FromProto decodes and validates FRI content. Versions are sorted by
// dataset_version, as Lance sorts them when it writes.
func FromProto(content *pb.FragmentReuseIndexDetails_InlineContent) (*Index, error) {
	pvs := slices.Clone(content.GetVersions())
	slices.SortStableFunc(pvs, func(a, b *pb.FragmentReuseIndexDetails_Version) int {
		return cmpU64(a.GetDatasetVersion(), b.GetDatasetVersion())
	})
	vs := make([]Version, 0, len(pvs))
	for i, pv := range pvs {
		if pv == nil {
			return nil, corruptf("version %d is nil", i)
		}
		v := Version{DatasetVersion: pv.GetDatasetVersion()}
		removed, err := DecodeBitmap32(pv.GetRemovedFragments())
		if err != nil {
			return nil, fmt.Errorf("version %d removed_fragments: %w", v.DatasetVersion, err)
		}
		if !removed.IsEmpty() {
			v.Removed = removed
		}
		for gi, pg := range pv.GetGroups() {
			if pg == nil {
				return nil, corruptf("version %d group %d is nil", v.DatasetVersion, gi)
			}
			g := Group{Old: digests(pg.GetOldFragments()), New: digests(pg.GetNewFragments()), Changed: roaring64.New()}
			buckets, err := decodeBitmap64(pg.GetChangedRowAddrs())
			if err != nil {
				return nil, fmt.Errorf("version %d group %d changed_row_addrs: %w", v.DatasetVersion, gi, err)
			}
			for _, kb := range buckets {
				it := kb.bm.Iterator()
				for it.HasNext() {
					g.Changed.Add(uint64(kb.key)<<32 | uint64(it.Next()))
				}
			}
			v.Groups = append(v.Groups, g)
		}
		vs = append(vs, v)
	}
	return New(vs)
}

func digests(ds []*pb.FragmentReuseIndexDetails_FragmentDigest) []Digest {
	out := make([]Digest, 0, len(ds))
	for _, d := range ds {
		out = append(out, Digest{ID: d.GetId(), PhysicalRows: d.GetPhysicalRows(), NumDeletedRows: d.GetNumDeletedRows()})
	}
	return out
}

func pbDigests(ds []Digest) []*pb.FragmentReuseIndexDetails_FragmentDigest {
	out := make([]*pb.FragmentReuseIndexDetails_FragmentDigest, 0, len(ds))
	for _, d := range ds {
		out = append(out, &pb.FragmentReuseIndexDetails_FragmentDigest{Id: d.ID, PhysicalRows: d.PhysicalRows, NumDeletedRows: d.NumDeletedRows})
	}
	return out
}

// ToProto encodes versions as Lance stores them, oldest first.
func ToProto(versions []Version) *pb.FragmentReuseIndexDetails_InlineContent {
	out := &pb.FragmentReuseIndexDetails_InlineContent{}
	for _, v := range versions {
		pv := &pb.FragmentReuseIndexDetails_Version{DatasetVersion: v.DatasetVersion}
		if v.Removed != nil && !v.Removed.IsEmpty() {
			pv.RemovedFragments = encodeBitmap32(v.Removed)
		}
		for _, g := range v.Groups {
			pv.Groups = append(pv.Groups, &pb.FragmentReuseIndexDetails_Group{
				ChangedRowAddrs: encodeBitmap64(g.Changed),
				OldFragments:    pbDigests(g.Old),
				NewFragments:    pbDigests(g.New),
			})
		}
		out.Versions = append(out.Versions, pv)
	}
	return out
}

// MaxInlineBytes is the largest details Lance keeps inline; above it the
// content goes to _indices/{uuid}/details.binpb.
const MaxInlineBytes = 200 << 10

// DetailsFileName is the external details file of an FRI segment.
const DetailsFileName = "details.binpb"

var marshal = proto.MarshalOptions{Deterministic: true}

// AppendVersion builds the FRI metadata of prev's versions plus v: a new
// uuid, the FRI name, dataset_version = v's, fragment_bitmap = v's new
// fragments (as Lance's compaction writes it), details inline or, above
// MaxInlineBytes, in an external file. prev and prevMeta may be nil. It
// returns the objects it wrote (for cleanup if the commit fails).
func AppendVersion(ctx context.Context, b storage.Bucket, prev *Index, prevMeta *pb.IndexMetadata, v Version, now time.Time) (*pb.IndexMetadata, []string, error) {
	var versions []Version
	if prev != nil {
		versions = slices.Clone(prev.Versions)
	}
	if n := len(versions); n > 0 && v.DatasetVersion < versions[n-1].DatasetVersion {
		return nil, nil, fmt.Errorf("fri: new version at dataset version %d precedes version %d", v.DatasetVersion, versions[n-1].DatasetVersion)
	}
	versions = append(versions, v)
	// prev's versions were checked when it was compiled; only v is new.
	if _, err := compileVersion(&versions[len(versions)-1], false); err != nil {
		return nil, nil, fmt.Errorf("fri: new version: %w", err)
	}
	return buildMeta(ctx, b, prevMeta, versions, v.DatasetVersion, NewFragments(v), now)
}

// NewFragments is the set of new fragments of v's groups.
func NewFragments(v Version) *roaring.Bitmap {
	bm := roaring.New()
	for _, g := range v.Groups {
		for _, d := range g.New {
			bm.Add(uint32(d.ID))
		}
	}
	return bm
}

// buildMeta writes the details of versions and returns the FRI metadata.
func buildMeta(ctx context.Context, b storage.Bucket, prevMeta *pb.IndexMetadata, versions []Version, datasetVersion uint64, bitmap *roaring.Bitmap, now time.Time) (*pb.IndexMetadata, []string, error) {
	content, err := marshal.Marshal(ToProto(versions))
	if err != nil {
		return nil, nil, err
	}
	u, id := meta.NewUUID()
	details := &pb.FragmentReuseIndexDetails{}
	var keys []string
	ix := &pb.IndexMetadata{
		Uuid:           u,
		Name:           meta.FragReuseIndexName,
		DatasetVersion: datasetVersion,
		FragmentBitmap: encodeBitmap32(bitmap),
		IndexVersion:   proto.Int32(prevMeta.GetIndexVersion()),
		CreatedAt:      proto.Uint64(uint64(now.UnixMilli())),
	}
	if len(content) > MaxInlineBytes {
		key := meta.FragReuseDetailsKey(id, DetailsFileName)
		keys = append(keys, key)
		if err := b.Put(ctx, key, content); err != nil {
			return nil, keys, fmt.Errorf("write %s: %w", key, err)
		}
		details.Content = &pb.FragmentReuseIndexDetails_External{External: &pb.ExternalFile{Path: DetailsFileName, Size: uint64(len(content))}}
		ix.Files = []*pb.IndexFile{{Path: DetailsFileName, SizeBytes: uint64(len(content))}}
	} else {
		in := &pb.FragmentReuseIndexDetails_InlineContent{}
		if err := proto.Unmarshal(content, in); err != nil {
			return nil, nil, err
		}
		details.Content = &pb.FragmentReuseIndexDetails_Inline{Inline: in}
	}
	val, err := marshal.Marshal(details)
	if err != nil {
		return nil, keys, err
	}
	ix.IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLFragReuse, Value: val}
	return ix, keys, nil
}

// Remapper returns the remap of a row address through every version with
// dataset_version >= since, oldest to newest; ok is false when the row is
// deleted. Pass 0 to apply every version, as LanceDB does at index load:
// fragment ids are never reused, so a version an index already absorbed
// leaves its addresses alone, while skipping one it has not absorbed
// loses rows. (A version's dataset_version is the compaction's read
// version, and a compaction that rebased commits later than that, so an
// index's dataset_version alone cannot prove it absorbed a version.)
func (ix *Index) Remapper(since uint64) func(addr uint64) (uint64, bool) {
	if ix == nil || ix.chain == nil {
		return func(a uint64) (uint64, bool) { return a, true }
	}
	c := ix.chain
	start := c.start(since)
	return func(a uint64) (uint64, bool) { return c.remapOne(a, start) }
}

// Chain is the compiled chain, for batch remaps (physical remap).
func (ix *Index) Chain() *Chain {
	if ix == nil {
		return nil
	}
	return ix.chain
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PhysicalRows is the physical row count of a fragment some version names
// as old: what a bitmap index that holds a compacted fragment whole needs
// to expand it.
func (ix *Index) PhysicalRows(frag uint32) (uint64, bool) {
	if ix == nil {
		return 0, false
	}
	for _, v := range ix.Versions {
		for _, g := range v.Groups {
			for _, d := range g.Old {
				if d.ID == uint64(frag) {
					return d.PhysicalRows, true
				}
			}
		}
	}
	return 0, false
}
