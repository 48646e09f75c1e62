package index

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index/content"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
)

// ContentCheck is what CheckContent found in one logical index.
type ContentCheck = content.Check

// ContentChecker is CheckContent of every index, the hook
// verify.Options.IndexContent takes.
func ContentChecker(ctx context.Context, b storage.Bucket, read *meta.ManifestFile) ([]ContentCheck, error) {
	return CheckContent(ctx, b, read, nil)
}

// segmentCounts accumulates one segment's disagreements, per fragment.
type segmentCounts struct {
	uncovered map[uint32]int // entries in a live fragment the segment does not cover
	missing   map[uint32]int // live rows of a covered fragment without an entry
	wrong     map[uint32]int // entries whose value is not the row's
	dup       map[uint32]int // addresses listed more than once
	beyond    map[uint32]int // offsets past the fragment's physical rows
	// labelMissing: live rows of a label list lacking the entry of one of
	// their labels.
	labelMissing map[uint32]int
	// listNulls: live rows whose list is null but the segment's null
	// lists lack them, or the other way round.
	listNulls map[uint32]int
	example   map[string]string
}

func newSegmentCounts() *segmentCounts {
	return &segmentCounts{uncovered: map[uint32]int{}, missing: map[uint32]int{}, wrong: map[uint32]int{},
		dup: map[uint32]int{}, beyond: map[uint32]int{}, labelMissing: map[uint32]int{}, listNulls: map[uint32]int{}, example: map[string]string{}}
}

