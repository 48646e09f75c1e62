package index

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// smallRemapWindows makes the streaming remap's windows tiny for one
// test, so that runs of equal values span windows and flushes, and long
// runs move to a roaring bitmap.
func smallRemapWindows(t *testing.T) {
	w, f, r, b, fb := remapWindow, remapFlush, remapRunSlice, bitmapWindow, bitmapFlushBytes
	remapWindow, remapFlush, remapRunSlice, bitmapWindow, bitmapFlushBytes = 97, 61, 13, 3, 100
	t.Cleanup(func() { remapWindow, remapFlush, remapRunSlice, bitmapWindow, bitmapFlushBytes = w, f, r, b, fb })
}

// TestRemapStreamsAsTheWholeSegment: Remap, which streams a segment
// through small windows, writes the segment that remapping its whole
// entry list and sorting it again gives (the entries, and for a btree its
// page_lookup: each page's min, max and null count), for btree and bitmap
// segments whose values repeat in runs longer than a window, with nulls,
// under a remap that drops rows and moves others to fragments before and
// after the untouched ones (so ties change order).
func TestRemapStreamsAsTheWholeSegment(t *testing.T) {
	smallRemapWindows(t)
	ctx := context.Background()
	bk, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	const frags, rows = 6, 1500
	// Fragments 1 and 4 are compacted into fragment 9 (their survivors in
	// order), fragment 2 into fragment 0's... no: into new fragment 7;
	// one row in 5 of theirs is dropped; 0, 3 and 5 stay.
	moved := map[uint32]uint32{1: 9, 4: 9, 2: 7}
	base := map[uint32]uint32{1: 0, 4: rows, 2: 0}
	remap := func(a uint64) (uint64, bool) {
		f, o := meta.SplitRowAddr(a)
		nf, ok := moved[f]
		if !ok {
			return a, true
		}
		if o%5 == 2 {
			return 0, false
		}
		return meta.RowAddr(nf, base[f]+o), true
	}
	for _, c := range []struct {
		kind, logical string
		value         func(r *rand.Rand, i int) (v uint64, null bool)
	}{
		{KindBTree, "int64", func(r *rand.Rand, i int) (uint64, bool) { return uint64(i / 700), i%53 == 0 }},
		{KindBTree, "int64", func(r *rand.Rand, i int) (uint64, bool) { return uint64(r.IntN(1 << 20)), false }},
		{KindBTree, "int32", func(r *rand.Rand, i int) (uint64, bool) { return uint64(r.IntN(3)), r.IntN(40) == 0 }},
		{KindBTree, "string", func(r *rand.Rand, i int) (uint64, bool) { return uint64(r.IntN(50)), r.IntN(30) == 0 }},
		{KindBitmap, "int32", func(r *rand.Rand, i int) (uint64, bool) { return uint64(i % 7), i%31 == 0 }},
		{KindBitmap, "string", func(r *rand.Rand, i int) (uint64, bool) { return uint64(r.IntN(200)), false }},
		{KindLabelList, "int32", func(r *rand.Rand, i int) (uint64, bool) { return uint64(i % 11), i%37 == 0 }},
		{KindLabelList, "string", func(r *rand.Rand, i int) (uint64, bool) { return uint64(r.IntN(60)), false }},
	} {
		t.Run(c.kind+"/"+c.logical, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			tf := &pb.Field{Name: "v", Id: 0, ParentId: -1, LogicalType: c.logical, Nullable: true}
			ft, err := fieldType(tf)
			if err != nil {
				t.Fatal(err)
			}
			n := frags * rows
			var vals []*file.Array
			var addrs []uint64
			for f := 0; f < frags; f++ {
				for o := 0; o < rows; o++ {
					v, null := c.value(r, f*rows+o)
					vals = append(vals, scalar(ft, v, null))
					addrs = append(addrs, meta.RowAddr(uint32(f), uint32(o)))
				}
			}
			e := &Entries{Values: concat(ft, vals), Addrs: addrs}
			if c.kind == KindLabelList {
				// Entries are (element, row) pairs of a list column whose
				// item type is the values'; some rows' lists are null.
				e.Keys = &pb.Field{Name: "item", Id: 1, ParentId: 0, LogicalType: c.logical, Nullable: true}
				for f := 0; f < frags; f++ {
					for o := 3; o < rows; o += 97 {
						e.ListNulls = append(e.ListNulls, meta.RowAddr(uint32(f), uint32(o)))
					}
				}
			}
			w, err := WriteSegment(ctx, bk, c.kind, tf, e)
			if err != nil {
				t.Fatal(err)
			}
			all := roaring.New()
			all.AddRange(0, frags)
			m, err := SegmentMetadata("v_idx", []int32{0}, c.kind, nil, 1, all, w, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			nm, _, st, err := Remap(ctx, bk, m, remap, RemapOptions{Field: tf, DatasetVersion: 2, Bitmap: all})
			if err != nil {
				t.Fatal(err)
			}
			old, err := ReadSegment(ctx, bk, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			var keep []int
			var kept []uint64
			for i, a := range old.Addrs {
				if na, ok := remap(a); ok {
					keep = append(keep, i)
					kept = append(kept, na)
				}
			}
			want := (&Entries{Values: old.Values.Take(keep), Addrs: kept}).Sorted()
			if st.Entries != n || st.Kept != want.Len() || st.Dropped != n-want.Len() {
				t.Errorf("stats %+v, want %d entries, %d kept", st, n, want.Len())
			}
			got, err := ReadSegment(ctx, bk, nm, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, why := got.Equal(want); !ok {
				t.Fatalf("remapped segment: %s", why)
			}
			var nulls []uint64
			for _, a := range old.ListNulls {
				if na, ok := remap(a); ok {
					nulls = append(nulls, na)
				}
			}
			slices.Sort(nulls)
			if c.kind == KindLabelList && (len(nulls) == 0 || len(nulls) == len(old.ListNulls) || !slices.Equal(got.ListNulls, nulls)) {
				t.Fatalf("null lists: %d rows (of %d), want %d", len(got.ListNulls), len(old.ListNulls), len(nulls))
			}
			if c.kind != KindBTree {
				return
			}
			ww, err := WriteSegment(ctx, bk, c.kind, tf, want)
			if err != nil {
				t.Fatal(err)
			}
			wm, err := SegmentMetadata("v_idx", []int32{0}, c.kind, nil, 2, all, ww, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			gp, wp := btreePages(t, bk, nm), btreePages(t, bk, wm)
			if gp != wp {
				t.Fatalf("page_lookup:\n%s\nwant\n%s", gp, wp)
			}
		})
	}
}

// scalar is a one-value array of t: v (as an integer, or a string of it),
// or a null.
func scalar(t file.DataType, v uint64, null bool) *file.Array {
	a := nullArray(t, 1)
	if null {
		return a
	}
	a.Valid = nil
	switch {
	case t.IsVariable():
		a.Values = fmt.Appendf(nil, "k%05d", v)
		a.Offsets = []int64{0, int64(len(a.Values))}
	case t.ByteWidth() == 8:
		le.PutUint64(a.Values, v)
	case t.ByteWidth() == 4:
		le.PutUint32(a.Values, uint32(v))
	}
	return a
}

// btreePages describes a btree segment's page_lookup.
func btreePages(t *testing.T, b storage.Bucket, m *pb.IndexMetadata) string {
	t.Helper()
	ctx := context.Background()
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	open := func(name string) Reader {
		a, err := b.Attributes(ctx, dir+name)
		if err != nil {
			t.Fatal(err)
		}
		return Reader{R: storage.NewReaderAt(ctx, b, dir+name, a.Size), Size: a.Size}
	}
	bt, err := ReadBTree(open(BTreeDataFile), open(BTreeLookupFile))
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("batch %d, %d pages:", bt.BatchSize, len(bt.Pages))
	for _, p := range bt.Pages {
		mn, _ := valueKey(p.Min, 0)
		mx, _ := valueKey(p.Max, 0)
		s += fmt.Sprintf(" [%d %q..%q nulls %d]", p.Index, mn, mx, p.NullCount)
	}
	return s
}

// FuzzRemapSegment: a btree page_data or bitmap file of any bytes,
// remapped, gives a segment or an error, never a panic.
func FuzzRemapSegment(f *testing.F) {
	for _, b := range corpusSegmentFiles(f, BTreeDataFile) {
		f.Add(false, b)
	}
	for _, b := range corpusSegmentFiles(f, BitmapLookupFile) {
		f.Add(true, b)
	}
	f.Fuzz(func(t *testing.T, bitmap bool, raw []byte) {
		smallRemapWindows(t)
		ctx := context.Background()
		bk, err := storage.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		defer bk.Close()
		kind, name := KindBTree, BTreeDataFile
		if bitmap {
			kind, name = KindBitmap, BitmapLookupFile
		}
		u, id := meta.NewUUID()
		if err := bk.Put(ctx, meta.IndexDir(id)+name, raw); err != nil {
			t.Fatal(err)
		}
		tf := &pb.Field{Name: "v", Id: 0, ParentId: -1, LogicalType: "int64", Nullable: true}
		if lf, err := file.Open(bytes.NewReader(raw), int64(len(raw))); err == nil {
			if fs := lf.Desc.GetSchema().GetFields(); len(fs) > 0 {
				tf.LogicalType = fs[0].GetLogicalType()
			}
		}
		all := roaring.BitmapOf(0, 1)
		m, err := SegmentMetadata("v_idx", []int32{0}, kind, nil, 1, all, &Written{UUID: u, Files: []*pb.IndexFile{{Path: name, SizeBytes: uint64(len(raw))}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		remap := func(a uint64) (uint64, bool) { return a + 1<<32, a%3 != 0 }
		_, _, _, _ = Remap(ctx, bk, m, remap, RemapOptions{Field: tf, DatasetVersion: 2, Bitmap: all, Full: func(uint32) (uint64, bool) { return 5, true }})
	})
}
