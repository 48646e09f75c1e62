package index

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Liveness answers whether a row address is live in one manifest: its
// fragment is in the manifest, and its offset is below physical_rows and
// not in the fragment's deletion file. Deletion files are read on first use.
// Not safe for concurrent use.
type Liveness struct {
	ctx   context.Context
	b     storage.Bucket
	frags map[uint32]*pb.Fragment
	dels  map[uint32]*roaring.Bitmap
}

// NewLiveness returns the liveness of m's rows.
func NewLiveness(ctx context.Context, b storage.Bucket, m *pb.Manifest) *Liveness {
	l := &Liveness{ctx: ctx, b: b, frags: make(map[uint32]*pb.Fragment, len(m.Fragments)), dels: map[uint32]*roaring.Bitmap{}}
	for _, f := range m.Fragments {
		l.frags[f.Id] = f
	}
	return l
}

// Filter clears ok[i] for every address that is not live.
func (l *Liveness) Filter(addrs []uint64, ok []bool) error {
	for i, a := range addrs {
		if !ok[i] {
			continue
		}
		id, off := table.SplitRowAddr(a)
		f := l.frags[id]
		if f == nil || uint64(off) >= f.PhysicalRows {
			ok[i] = false
			continue
		}
		if f.DeletionFile == nil {
			continue
		}
		del, found := l.dels[id]
		if !found {
			var err error
			if del, err = table.ReadDeletionFile(l.ctx, l.b, f.DeletionFile); err != nil {
				return fmt.Errorf("fragment %d: %w", id, err)
			}
			l.dels[id] = del
		}
		if del.Contains(off) {
			ok[i] = false
		}
	}
	return nil
}

// mapper translates one segment's stored addresses into addresses of the
// manifest being read or written, in place, clearing ok for rows that are
// gone. Stages, in order:
//  1. the FRI chain, only the versions newer than the segment's data;
//  2. liveness in the manifest (dead fragment or deleted offset: gone);
//  3. rowMap, a compaction's own row map (inline remap), when set;
//  4. cover: addresses outside the new segment's fragment bitmap are
//     dropped, so a segment never holds rows its bitmap does not claim.
type mapper struct {
	chain  *fri.Chain
	segDV  uint64
	live   *Liveness
	rowMap *fri.Chain
	cover  *roaring.Bitmap
	tmpOK  []bool
}

func (mp *mapper) apply(addrs []uint64, ok []bool) error {
	if cap(mp.tmpOK) < len(addrs) {
		mp.tmpOK = make([]bool, len(addrs))
	}
	t := mp.tmpOK[:len(addrs)]
	and := func() {
		for i := range ok {
			ok[i] = ok[i] && t[i]
		}
	}
	if mp.chain != nil && mp.chain.Len() > 0 {
		mp.chain.RemapBatch(addrs, addrs, t, mp.segDV)
		and()
	}
	if mp.live != nil {
		if err := mp.live.Filter(addrs, ok); err != nil {
			return err
		}
	}
	if mp.rowMap != nil {
		mp.rowMap.RemapBatch(addrs, addrs, t, 0)
		and()
	}
	if mp.cover != nil {
		for i, a := range addrs {
			if ok[i] && !mp.cover.Contains(uint32(a>>32)) {
				ok[i] = false
			}
		}
	}
	return nil
}

// RewriteSpec says how Rewrite translates the addresses of the segments it
// reads into the new segment.
type RewriteSpec struct {
	// Chain is the compiled FRI of the manifest (nil: none). Each segment's
	// addresses go through the versions newer than its dataset_version.
	Chain *fri.Chain
	// RowMap, when set, is applied after the FRI and liveness: the row map
	// of a compaction that commits the new segment with it (inline remap).
	RowMap *fri.Chain
	// Cover is the new segment's fragment bitmap. Entries outside it are
	// dropped (they fall back to a scan or a catch-up).
	Cover *roaring.Bitmap
}

