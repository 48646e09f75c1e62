// Package verify checks every invariant of a table (an fsck). It reads only;
// a violation is reported with the object and the reason, never repaired.
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Violation is one broken invariant.
type Violation struct {
	Object string `json:"object"`
	Reason string `json:"reason"`
}

// Options select what to check.
type Options struct {
	// Version checks one version (0: every retained version).
	Version uint64
	// Deep also resolves every index row address (DeepCheck must be set).
	Deep bool
	// DeepCheck is installed by the index package (which sits above this
	// one) to resolve index entries of a manifest.
	DeepCheck func(ctx context.Context, b storage.Bucket, m *pb.Manifest) ([]Violation, error)
}

// Report is the outcome.
type Report struct {
	Versions   []uint64    `json:"versions_checked"`
	Files      int         `json:"files_checked"`
	Rows       int         `json:"live_rows_checked"`
	Violations []Violation `json:"violations"`
}

// OK reports whether every invariant holds.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

type checker struct {
	ctx   context.Context
	b     storage.Bucket
	r     *Report
	sizes map[string]bool // files already checked
}

func (c *checker) add(obj, f string, a ...any) {
	c.r.Violations = append(c.r.Violations, Violation{Object: obj, Reason: fmt.Sprintf(f, a...)})
}

// Run verifies the table at b.
func Run(ctx context.Context, b storage.Bucket, opt Options) (*Report, error) {
	r := &Report{Violations: []Violation{}}
	c := &checker{ctx: ctx, b: b, r: r, sizes: map[string]bool{}}
	versions, err := table.ListVersions(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, table.ErrNoTable
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	if opt.Version != 0 {
		versions = []uint64{opt.Version}
	}
	var prev *pb.Manifest
	var manifests []*pb.Manifest
	for _, v := range versions {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			if errors.Is(err, table.ErrVersionNotFound) && opt.Version != 0 {
				return nil, err
			}
			c.add(table.ManifestKey(v), "does not parse: %v", err)
			prev = nil
			continue
		}
		r.Versions = append(r.Versions, v)
		c.manifest(m)
		if prev != nil {
			c.chain(prev, m)
		}
		prev = m
		manifests = append(manifests, m)
	}
	if len(manifests) == 0 {
		return r, nil
	}
	latest := manifests[len(manifests)-1]
	tags, err := table.LoadTags(ctx, b)
	if err != nil {
		c.add(table.TagsDir, "%v", err)
	}
	var tagged []*pb.Manifest
	for _, m := range manifests {
		if tags[m.Version] != "" {
			tagged = append(tagged, m)
		}
	}
	c.memwal(tagged, latest)
	c.uniqueKeys(latest)
	if opt.Deep {
		c.unmerged(latest)
		if opt.DeepCheck == nil {
			return nil, fmt.Errorf("--deep needs the index checker, which is not linked in")
		}
		vs, err := opt.DeepCheck(ctx, b, latest)
		if err != nil {
			return nil, err
		}
		r.Violations = append(r.Violations, vs...)
	}
	return r, nil
}

func (c *checker) file(owner, key string, size uint64) {
	if key == "" {
		c.add(owner, "references an empty path")
		return
	}
	id := fmt.Sprintf("%s\x00%d", key, size)
	if c.sizes[id] {
		return
	}
	c.sizes[id] = true
	c.r.Files++
	a, err := c.b.Attributes(c.ctx, key)
	switch {
	case storage.IsNotFound(err):
		c.add(key, "referenced by %s but missing", owner)
	case err != nil:
		c.add(key, "cannot stat: %v", err)
	case size > 0 && uint64(a.Size) != size:
		c.add(key, "size %d, %s records %d", a.Size, owner, size)
	}
}