// CheckContent compares the indexes of read with the data of read. For a
// btree or bitmap index, each segment's entries, with their row addresses
// passed through the version's fragment-reuse index as a reader applies
// it, must be exactly the live rows of the live fragments the segment
// covers (its fragment bitmap through the same FRI), each with the row's
// value. An
// entry whose row was deleted since (a deletion vector, or a fragment no
// longer in the version) is masked by readers and is no problem; an entry
// in a live fragment the segment does not cover, a wrong value, a repeated
// address, an offset past the fragment's end, and a covered live row
// without an entry are. Two segments of one index covering the same live
// fragment are a problem too (readers would answer its rows twice).
//
// A label-list entry is a (label, row) pair: each live row of a covered
// fragment must be under exactly the labels its list holds. Vector and
// full-text segments are read for their row ids only (_rowid of
// auxiliary.idx, of part_{p}_docs.lance): the same address rules, no value
// compared, and a live row without an entry is a problem only for a vector
// index and a non-null vector (which rows have tokens depends on the
// tokenizer).
//
// Memory: one segment's entries at a time (segments are read whole, as
// remap and catch-up read them), their addresses sorted once, and one
// decoded batch of the indexed column: the data is read fragment by
// fragment and merged with the sorted entries, never collected.
//
// Other kinds of index are listed with Checked false and the reason.
// names selects indexes (nil: all). The error is for a version it could
// not read (an FRI that does not load, a storage failure).
func CheckContent(ctx context.Context, b storage.Bucket, read *meta.ManifestFile, names []string) ([]ContentCheck, error) {
	m := read.Manifest
	idx, err := fri.Load(ctx, b, read)
	if err != nil {
		return nil, err
	}
	var order []string
	for _, ix := range read.Indices {
		if !meta.IsSystemIndex(ix) && !slices.Contains(order, ix.GetName()) {
			if names == nil || slices.Contains(names, ix.GetName()) {
				order = append(order, ix.GetName())
			}
		}
	}
	slices.Sort(order)
	live := map[uint32]*pb.DataFragment{}
	for _, f := range m.GetFragments() {
		live[uint32(f.GetId())] = f
	}
	byID := map[int32]*pb.Field{}
	for _, f := range m.GetFields() {
		byID[f.GetId()] = f
	}
	// One manifest without fragments, given one fragment at a time to the
	// scanner.
	one := proto.Clone(m).(*pb.Manifest)
	one.Fragments = nil
	full := func(frag uint32) (uint64, bool) {
		if f := live[frag]; f != nil {
			return f.GetPhysicalRows(), true
		}
		return idx.PhysicalRows(frag)
	}
	// Progress: the rows of covered fragments read, index after index (no
	// total: it is known only segment by segment).
	progress.From(ctx).Start("verify index content", progress.Units{})
	var out []ContentCheck
	for _, name := range order {
		segs := meta.FindIndex(read.Indices, name)
		cc := ContentCheck{Name: name, Kind: meta.IndexKind(segs[0]), Problems: []string{}}
		reason := ""
		switch {
		case m.GetReaderFeatureFlags()&meta.FlagStableRowIDs != 0:
			reason = "the table has stable row ids (indexes hold row ids, not addresses)"
		case cc.Kind != KindBTree && cc.Kind != KindBitmap && cc.Kind != KindLabelList && cc.Kind != KindVector && cc.Kind != KindInverted:
			reason = fmt.Sprintf("compactord cannot read the content of %s indexes", cc.Kind)
		case len(segs[0].GetFields()) != 1:
			reason = fmt.Sprintf("indexes %d fields", len(segs[0].GetFields()))
		}
		var field *pb.Field
		var typ file.DataType
		if reason == "" {
			field = byID[segs[0].GetFields()[0]]
			switch {
			case field == nil || field.GetParentId() != -1:
				reason = fmt.Sprintf("field %d is not a top-level field of the schema", segs[0].GetFields()[0])
			case !knownLayout(cc.Kind, segs):
				// A layout other than LanceDB 0.39's (e.g. a range-
				// partitioned btree's part files): not a damaged index.
				reason = fmt.Sprintf("a segment's files (%s) are not the %s layout compactord reads", segmentFiles(segs), cc.Kind)
			case cc.Kind == KindLabelList:
				// The list's type is checked against the segment's keys
				// as the data decodes.
			case cc.Kind == KindVector || cc.Kind == KindInverted:
				for _, sg := range segs {
					if len(rowIDFiles(cc.Kind, sg)) == 0 {
						reason = fmt.Sprintf("segment %s lists no %s", meta.UUIDString(sg.GetUuid()), rowIDFileNames[cc.Kind])
						break
					}
				}
				cc.Note = rowIDNotes[cc.Kind]
			default:
				if typ, err = fieldType(field); err != nil {
					reason = err.Error()
				}
			}
		}
		if reason != "" {
			cc.Reason = reason
			out = append(out, cc)
			continue
		}
		cc.Checked = true
		owner := map[uint32]string{} // live fragment → the segment covering it
		for _, s := range segs {
			sid := meta.UUIDString(s.GetUuid())
			if meta.IndexKind(s) != cc.Kind {
				cc.Problems = append(cc.Problems, fmt.Sprintf("segment %s is a %s index, the others %s", sid, meta.IndexKind(s), cc.Kind))
				continue
			}
			cov := idx.RemapBitmap(s)
			if cov == nil {
				cc.Problems = append(cc.Problems, fmt.Sprintf("segment %s has no fragment bitmap: its coverage is unknown", sid))
				continue
			}
			for it := cov.Iterator(); it.HasNext(); {
				frag := it.Next()
				if live[frag] == nil {
					continue
				}
				if o, ok := owner[frag]; ok {
					cc.Problems = append(cc.Problems, fmt.Sprintf("segments %s and %s both cover fragment %d", o, sid, frag))
				}
				owner[frag] = sid
			}
			cc.Segments++
			sc := newSegmentCounts()
			var n, masked uint64
			switch cc.Kind {
			case KindLabelList:
				n, masked, err = checkLabelSegment(ctx, b, one, field, s, full, idx.Remapper(0), cov, live, sc)
			case KindVector, KindInverted:
				n, masked, err = checkRowIDSegment(ctx, b, one, field, s, rowIDFiles(cc.Kind, s), rowIDNeed[cc.Kind], idx.Remapper(0), cov, live, sc)
			default:
				n, masked, err = checkScalarSegment(ctx, b, one, field, typ, s, full, idx.Remapper(0), cov, live, sc)
			}
			cc.Entries += n
			cc.Masked += masked
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				var ue unreadableError
				if !errors.As(err, &ue) {
					return nil, fmt.Errorf("index %s segment %s: %w", name, sid, err)
				}
				cc.Problems = append(cc.Problems, fmt.Sprintf("segment %s %v", sid, err))
				continue
			}
			cc.Problems = append(cc.Problems, sc.lines(sid)...)
		}
		out = append(out, cc)
	}
	return out, nil
}