// Rewrite writes one new segment with the entries of segs (segments of one
// logical index) as they are in manifest m: remapped, rows not live in m
// dropped, duplicates removed. The new segment has a new uuid and
// dataset_version = m.Version. Nothing is committed.
func Rewrite(ctx context.Context, b storage.Bucket, m *pb.Manifest, segs []*pb.IndexMetadata, rs RewriteSpec, cfg BuildConfig) (*pb.IndexMetadata, error) {
	if len(segs) == 0 {
		return nil, fmt.Errorf("rewrite: no segments")
	}
	name, typ := segs[0].Name, segs[0].Type
	field, err := fieldOf(m.Schema, segs[0])
	if err != nil {
		return nil, err
	}
	for _, s := range segs[1:] {
		if s.Name != name || s.Type != typ || !slices.Equal(s.FieldIds, segs[0].FieldIds) {
			return nil, fmt.Errorf("rewrite: segments of %q disagree on name, type or field", name)
		}
	}
	cover := rs.Cover
	if cover == nil {
		cover = roaring.New()
	}
	id := uuid.NewString()
	w, err := newSegWriter(ctx, b, typ, id, cfg)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			w.abort()
		}
	}()
	live := NewLiveness(ctx, b, m)
	mappers := make([]*mapper, len(segs))
	for i, s := range segs {
		mappers[i] = &mapper{chain: rs.Chain, segDV: s.DatasetVersion, live: live, rowMap: rs.RowMap, cover: cover}
	}
	switch typ {
	case TypeBTree:
		err = mergeBTrees(ctx, b, segs, mappers, w)
	case TypeBitmap:
		err = mergeBitmaps(ctx, b, segs, mappers, w)
	default:
		err = corruptf("segment %s of %q has unknown type %q", segs[0].Uuid, name, typ)
	}
	if err != nil {
		return nil, fmt.Errorf("rewrite index %q: %w", name, err)
	}
	file, n, size, err := w.finish(ctx)
	if err != nil {
		return nil, fmt.Errorf("rewrite index %q: %w", name, err)
	}
	done = true
	return newMeta(name, typ, id, field, m.Version, cover.Clone(), file, n, size)
}

// mcursor is a btree cursor whose entries are mapped batch by batch.
type mcursor struct {
	c    btreeCursor
	mp   *mapper
	ok   []bool
	pos  int
	done bool
}

// settle moves to the next entry that survived mapping, loading batches.
func (m *mcursor) settle() error {
	for {
		for m.pos < m.c.keys.len() && !m.ok[m.pos] {
			m.pos++
		}
		if m.pos < m.c.keys.len() {
			return nil
		}
		more, err := m.c.nextBatch()
		if err != nil {
			return err
		}
		if !more {
			m.done = true
			return nil
		}
		m.ok = slices.Grow(m.ok[:0], len(m.c.addrs))[:len(m.c.addrs)]
		for i := range m.ok {
			m.ok[i] = true
		}
		if err := m.mp.apply(m.c.addrs, m.ok); err != nil {
			return err
		}
		m.pos = 0
	}
}

func mergeBTrees(ctx context.Context, b storage.Bucket, segs []*pb.IndexMetadata, mappers []*mapper, w segWriter) error {
	cur := make([]*mcursor, 0, len(segs))
	for i, s := range segs {
		file, err := segmentFile(s)
		if err != nil {
			return err
		}
		t, err := openBTree(ctx, b, file)
		if err != nil {
			return err
		}
		defer t.Close()
		c := &mcursor{c: btreeCursor{t: t}, mp: mappers[i]}
		if err := c.settle(); err != nil {
			return err
		}
		cur = append(cur, c)
	}
	var key []byte
	var addrs []uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		first := true
		for _, c := range cur {
			if c.done {
				continue
			}
			if k := c.c.keys.get(c.pos); first || bytes.Compare(k, key) < 0 {
				key, first = append(key[:0], k...), false
			}
		}
		if first {
			return nil
		}
		addrs = addrs[:0]
		for _, c := range cur {
			for !c.done && bytes.Equal(c.c.keys.get(c.pos), key) {
				addrs = append(addrs, c.c.addrs[c.pos])
				c.pos++
				if err := c.settle(); err != nil {
					return err
				}
			}
		}
		slices.Sort(addrs)
		addrs = slices.Compact(addrs)
		if err := w.add(key, addrs); err != nil {
			return err
		}
	}
}

func mergeBitmaps(ctx context.Context, b storage.Bucket, segs []*pb.IndexMetadata, mappers []*mapper, w segWriter) error {
	var ok []bool
	for i, s := range segs {
		file, err := segmentFile(s)
		if err != nil {
			return err
		}
		es, err := readBitmapFile(ctx, b, file)
		if err != nil {
			return err
		}
		for _, e := range es {
			addrs := e.bm.ToArray()
			ok = slices.Grow(ok[:0], len(addrs))[:len(addrs)]
			for j := range ok {
				ok[j] = true
			}
			if err := mappers[i].apply(addrs, ok); err != nil {
				return err
			}
			n := 0
			for j, a := range addrs {
				if ok[j] {
					addrs[n] = a
					n++
				}
			}
			if n == 0 {
				continue
			}
			if err := w.add(e.key, addrs[:n]); err != nil {
				return err
			}
		}
	}
	return nil
}