func (c *checker) manifest(m *pb.Manifest) {
	obj := fmt.Sprintf("version %d", m.Version)
	if m.Version > 1 && m.ReadVersion >= m.Version {
		c.add(obj, "read version %d is not below the version", m.ReadVersion)
	}
	// The transaction travels inline in the manifest; the file is written
	// in parallel for audits, and is required only when it is not inline.
	if m.TransactionPath != "" && m.Transaction == nil {
		c.file(obj, m.TransactionPath, 0)
	}
	ids := map[uint32]bool{}
	live := roaring.New()
	for _, f := range m.Fragments {
		fo := fmt.Sprintf("%s fragment %d", obj, f.Id)
		if ids[f.Id] {
			c.add(fo, "duplicate fragment id")
		}
		ids[f.Id] = true
		live.Add(f.Id)
		if m.MaxFragmentId == nil || f.Id > *m.MaxFragmentId {
			c.add(fo, "id above max_fragment_id %v", m.GetMaxFragmentId())
		}
		if f.PhysicalRows == 0 {
			c.add(fo, "has no rows")
		}
		c.file(fo, f.GetDataFile().GetPath(), f.GetDataFile().GetSizeBytes())
		if df := f.DeletionFile; df != nil {
			c.file(fo, df.Path, df.SizeBytes)
			bm, err := table.ReadDeletionFile(c.ctx, c.b, df)
			switch {
			case err != nil:
				if !storage.IsNotFound(err) {
					c.add(df.Path, "%v", err)
				}
			case !bm.IsEmpty() && uint64(bm.Maximum()) >= f.PhysicalRows:
				c.add(df.Path, "deletes offset %d of a fragment with %d rows", bm.Maximum(), f.PhysicalRows)
			case bm.GetCardinality() >= f.PhysicalRows:
				c.add(fo, "every row deleted but the fragment is still in the manifest")
			}
		}
	}
	first := map[string]*pb.IndexMetadata{} // the first segment of each name
	for _, ix := range m.Indices {
		io := fmt.Sprintf("%s index %s (%s)", obj, ix.Name, ix.Uuid)
		// Segments sharing a name are one logical index: one field, one
		// type. Segments that disagree mix two indices in lookups and in
		// the coverage catch-up proves from.
		if f, seen := first[ix.Name]; !seen {
			first[ix.Name] = ix
		} else if !table.IsSystemIndex(ix) && (f.Type != ix.Type || !slices.Equal(f.FieldIds, ix.FieldIds)) {
			c.add(io, "segments of one logical index disagree: this one is a %s over fields %v, segment %s a %s over fields %v", ix.Type, ix.FieldIds, f.Uuid, f.Type, f.FieldIds)
		}
		if ix.DatasetVersion > m.Version {
			c.add(io, "dataset_version %d is above the version", ix.DatasetVersion)
		}
		if ix.FragmentBitmap != nil {
			bm := roaring.New()
			if err := bm.UnmarshalBinary(ix.FragmentBitmap); err != nil {
				c.add(io, "fragment bitmap does not decode: %v", err)
			} else if !bm.IsEmpty() && (m.MaxFragmentId == nil || bm.Maximum() > *m.MaxFragmentId) {
				c.add(io, "covers fragment %d, which never existed (max_fragment_id %v)", bm.Maximum(), m.GetMaxFragmentId())
			}
		}
		for _, f := range ix.GetScalar().GetFiles() {
			c.file(io, f, 0)
		}
	}
	if fr := table.FragReuse(m); fr != nil {
		if _, err := fri.Compile(fr.Versions); err != nil {
			c.add(obj+" __frag_reuse", "malformed: %v", err)
		}
		for _, v := range fr.Versions {
			rm, err := fri.DecodeBitmap32(v.RemovedFragments)
			if err != nil {
				continue // reported by Compile
			}
			if rm.Intersects(live) {
				c.add(fmt.Sprintf("%s __frag_reuse version %d", obj, v.DatasetVersion), "removed_fragments %v includes live fragments", roaring.And(rm, live).ToArray())
			}
			if v.DatasetVersion > m.Version {
				c.add(fmt.Sprintf("%s __frag_reuse version %d", obj, v.DatasetVersion), "dataset_version above the manifest version")
			}
		}
	}
	if d := table.MemWal(m); d != nil {
		for n, sg := range d.IndexCatchup {
			for s, g := range sg.GetGenerations() {
				if cs := d.CompactedSstables[s]; g > cs {
					c.add(fmt.Sprintf("%s __mem_wal", obj), "index %q caught up to %d on shard %q, above compacted %d", n, g, s, cs)
				}
			}
			if table.FindIndex(m, n) == nil {
				c.add(fmt.Sprintf("%s __mem_wal", obj), "catch-up entry for index %q, which does not exist", n)
			}
		}
	}
}

func (c *checker) chain(prev, m *pb.Manifest) {
	obj := fmt.Sprintf("version %d", m.Version)
	if prev.MaxFragmentId != nil && (m.MaxFragmentId == nil || *m.MaxFragmentId < *prev.MaxFragmentId) {
		c.add(obj, "max_fragment_id %v went below version %d's %d", m.GetMaxFragmentId(), prev.Version, prev.GetMaxFragmentId())
	}
	if m.Version == prev.Version+1 && m.ReadVersion > prev.Version {
		c.add(obj, "read version %d is newer than its parent %d", m.ReadVersion, prev.Version)
	}
	pd, d := table.MemWal(prev), table.MemWal(m)
	if pd != nil && d == nil {
		c.add(obj, "the MemWAL system index disappeared")
	}
	if pd != nil && d != nil {
		for s, g := range pd.CompactedSstables {
			if d.CompactedSstables[s] < g {
				c.add(obj, "compacted_sstables[%s] went from %d to %d", s, g, d.CompactedSstables[s])
			}
		}
	}
}