// lines renders the counts, one line per kind of problem.
func (sc *segmentCounts) lines(sid string) []string {
	var out []string
	add := func(counts map[uint32]int, kind, what string) {
		if len(counts) == 0 {
			return
		}
		frags := slices.Sorted(func(yield func(uint32) bool) {
			for f := range counts {
				if !yield(f) {
					return
				}
			}
		})
		total := 0
		for _, f := range frags {
			total += counts[f]
		}
		ex := ""
		if x := sc.example[kind]; x != "" {
			ex = "; e.g. " + x
		}
		out = append(out, fmt.Sprintf("segment %s: %d %s (fragments %s%s)", sid, total, what, fragList(frags), ex))
	}
	add(sc.missing, "missing", "live rows of covered fragments have no entry")
	add(sc.labelMissing, "labels", "live rows lack the entry of one of their labels")
	add(sc.listNulls, "nulls", "live rows are null lists the segment does not mark, or marked rows are not")
	add(sc.uncovered, "uncovered", "entries point into live fragments the segment does not cover")
	add(sc.wrong, "wrong", "entries hold a value that is not their row's")
	add(sc.dup, "dup", "row addresses appear more than once")
	add(sc.beyond, "beyond", "entries point past their fragment's rows")
	return out
}

// fragList shortens a long list of fragment ids.
func fragList(frags []uint32) string {
	if len(frags) <= 8 {
		return fmt.Sprint(frags)
	}
	return fmt.Sprintf("%v … (%d fragments)", frags[:8], len(frags))
}

// unreadableError is a segment whose files do not decode, or whose content
// does not fit the column: a problem of the index, not a failure of the
// check.
type unreadableError struct{ err error }

func (u unreadableError) Error() string { return u.err.Error() }
func (u unreadableError) Unwrap() error { return u.err }

// checkScalarSegment checks a btree or bitmap segment. It returns the
// entries read and those readers mask.
func checkScalarSegment(ctx context.Context, b storage.Bucket, one *pb.Manifest, field *pb.Field, typ file.DataType, s *pb.IndexMetadata,
	full func(uint32) (uint64, bool), remap func(uint64) (uint64, bool), cov *roaring.Bitmap, live map[uint32]*pb.DataFragment, sc *segmentCounts) (uint64, uint64, error) {
	var raw []uint64
	var v *segValues
	if meta.IndexKind(s) == KindBitmap {
		// A key's value is looked up through the key, not repeated per
		// entry: the check holds 4 bytes of value per entry.
		r, err := openSegmentFile(ctx, b, s, BitmapLookupFile)
		var bm *Bitmap
		if err == nil {
			bm, err = ReadBitmap(r)
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, unreadableError{fmt.Errorf("does not read: %w", err)}
		}
		v = &segValues{vals: bm.Keys}
		for i, m := range bm.Maps {
			as, err := m.Addrs(full)
			if err != nil {
				return 0, 0, unreadableError{fmt.Errorf("key %d: %w", i, err)}
			}
			raw = append(raw, as...)
			for range as {
				v.of = append(v.of, int32(i))
			}
		}
	} else {
		e, err := ReadSegment(ctx, b, s, full)
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, unreadableError{fmt.Errorf("does not read: %w", err)}
		}
		raw, v = e.Addrs, &segValues{vals: e.Values}
	}
	if v.vals.Type != typ {
		return uint64(len(raw)), 0, unreadableError{fmt.Errorf("holds values of type %s, the column is %s", v.vals.Type, typ)}
	}
	masked, err := checkSegment(raw, remap, cov, live, sc, func(f *pb.DataFragment, ents []int32, addrs []uint64, rows []int32) (uint64, error) {
		return mergeFragment(ctx, b, one, f, field, typ, v, nil, ents, addrs, rows, sc)
	})
	return uint64(len(raw)), masked, err
}

// segValues are a segment's values: entry i's is vals[of[i]] (vals[i]
// when of is nil).
type segValues struct {
	vals *file.Array
	of   []int32
}

