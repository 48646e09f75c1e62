package model

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// row is one live row as a scan read it.
type row struct {
	id  int64
	s   string
	cat int32
}

// Snapshot is one version read back by compactord's own scan: what the
// model compares with, and what the index check resolves addresses in.
type Snapshot struct {
	Version uint64
	File    *meta.ManifestFile
	// Rows: key → value tag of every live row (a key read twice is an
	// error of ReadSnapshot, never a map overwrite).
	Rows map[int64]string
	// Addrs: row address → the live row there.
	Addrs map[uint64]row
	// Frags: fragment id → the keys of its live rows.
	Frags map[uint64][]int64
}

// ReadSnapshot scans version v (0: the latest) of the table in b.
func ReadSnapshot(ctx context.Context, b storage.Bucket, v uint64) (*Snapshot, error) {
	t, err := scan.Open(ctx, b, scan.Options{Version: v, Columns: []string{"id", "s", "cat"}})
	if err != nil {
		return nil, fmt.Errorf("scan version %d: %w", v, err)
	}
	s := &Snapshot{Version: t.Version(), Rows: map[int64]string{}, Addrs: map[uint64]row{}, Frags: map[uint64][]int64{}}
	_, n, err := meta.Latest(ctx, b)
	if err != nil {
		return nil, err
	}
	if s.File, err = meta.ReadVersion(ctx, b, n, s.Version); err != nil {
		return nil, err
	}
	err = t.Batches(ctx, func(bt *scan.Batch) error {
		ids, cats := bt.Columns[0], bt.Columns[2]
		if ids == nil {
			return fmt.Errorf("fragment %d has no id column", bt.Fragment)
		}
		for _, i := range bt.Live {
			r := row{id: ids.Int64s()[i]}
			if bt.Columns[1] != nil && bt.Columns[1].IsValid(i) {
				r.s = string(bt.Columns[1].Bytes(i))
			}
			if cats != nil && cats.IsValid(i) {
				r.cat = cats.Int32s()[i]
			}
			if _, dup := s.Rows[r.id]; dup {
				return fmt.Errorf("version %d: key %d is live twice (the second in fragment %d)", s.Version, r.id, bt.Fragment)
			}
			s.Rows[r.id] = r.s
			s.Addrs[meta.RowAddr(uint32(bt.Fragment), uint32(bt.Offset)+uint32(i))] = r
			s.Frags[bt.Fragment] = append(s.Frags[bt.Fragment], r.id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan version %d: %w", s.Version, err)
	}
	return s, nil
}

// ReadGeneration reads a flushed generation (a Lance dataset of its own):
// key → value tag, and the keys it tombstones.
func ReadGeneration(ctx context.Context, b storage.Bucket, shard string, t *pb.SsTable) (rows map[int64]string, tombs map[int64]bool, err error) {
	gb := storage.Sub(b, memwal.GenerationDir(shard, t.GetPath()))
	st, err := scan.Open(ctx, gb, scan.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("generation %d of shard %s: %w", t.GetGeneration(), shard, err)
	}
	col := map[string]int{}
	for i, c := range st.Columns {
		col[c.Name] = i
	}
	idc, ok1 := col["id"]
	sc, ok2 := col["s"]
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("generation %d of shard %s: no id or s column", t.GetGeneration(), shard)
	}
	tc, hasTomb := col["_tombstone"]
	rows, tombs = map[int64]string{}, map[int64]bool{}
	err = st.Batches(ctx, func(bt *scan.Batch) error {
		for _, i := range bt.Live {
			id := bt.Columns[idc].Int64s()[i]
			if _, dup := rows[id]; dup || tombs[id] {
				return fmt.Errorf("key %d is live twice", id)
			}
			if hasTomb && bt.Columns[tc] != nil && bt.Columns[tc].IsValid(i) && bt.Columns[tc].Bool(i) {
				tombs[id] = true
				continue
			}
			var s string
			if a := bt.Columns[sc]; a != nil && a.IsValid(i) {
				s = string(a.Bytes(i))
			}
			rows[id] = s
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("generation %d of shard %s: %w", t.GetGeneration(), shard, err)
	}
	return rows, tombs, nil
}

// MemWAL is what one version's MemWAL index records.
type MemWAL struct {
	Compacted  map[string]uint64
	Catchup    map[string]map[string]uint64
	Maintained []string
}

// MemWALOf reads the MemWAL index of a manifest (zero without one).
func MemWALOf(f *meta.ManifestFile) (MemWAL, error) {
	ix := memwal.Index(f.Indices)
	if ix == nil {
		return MemWAL{Compacted: map[string]uint64{}, Catchup: map[string]map[string]uint64{}}, nil
	}
	d, err := memwal.Details(ix)
	if err != nil {
		return MemWAL{}, err
	}
	return MemWAL{Compacted: memwal.Compacted(d), Catchup: memwal.Catchup(d), Maintained: d.GetMaintainedIndexes()}, nil
}

// Floor is, per shard, the generation below which (inclusive) this
// version's LSM view no longer reads a generation and every maintained
// index covers it: min(compacted, catch-up of each maintained index).
func (m MemWAL) Floor(shard string) uint64 {
	f := m.Compacted[shard]
	for _, name := range m.Maintained {
		f = min(f, m.Catchup[name][shard])
	}
	return f
}

// CheckIndices checks every scalar index of snapshot s against its scan:
// each entry whose address holds a live row carries that row's value,
// and each live row of a fragment in an index's bitmap is in one of its
// segments. It returns one message per disagreement.
func CheckIndices(ctx context.Context, b storage.Bucket, s *Snapshot) ([]string, error) {
	var bad []string
	// A deferred compaction leaves segments on the old addresses, which
	// readers map through the fragment-reuse index (every version, as
	// LanceDB does at index load).
	fx, err := fri.Load(ctx, b, s.File)
	if err != nil {
		return nil, fmt.Errorf("the fragment-reuse index: %w", err)
	}
	remap := fx.Remapper(0)
	physical := map[uint32]uint64{}
	for _, f := range s.File.Manifest.GetFragments() {
		physical[uint32(f.GetId())] = f.GetPhysicalRows()
	}
	full := func(frag uint32) (uint64, bool) {
		if n, ok := physical[frag]; ok {
			return n, true
		}
		return fx.PhysicalRows(frag)
	}
	type idx struct {
		column  string
		covered *roaring.Bitmap
		seen    map[uint64]bool
	}
	byName := map[string]*idx{}
	for _, ix := range s.File.Indices {
		if meta.IsSystemIndex(ix) {
			continue
		}
		kind := meta.IndexKind(ix)
		if kind != index.KindBTree && kind != index.KindBitmap {
			continue
		}
		if len(ix.GetFields()) != 1 {
			bad = append(bad, fmt.Sprintf("index %s segment %s has fields %v", ix.GetName(), meta.UUIDString(ix.GetUuid()), ix.GetFields()))
			continue
		}
		col := fieldName(s.File.Manifest, ix.GetFields()[0])
		x := byName[ix.GetName()]
		if x == nil {
			x = &idx{column: col, covered: roaring.New(), seen: map[uint64]bool{}}
			byName[ix.GetName()] = x
		}
		if bm := fx.RemapBitmap(ix); bm != nil {
			x.covered.Or(bm)
		}
		e, err := readSegment(ctx, b, ix, kind, full)
		if err != nil {
			return nil, fmt.Errorf("index %s segment %s: %w", ix.GetName(), meta.UUIDString(ix.GetUuid()), err)
		}
		for i, old := range e.Addrs {
			addr, ok := remap(old)
			if !ok {
				continue // deleted by the compaction that moved it
			}
			x.seen[addr] = true
			r, live := s.Addrs[addr]
			if !live {
				continue // a deleted row: readers filter it out
			}
			got, want := value(e.Values, i), int64(r.id)
			if col == "cat" {
				want = int64(r.cat)
			}
			if got != want {
				bad = append(bad, fmt.Sprintf("index %s (%s) maps %d to row %x, which holds %s = %d", ix.GetName(), col, got, addr, col, want))
			}
		}
	}
	for _, name := range slices.Sorted(mapsKeys(byName)) {
		x := byName[name]
		missing := 0
		var first uint64
		for addr := range s.Addrs {
			frag, _ := meta.SplitRowAddr(addr)
			if x.covered.Contains(frag) && !x.seen[addr] {
				if missing == 0 || addr < first {
					first = addr
				}
				missing++
			}
		}
		if missing > 0 {
			bad = append(bad, fmt.Sprintf("index %s covers the fragments of %d live rows it has no entry for (row %x first)", name, missing, first))
		}
	}
	return bad, nil
}

// Unindexed counts the live rows of s in fragments no segment of index
// name covers.
func Unindexed(ctx context.Context, b storage.Bucket, s *Snapshot, name string) (int, error) {
	fx, err := fri.Load(ctx, b, s.File)
	if err != nil {
		return 0, err
	}
	covered := roaring.New()
	for _, ix := range meta.FindIndex(s.File.Indices, name) {
		if bm := fx.RemapBitmap(ix); bm != nil {
			covered.Or(bm)
		}
	}
	n := 0
	for addr := range s.Addrs {
		if frag, _ := meta.SplitRowAddr(addr); !covered.Contains(frag) {
			n++
		}
	}
	return n, nil
}

func readSegment(ctx context.Context, b storage.Bucket, ix *pb.IndexMetadata, kind string, full func(uint32) (uint64, bool)) (*index.Entries, error) {
	dir := meta.IndexDir(meta.UUIDString(ix.GetUuid()))
	open := func(name string) (index.Reader, error) {
		key := dir + name
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return index.Reader{}, err
		}
		return index.Reader{R: storage.NewReaderAt(ctx, b, key, a.Size), Size: a.Size}, nil
	}
	if kind == index.KindBTree {
		d, err := open(index.BTreeDataFile)
		if err != nil {
			return nil, err
		}
		l, err := open(index.BTreeLookupFile)
		if err != nil {
			return nil, err
		}
		bt, err := index.ReadBTree(d, l)
		if err != nil {
			return nil, err
		}
		return bt.Entries, nil
	}
	r, err := open(index.BitmapLookupFile)
	if err != nil {
		return nil, err
	}
	bm, err := index.ReadBitmap(r)
	if err != nil {
		return nil, err
	}
	return bm.Entries(full)
}

// value reads an integer index value (the model's indexes are on int64
// and int32 columns).
func value(a *file.Array, i int) int64 {
	switch a.Type.ByteWidth() {
	case 4:
		return int64(a.Int32s()[i])
	default:
		return a.Int64s()[i]
	}
}

func fieldName(m *pb.Manifest, id int32) string {
	for _, f := range m.GetFields() {
		if f.GetId() == id {
			return f.GetName()
		}
	}
	return fmt.Sprintf("field#%d", id)
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

type pbSsTable = pb.SsTable

func cmpU(a, b uint64) int { return cmp.Compare(a, b) }
