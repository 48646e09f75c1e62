package fri

import (
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// maxFragmentRows is the most physical rows a fragment can have: offsets
// are the low 32 bits of an address.
const maxFragmentRows = 1 << 32

// Chain is a validated, compiled FRI version chain (oldest to newest). It
// is immutable after compile and safe for concurrent use.
type Chain struct {
	versions []version
}

// version is one compiled Version.
type version struct {
	datasetVersion uint64
	// Lookup of the fragments the version touches (old fragments of its
	// groups and removed fragments), by id. dense[id-minID] is an index
	// into frags or -1; when the ids are too spread out for a dense table,
	// dense is nil and ids (ascending, parallel to frags) is searched.
	minID, maxID uint32
	dense        []int32
	ids          []uint32
	frags        []touched
	// Arenas the entries of frags point into.
	blocks []rankBlock
	lists  []uint32
	dirs   []uint32
	splits []split
	// For the load-time coverage remap.
	groups  []group
	removed *roaring.Bitmap
}

// touched is one fragment a version touches, laid out to fit a cache line.
type touched struct {
	// base is the group rank of the fragment's first survivor: the
	// survivors of the group's old fragments with smaller ids.
	base uint64
	// newStart and newID: when all of the fragment's survivors land in one
	// new fragment (newHi-newLo == 1), the group rank where that fragment
	// starts and its id, so the common case reads no split.
	newStart uint64
	newID    uint32
	// at: the fragment's first rank block (kindDense) or its first bucket
	// in dirs (list kinds).
	at uint32
	// lastOff is physical_rows-1; a larger offset is not a row.
	lastOff uint32
	// newLo, newHi: the new fragments the survivors land in, in splits.
	newLo, newHi uint32
	kind         survivorKind
}

// split is one new fragment: the group rank of its first row and its id.
type split struct {
	start uint64
	id    uint32
}

// group keeps a group's fragment sets for the load-time coverage remap.
type group struct {
	oldSet, newSet *roaring.Bitmap
}

// maxDirSlots bounds the list directories of one version (256 MiB; 2^38
// physical rows, far more than a compaction rewrites).
const maxDirSlots = 1 << 26

// denseSlotsPerFragment and denseSlack bound how sparse the dense id table
// may be before falling back to binary search.
const (
	denseSlotsPerFragment = 8
	denseSlack            = 1024
)

// compile validates versions (oldest to newest) and builds the lookup
// structures remap needs. It returns an ErrCorrupt error, never a panic,
// on a version that contradicts itself:
//   - dataset_version decreasing along the chain;
//   - a fragment id that does not fit in 32 bits;
//   - a group with no old fragments;
//   - an old fragment in two groups of one version, or in a group and in
//     Removed;
//   - a new fragment id listed twice, or also listed as old or removed;
//   - a surviving address outside the group's old fragments or past its
//     fragment's physical_rows;
//   - a group whose survivor count differs from the sum of its new
//     fragments' physical_rows (Lance would map the excess survivors to
//     nothing, or leave new rows no old row maps to).
func compile(versions []Version) (*Chain, error) {
	c := &Chain{versions: make([]version, 0, len(versions))}
	for i := range versions {
		pv := &versions[i]
		if i > 0 && pv.DatasetVersion < versions[i-1].DatasetVersion {
			return nil, corruptf("version %d: dataset_version %d precedes %d", i, pv.DatasetVersion, versions[i-1].DatasetVersion)
		}
		v, err := compileVersion(pv, true)
		if err != nil {
			return nil, wrapf(err, "fri version %d (dataset_version %d)", i, pv.DatasetVersion)
		}
		c.versions = append(c.versions, v)
	}
	return c, nil
}

// compileVersion checks pv and, when build is set, builds its lookup
// tables (a check alone skips the rank blocks and lists, which cost as much
// as the compaction's own row bookkeeping on a large version).
func compileVersion(pv *Version, build bool) (version, error) {
	v := version{datasetVersion: pv.DatasetVersion, removed: roaring.New()}
	if pv.Removed != nil {
		v.removed.Or(pv.Removed)
	}
	slot := map[uint32]int32{} // fragment id -> index into frags
	newIDs := roaring.New()
	for gi := range pv.Groups {
		pg := &pv.Groups[gi]
		g, err := v.compileGroup(pg, slot, v.removed, build)
		if err != nil {
			return v, wrapf(err, "group %d", gi)
		}
		if newIDs.Intersects(g.newSet) || g.newSet.GetCardinality() != uint64(len(pg.New)) {
			return v, corruptf("group %d: a new fragment id is listed twice", gi)
		}
		newIDs.Or(g.newSet)
		v.groups = append(v.groups, g)
	}
	for id := range slot {
		if newIDs.Contains(id) {
			return v, corruptf("fragment %d is both old and new", id)
		}
	}
	if v.removed.Intersects(newIDs) {
		return v, corruptf("a new fragment is also removed")
	}
	it := v.removed.Iterator()
	for it.HasNext() {
		slot[it.Next()] = int32(len(v.frags))
		v.frags = append(v.frags, touched{kind: kindRemoved})
	}
	if uint64(len(v.blocks)) > 1<<32-1 || uint64(len(v.lists)) > 1<<32-1 || uint64(len(v.dirs)) > 1<<32-1 {
		return v, corruptf("version too large to compile")
	}
	if build {
		v.buildLookup(slot)
	}
	return v, nil
}

// compileGroup appends the group's old fragments to v.frags (recording them
// in slot) and its new fragments to v.splits.
func (v *version) compileGroup(pg *Group, slot map[uint32]int32, removed *roaring.Bitmap, build bool) (group, error) {
	g := group{oldSet: roaring.New(), newSet: roaring.New()}
	if len(pg.Old) == 0 {
		return g, corruptf("no old fragments")
	}
	// Lance ranks survivors in ascending address order, so by old
	// fragment id whatever order the digests are listed in.
	olds := slices.Clone(pg.Old)
	slices.SortFunc(olds, func(a, b Digest) int { return cmpU64(a.ID, b.ID) })
	oldRows := map[uint32]uint64{}
	for _, d := range olds {
		if d.ID > 1<<32-1 {
			return g, corruptf("old fragment id %d does not fit in a row address", d.ID)
		}
		id := uint32(d.ID)
		if !g.oldSet.CheckedAdd(id) {
			return g, corruptf("old fragment %d listed twice", id)
		}
		if _, dup := slot[id]; dup {
			return g, corruptf("old fragment %d is in two groups", id)
		}
		if removed.Contains(id) {
			return g, corruptf("fragment %d is both an old fragment and removed", id)
		}
		if d.PhysicalRows > maxFragmentRows {
			return g, corruptf("old fragment %d has %d physical rows", id, d.PhysicalRows)
		}
		oldRows[id] = d.PhysicalRows
	}
	firstSplit := len(v.splits)
	var total uint64
	for _, d := range pg.New {
		if d.ID > 1<<32-1 {
			return g, corruptf("new fragment id %d does not fit in a row address", d.ID)
		}
		if d.PhysicalRows > maxFragmentRows {
			return g, corruptf("new fragment %d has %d physical rows", d.ID, d.PhysicalRows)
		}
		g.newSet.Add(uint32(d.ID))
		v.splits = append(v.splits, split{start: total, id: uint32(d.ID)})
		total += d.PhysicalRows
	}
	splits := v.splits[firstSplit:]

	byFrag := map[uint32]*roaring.Bitmap{}
	var count uint64
	for _, b := range bucketsOf(pg.Changed) {
		rows, ok := oldRows[b.key]
		if !ok {
			return g, corruptf("surviving address in fragment %d, which is not an old fragment of the group", b.key)
		}
		if uint64(b.bm.Maximum()) >= rows {
			return g, corruptf("surviving offset %d in fragment %d, which has %d physical rows", b.bm.Maximum(), b.key, rows)
		}
		byFrag[b.key] = b.bm
		count += b.bm.GetCardinality()
	}
	if count != total {
		return g, corruptf("%d surviving rows but new fragments hold %d", count, total)
	}

	var base uint64
	for _, d := range olds {
		id, rows := uint32(d.ID), d.PhysicalRows
		surv := byFrag[id]
		var card uint64
		if surv != nil {
			card = surv.GetCardinality()
		}
		t := touched{kind: chooseKind(rows, card), base: base}
		if rows > 0 {
			t.lastOff = uint32(rows - 1)
		}
		// A list's directory costs a slot per 4096 physical rows whatever
		// the list's length, so hostile digests claiming 2^32 rows for a
		// fragment with one survivor must not make it allocate gigabytes.
		if (t.kind == kindDeletedList || t.kind == kindSurvivorList) && uint64(len(v.dirs))+rows>>bucketBits > maxDirSlots {
			return g, corruptf("version covers more than %d physical rows", uint64(maxDirSlots)<<bucketBits)
		}
		switch {
		case !build:
		case t.kind == kindDense:
			t.at = uint32(len(v.blocks))
			v.blocks = appendBlocks(v.blocks, rows, surv)
		case t.kind == kindDeletedList:
			t.at = uint32(len(v.dirs))
			v.lists, v.dirs = appendList(v.lists, v.dirs, rows, roaring.Flip(surv, 0, rows).ToArray())
		case t.kind == kindSurvivorList:
			t.at = uint32(len(v.dirs))
			v.lists, v.dirs = appendList(v.lists, v.dirs, rows, surv.ToArray())
		}
		if card > 0 {
			// The new fragments holding group ranks [base, base+card):
			// the last one starting at or before base, through the last
			// one starting before base+card.
			lo, hi := lastStartAtOrBefore(splits, base), lastStartAtOrBefore(splits, base+card-1)+1
			t.newLo, t.newHi = uint32(firstSplit+lo), uint32(firstSplit+hi)
			if hi-lo == 1 {
				t.newStart, t.newID = splits[lo].start, splits[lo].id
			}
		}
		slot[id] = int32(len(v.frags))
		v.frags = append(v.frags, t)
		base += card
	}
	return g, nil
}

// lastStartAtOrBefore returns the index of the last split starting at or
// before rank r. Zero-row new fragments start where their successor does,
// so they are never chosen. REQUIRES: r < the group's total rows.
func lastStartAtOrBefore(splits []split, r uint64) int {
	lo, hi := 0, len(splits)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if splits[m].start <= r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

func (v *version) buildLookup(slot map[uint32]int32) {
	if len(slot) == 0 {
		return
	}
	first := true
	for id := range slot {
		if first || id < v.minID {
			v.minID = id
		}
		if first || id > v.maxID {
			v.maxID = id
		}
		first = false
	}
	span := uint64(v.maxID-v.minID) + 1
	if span <= uint64(len(slot))*denseSlotsPerFragment+denseSlack {
		v.dense = make([]int32, span)
		for i := range v.dense {
			v.dense[i] = -1
		}
		for id, i := range slot {
			v.dense[id-v.minID] = i
		}
		return
	}
	// Sparse: reorder frags by id so ids and frags stay parallel.
	ids := make([]uint32, 0, len(slot))
	for id := range slot {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	frags := make([]touched, len(ids))
	for k, id := range ids {
		frags[k] = v.frags[slot[id]]
	}
	v.ids, v.frags = ids, frags
}

// find returns the entry for fragment id, or nil when the version leaves
// it alone.
func (v *version) find(id uint32) *touched {
	if id < v.minID || id > v.maxID || len(v.frags) == 0 {
		return nil
	}
	if v.dense != nil {
		if i := v.dense[id-v.minID]; i >= 0 {
			return &v.frags[i]
		}
		return nil
	}
	if i := lowerBound(v.ids, id); i < len(v.ids) && v.ids[i] == id {
		return &v.frags[i]
	}
	return nil
}

// start returns the index of the first version with dataset_version >=
// since.
func (c *Chain) start(since uint64) int {
	lo, hi := 0, len(c.versions)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.versions[m].datasetVersion < since {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