func (v *segValues) at(i int) int {
	if v.of == nil {
		return i
	}
	return int(v.of[i])
}

// openSegmentFile opens one file of a segment.
func openSegmentFile(ctx context.Context, b storage.Bucket, s *pb.IndexMetadata, name string) (Reader, error) {
	key := meta.IndexDir(meta.UUIDString(s.GetUuid())) + name
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return Reader{}, fmt.Errorf("%s: %w", name, err)
	}
	return Reader{R: storage.NewReaderAt(ctx, b, key, a.Size), Size: a.Size}, nil
}

// checkSegment remaps a segment's row addresses (raw, as stored) through
// the FRI, sorts them, and calls merge for each covered live fragment and
// each fragment entries point into that is live and covered, with ents the
// positions (sorted by address) of its entries in addrs, the remapped
// addresses, and rows mapping a position of addrs to its index in raw.
// It returns the entries readers mask.
func checkSegment(raw []uint64, remap func(uint64) (uint64, bool), cov *roaring.Bitmap, live map[uint32]*pb.DataFragment, sc *segmentCounts,
	merge func(f *pb.DataFragment, ents []int32, addrs []uint64, rows []int32) (uint64, error)) (uint64, error) {
	addrs := make([]uint64, 0, len(raw))
	rows := make([]int32, 0, len(raw))
	var masked uint64
	for i, a := range raw {
		na, ok := remap(a)
		if !ok {
			masked++ // a compaction dropped the row: deleted
			continue
		}
		addrs = append(addrs, na)
		rows = append(rows, int32(i))
	}
	perm := make([]int32, len(addrs))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(x, y int32) int {
		if addrs[x] != addrs[y] {
			if addrs[x] < addrs[y] {
				return -1
			}
			return 1
		}
		return int(x - y)
	})
	// The fragments to visit: those with entries and the covered live ones.
	visit := roaring.New()
	for _, p := range perm {
		visit.Add(uint32(addrs[p] >> 32))
	}
	for it := cov.Iterator(); it.HasNext(); {
		if f := it.Next(); live[f] != nil {
			visit.Add(f)
		}
	}
	lo := 0
	for it := visit.Iterator(); it.HasNext(); {
		frag := it.Next()
		hi := lo
		for hi < len(perm) && uint32(addrs[perm[hi]]>>32) == frag {
			hi++
		}
		ents := perm[lo:hi]
		lo = hi
		f := live[frag]
		switch {
		case f == nil:
			masked += uint64(len(ents)) // the fragment left the version
			continue
		case !cov.Contains(frag):
			sc.uncovered[frag] += len(ents)
			if sc.example["uncovered"] == "" {
				sc.example["uncovered"] = fmt.Sprintf("row %d:%d", frag, uint32(addrs[ents[0]]))
			}
			continue
		}
		m, err := merge(f, ents, addrs, rows)
		if err != nil {
			return 0, err
		}
		masked += m
	}
	return masked, nil
}