// memwal checks that no SSTable the latest version or a tagged version
// reads was trimmed, and that every SSTable named exists. (Versions pinned
// only for a while, by the reader grace or an in-flight marker, cannot be
// rechecked after the fact.)
func (c *checker) memwal(tagged []*pb.Manifest, latest *pb.Manifest) {
	d := table.MemWal(latest)
	if d == nil {
		return
	}
	for _, s := range d.Shards {
		sm, err := memwal.ReadShardManifest(c.ctx, c.b, s)
		if err != nil {
			c.add("shard "+s, "manifest does not read: %v", err)
			continue
		}
		if sm == nil {
			continue
		}
		// Rows at or below the bound are in every retained version of the
		// base table. The catch-up part of the trim rule cannot be rechecked
		// after the fact: an index rebuilt later legitimately resets its
		// position to 0 without needing the SSTables back.
		bound, by := d.CompactedSstables[s], fmt.Sprintf("the latest version %d", latest.Version)
		for _, m := range tagged {
			td := table.MemWal(m)
			if td != nil && slices.Contains(td.Shards, s) && td.CompactedSstables[s] < bound {
				bound, by = td.CompactedSstables[s], fmt.Sprintf("tagged version %d", m.Version)
			}
		}
		if sm.TrimmedThroughGeneration > bound {
			c.add("shard "+s, "trimmed through generation %d, but %s merged only through %d", sm.TrimmedThroughGeneration, by, bound)
		}
		for _, sst := range sm.Sstables {
			c.file("shard "+s, sst.Path, sst.Bytes)
			if sst.Generation <= sm.TrimmedThroughGeneration {
				c.add("shard "+s, "lists generation %d at or below trimmed_through_generation %d", sst.Generation, sm.TrimmedThroughGeneration)
			}
		}
	}
}

func (c *checker) uniqueKeys(m *pb.Manifest) {
	seen := map[string]uint64{}
	for _, f := range m.Fragments {
		err := table.ScanFragment(c.ctx, c.b, m.Schema, f, func(off uint32, r table.Row) error {
			k := table.KeyOf(m.Schema, r)
			addr := table.RowAddr(f.Id, off)
			if prev, dup := seen[k]; dup {
				pf, po := table.SplitRowAddr(prev)
				c.add(fmt.Sprintf("version %d fragment %d offset %d", m.Version, f.Id, off), "primary key %s also live at fragment %d offset %d", string(table.RowJSON(m.Schema, r)), pf, po)
			}
			seen[k] = addr
			c.r.Rows++
			return nil
		})
		if err != nil && !storage.IsNotFound(err) && !errors.Is(err, storage.ErrNotFound) {
			c.add(fmt.Sprintf("version %d fragment %d", m.Version, f.Id), "does not scan: %v", err)
		}
	}
}

// unmerged reads the MemWAL data the base table does not hold yet, end to
// end: every WAL entry above a shard's replay cursor and every SSTable of
// a generation not merged. It is acknowledged data that replay, flush and
// merge will need; a damaged or missing piece makes them fail later.
func (c *checker) unmerged(latest *pb.Manifest) {
	d := table.MemWal(latest)
	for _, s := range d.GetShards() {
		obj := "shard " + s
		sm, err := memwal.ReadShardManifest(c.ctx, c.b, s)
		if err != nil || sm == nil {
			continue // reported by memwal
		}
		problems, err := memwal.CheckUnflushed(c.ctx, c.b, latest.Schema, sm)
		if err != nil {
			c.add(obj, "cannot read the WAL: %v", err)
		}
		for _, p := range problems {
			c.add(obj, "unflushed WAL: %v", p)
		}
		for _, sst := range sm.Sstables {
			if sst.Generation <= d.CompactedSstables[s] {
				continue
			}
			var first, last string
			err := memwal.ScanSSTable(c.ctx, c.b, latest.Schema, sst, func(k string, _ memwal.Record) error {
				if first == "" {
					first = k
				}
				last = k
				return nil
			})
			switch {
			case err != nil:
				c.add(sst.Path, "unmerged generation %d of shard %q does not read: %v", sst.Generation, s, err)
			case len(sst.MinKey) > 0 && (first != string(sst.MinKey) || last != string(sst.MaxKey)):
				c.add(sst.Path, "unmerged generation %d of shard %q: keys span %x..%x, the shard manifest records %x..%x", sst.Generation, s, first, last, sst.MinKey, sst.MaxKey)
			}
		}
	}
}