// mergeFragment compares the entries of one covered live fragment (ents,
// sorted by address) with its rows, batch by batch.
//
// With e nil the segment holds row ids only (a vector or full-text index):
// no value is compared, and a live row needs an entry only when need says
// so for its value (col is nil when the fragment has no data for the
// column).
func mergeFragment(ctx context.Context, b storage.Bucket, one *pb.Manifest, f *pb.DataFragment, field *pb.Field, typ file.DataType,
	e *segValues, need func(col *file.Array, r int) bool, ents []int32, addrs []uint64, rows []int32, sc *segmentCounts) (uint64, error) {
	if e != nil {
		need = func(*file.Array, int) bool { return true }
	}
	frag := uint32(f.GetId())
	rep := progress.From(ctx)
	off := func(k int) uint64 { return uint64(uint32(addrs[ents[k]])) }
	var masked uint64
	j := 0
	note := func(kind string, at uint64) {
		if sc.example[kind] == "" {
			sc.example[kind] = fmt.Sprintf("row %d:%d", frag, at)
		}
	}
	if len(ents) > 0 || f.GetPhysicalRows() > f.GetDeletionFile().GetNumDeletedRows() && need != nil {
		one.Fragments = []*pb.DataFragment{f}
		tbl, err := scan.OpenManifest(b, one, scan.Options{Columns: []string{field.GetName()}})
		if err != nil {
			return 0, err
		}
		err = tbl.Batches(ctx, func(bt *scan.Batch) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rep.Add(int64(bt.NumRows), 0)
			col := bt.Columns[0]
			if e != nil {
				if col == nil {
					col = nullArray(typ, bt.NumRows)
				}
				if col.Type != typ {
					return unreadableError{fmt.Errorf("holds values of type %s, but column %q of fragment %d decodes as %s", typ, field.GetName(), frag, col.Type)}
				}
			}
			missing := func(r int) {
				if need != nil && need(col, r) {
					sc.missing[frag]++
					note("missing", bt.Offset+uint64(r))
				}
			}
			end := bt.Offset + uint64(bt.NumRows)
			li := 0
			for j < len(ents) && off(j) < end {
				o := off(j)
				r := int(o - bt.Offset)
				for li < len(bt.Live) && bt.Live[li] < r {
					missing(bt.Live[li])
					li++
				}
				isLive := li < len(bt.Live) && bt.Live[li] == r
				n := 1
				for j+n < len(ents) && off(j+n) == o {
					n++
				}
				if n > 1 {
					sc.dup[frag] += n - 1
					note("dup", o)
				}
				if !isLive {
					masked += uint64(n)
					j += n
					continue
				}
				li++
				for k := j; k < j+n && e != nil; k++ {
					ei := e.at(int(rows[ents[k]]))
					ev, dv := e.vals.IsValid(ei), col.IsValid(r)
					if ev != dv || ev && compareValues(e.vals, ei, col, r) != 0 {
						sc.wrong[frag]++
						note("wrong", o)
					}
				}
				j += n
			}
			for ; li < len(bt.Live); li++ {
				missing(bt.Live[li])
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if j < len(ents) {
		sc.beyond[frag] += len(ents) - j
		note("beyond", off(j))
	}
	return masked, nil
}

// KindLabelList is meta.IndexKind's name of a label-list index (its file
// is a bitmap segment's, keyed by the list elements, plus the null lists).
const KindLabelList = "labellist"

// checkLabelSegment checks a label-list segment: every live row of a
// covered fragment is under exactly the keys of its list's non-null
// elements, and is in the segment's null lists exactly when its list is
// null (LanceDB marks those rows null in array_has_any answers, so NOT
// array_has_any leaves them out). A null key (null elements) is not
// checked.
func checkLabelSegment(ctx context.Context, b storage.Bucket, one *pb.Manifest, field *pb.Field, s *pb.IndexMetadata,
	full func(uint32) (uint64, bool), remap func(uint64) (uint64, bool), cov *roaring.Bitmap, live map[uint32]*pb.DataFragment, sc *segmentCounts) (uint64, uint64, error) {
	r, err := openSegmentFile(ctx, b, s, BitmapLookupFile)
	var ll *LabelList
	if err == nil {
		ll, err = ReadLabelList(r)
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		return 0, 0, unreadableError{fmt.Errorf("does not read: %w", err)}
	}
	bm := &ll.Bitmap
	var nulls map[uint64]bool // remapped null-list rows; nil: not recorded
	if ll.HasNulls {
		as, err := ll.Nulls.Addrs(full)
		if err != nil {
			return 0, 0, unreadableError{fmt.Errorf("null lists: %w", err)}
		}
		nulls = make(map[uint64]bool, len(as))
		for _, a := range as {
			if na, ok := remap(a); ok {
				nulls[na] = true
			}
		}
	}
	keyIndex := map[string]int32{}
	var raw []uint64
	var keyOf []int32 // raw entry → key
	for i, m := range bm.Maps {
		k, null := valueKey(bm.Keys, i)
		if null {
			continue
		}
		keyIndex[k] = int32(i)
		as, err := m.Addrs(full)
		if err != nil {
			return 0, 0, unreadableError{fmt.Errorf("key %d: %w", i, err)}
		}
		raw = append(raw, as...)
		for range as {
			keyOf = append(keyOf, int32(i))
		}
	}
	masked, err := checkSegment(raw, remap, cov, live, sc, func(f *pb.DataFragment, ents []int32, addrs []uint64, rows []int32) (uint64, error) {
		return mergeLabelFragment(ctx, b, one, f, field, bm.Keys.Type, keyIndex, keyOf, nulls, ents, addrs, rows, sc)
	})
	return uint64(len(raw)), masked, err
}

// mergeLabelFragment compares the (key, row) entries of one covered live
// fragment (ents, sorted by address then key) with its rows' lists.
func mergeLabelFragment(ctx context.Context, b storage.Bucket, one *pb.Manifest, f *pb.DataFragment, field *pb.Field, keyType file.DataType,
	keyIndex map[string]int32, keyOf []int32, nulls map[uint64]bool, ents []int32, addrs []uint64, rows []int32, sc *segmentCounts) (uint64, error) {
	frag := uint32(f.GetId())
	rep := progress.From(ctx)
	off := func(k int) uint64 { return uint64(uint32(addrs[ents[k]])) }
	note := func(kind string, at uint64) {
		if sc.example[kind] == "" {
			sc.example[kind] = fmt.Sprintf("row %d:%d", frag, at)
		}
	}
	var masked uint64
	j := 0
	one.Fragments = []*pb.DataFragment{f}
	tbl, err := scan.OpenManifest(b, one, scan.Options{Columns: []string{field.GetName()}})
	if err != nil {
		return 0, err
	}
	have := map[int32]bool{}
	err = tbl.Batches(ctx, func(bt *scan.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.Add(int64(bt.NumRows), 0)
		col := bt.Columns[0]
		if col != nil {
			if (col.Type.Kind != file.KindList && col.Type.Kind != file.KindLargeList) || len(col.Children) != 1 || col.Children[0].Type != keyType {
				return unreadableError{fmt.Errorf("keys of type %s, but column %q of fragment %d decodes as %s", keyType, field.GetName(), frag, col.Type)}
			}
		}
		li := 0
		for r := 0; r < bt.NumRows; r++ {
			o := bt.Offset + uint64(r)
			clear(have)
			for ; j < len(ents) && off(j) == o; j++ {
				k := keyOf[rows[ents[j]]]
				if have[k] {
					sc.dup[frag]++
					note("dup", o)
				}
				have[k] = true
			}
			isLive := li < len(bt.Live) && bt.Live[li] == r
			if !isLive {
				masked += uint64(len(have))
				continue
			}
			li++
			if nulls != nil && nulls[meta.RowAddr(frag, uint32(o))] != (col == nil || !col.IsValid(r)) {
				sc.listNulls[frag]++
				note("nulls", o)
			}
			lacks, extra := false, len(have)
			if col != nil && col.IsValid(r) {
				items := col.Children[0]
				seen := map[int32]bool{}
				for e := col.Offsets[r]; e < col.Offsets[r+1]; e++ {
					vk, null := valueKey(items, int(e))
					if null {
						continue
					}
					k, ok := keyIndex[vk]
					if !ok || !have[k] {
						lacks = true
						continue
					}
					if !seen[k] {
						seen[k] = true
						extra--
					}
				}
			}
			if lacks {
				sc.labelMissing[frag]++
				note("labels", o)
			}
			if extra > 0 {
				sc.wrong[frag] += extra
				note("wrong", o)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if j < len(ents) {
		sc.beyond[frag] += len(ents) - j
		note("beyond", off(j))
	}
	return masked, nil
}

// Kinds of index whose row ids CheckContent reads (meta.IndexKind's names).
const (
	KindVector   = "vector"
	KindInverted = "inverted"
)

// The row-id files of vector and full-text segments (LANCE-INDEXES.md):
// an IVF index's vector storage auxiliary.idx, and each partition's
// part_{p}_docs.lance of an inverted index, both with a column _rowid of
// row addresses.
var rowIDFileNames = map[string]string{
	KindVector:   "auxiliary.idx",
	KindInverted: "part_{p}_docs.lance",
}

var rowIDNotes = map[string]string{
	KindVector:   "row ids only: vectors are not compared",
	KindInverted: "row ids only: which rows have tokens depends on the tokenizer, so rows without an entry are not reported",
}

// rowIDNeed says which live rows of a covered fragment must have an entry:
// those whose vector is not null (LanceDB does not index null vectors);
// for full-text, none is required.
var rowIDNeed = map[string]func(col *file.Array, r int) bool{
	KindVector: func(col *file.Array, r int) bool { return col != nil && col.IsValid(r) },
}

// rowIDFiles lists the segment's files that hold its row ids.
func rowIDFiles(kind string, s *pb.IndexMetadata) []string {
	var out []string
	for _, f := range s.GetFiles() {
		p := f.GetPath()
		switch {
		case kind == KindVector && p == "auxiliary.idx":
			out = append(out, p)
		case kind == KindInverted && strings.HasPrefix(path.Base(p), "part_") && strings.HasSuffix(p, "_docs.lance"):
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// checkRowIDSegment checks a segment that holds row ids only: the _rowid
// column of each of its files.
func checkRowIDSegment(ctx context.Context, b storage.Bucket, one *pb.Manifest, field *pb.Field, s *pb.IndexMetadata, files []string,
	need func(col *file.Array, r int) bool, remap func(uint64) (uint64, bool), cov *roaring.Bitmap, live map[uint32]*pb.DataFragment, sc *segmentCounts) (uint64, uint64, error) {
	dir := meta.IndexDir(meta.UUIDString(s.GetUuid()))
	var raw []uint64
	for _, name := range files {
		key := dir + name
		a, err := b.Attributes(ctx, key)
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, unreadableError{fmt.Errorf("does not read: %w", err)}
		}
		f, err := file.Open(storage.NewReaderAt(ctx, b, key, a.Size), a.Size)
		if err == nil {
			_, err = fieldOf(f, "_rowid", 0, isKind(file.KindUint64))
		}
		var bt *file.Batch
		if err == nil {
			bt, err = f.ReadAll([]string{"_rowid"})
		}
		if err == nil && (len(bt.Columns) != 1 || bt.Columns[0] == nil || bt.Columns[0].Len != int(f.NumRows())) {
			err = formatErr("_rowid does not hold the file's %d rows", f.NumRows())
		}
		if err == nil && bt.Columns[0].NullCount() > 0 {
			err = formatErr("%d null row ids", bt.Columns[0].NullCount())
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, unreadableError{fmt.Errorf("%s does not read: %w", name, err)}
		}
		ids := bt.Columns[0]
		for i := 0; i < ids.Len; i++ {
			raw = append(raw, le.Uint64(ids.Values[8*i:]))
		}
	}
	masked, err := checkSegment(raw, remap, cov, live, sc, func(f *pb.DataFragment, ents []int32, addrs []uint64, rows []int32) (uint64, error) {
		return mergeFragment(ctx, b, one, f, field, file.DataType{}, nil, need, ents, addrs, rows, sc)
	})
	return uint64(len(raw)), masked, err
}

// layoutFiles are the files a btree, bitmap or label-list segment of the
// layout compactord reads has.
var layoutFiles = map[string][]string{
	KindBTree:     {BTreeDataFile, BTreeLookupFile},
	KindBitmap:    {BitmapLookupFile},
	KindLabelList: {BitmapLookupFile},
}

// knownLayout reports whether every segment that lists its files lists
// those of the layout compactord reads for kind (a segment that lists none
// is read as that layout).
func knownLayout(kind string, segs []*pb.IndexMetadata) bool {
	for _, s := range segs {
		if len(s.GetFiles()) == 0 {
			continue
		}
		for _, want := range layoutFiles[kind] {
			if !slices.ContainsFunc(s.GetFiles(), func(f *pb.IndexFile) bool { return f.GetPath() == want }) {
				return false
			}
		}
	}
	return true
}

// segmentFiles names the files of the first segment whose layout is not
// the one compactord reads.
func segmentFiles(segs []*pb.IndexMetadata) string {
	for _, s := range segs {
		var names []string
		for _, f := range s.GetFiles() {
			names = append(names, f.GetPath())
		}
		if len(names) > 0 && !knownLayout(meta.IndexKind(s), []*pb.IndexMetadata{s}) {
			return strings.Join(names, ", ")
		}
	}
	return "?"
}
