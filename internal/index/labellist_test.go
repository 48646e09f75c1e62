package index

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLabelListReadWriteLanceDB: LanceDB's label-list segment decodes
// into the (label, row) pairs and null lists of labelFixture's data, and
// what WriteLabelList makes of them decodes to the same content.
func TestLabelListReadWriteLanceDB(t *testing.T) {
	lancedb.Require(t)
	src := labelFixture(t)
	h := openHandle(t, src.Dir)
	seg := meta.FindIndex(mustRead(t, h).Indices, "tags_idx")[0]
	ll, err := ReadLabelList(readerOf(t, filepath.Join(src.Dir, meta.IndexDir(meta.UUIDString(seg.GetUuid()))+BitmapLookupFile)))
	if err != nil {
		t.Fatal(err)
	}
	// Rows 0..149 are fragment 0, 150..299 fragment 1; the delete came
	// after the index, so every row is in it.
	addr := func(id int) uint64 { return meta.RowAddr(uint32(id/150), uint32(id%150)) }
	var wantNulls []uint64
	pairs := 0
	for id := range 300 {
		switch {
		case id%11 == 0:
			wantNulls = append(wantNulls, addr(id))
		case id%35 < 5:
			pairs++
		default:
			pairs += 2
		}
	}
	e, err := ll.Entries(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.ListNulls, wantNulls) || e.Len() != pairs || e.Keys.GetLogicalType() != "int32" {
		t.Fatalf("LanceDB's segment: %d pairs, nulls %v, keys %v; want %d pairs, nulls %v, int32 keys", e.Len(), e.ListNulls, e.Keys, pairs, wantNulls)
	}
	for i := range e.Len() {
		id := int(e.Addrs[i]>>32)*150 + int(uint32(e.Addrs[i]))
		v := int32(le.Uint32(e.Values.Values[4*i:]))
		if v != int32(id%5) && v != int32(id%7) {
			t.Fatalf("row %d is under label %d", id, v)
		}
	}
	var buf memBuf
	if _, err := WriteLabelList(&buf, e); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLabelList(memReader(buf.b))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := back.Entries(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e2.Addrs, e.Addrs) || !slices.Equal(e2.Values.Values, e.Values.Values) || !slices.Equal(e2.ListNulls, e.ListNulls) ||
		len(back.Maps) != len(ll.Maps) || back.KeyField.GetLogicalType() != "int32" {
		t.Fatalf("round trip: %d pairs, %d keys, nulls %v", e2.Len(), len(back.Maps), e2.ListNulls)
	}
}

// labelListSample is a small label-list segment: labels "a", "b" and a
// null element over fragments 0 and 2, rows 0:4 and 2:1 with null lists.
func labelListSample(t testing.TB) []byte {
	t.Helper()
	v := &file.Array{Type: file.DataType{Kind: file.KindUtf8}, Len: 4, Offsets: []int64{0, 1, 2, 3, 3}, Values: []byte("aba"), Valid: []byte{0b0111}}
	e := &Entries{Values: v, Addrs: []uint64{meta.RowAddr(0, 0), meta.RowAddr(0, 1), meta.RowAddr(2, 0), meta.RowAddr(2, 3)},
		ListNulls: []uint64{meta.RowAddr(0, 4), meta.RowAddr(2, 1)}, Keys: &pb.Field{Name: "item", LogicalType: "string", Nullable: true}}
	var buf memBuf
	if _, err := WriteLabelList(&buf, e); err != nil {
		t.Fatal(err)
	}
	return buf.b
}

// TestLabelListNullKeyAndNulls: a null element is the null key, null
// lists are not under any key, and both survive a write and a read.
func TestLabelListNullKeyAndNulls(t *testing.T) {
	ll, err := ReadLabelList(memReader(labelListSample(t)))
	if err != nil {
		t.Fatal(err)
	}
	e, err := ll.Entries(nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Len() != 4 || e.Values.IsValid(0) || e.Addrs[0] != meta.RowAddr(2, 3) || !slices.Equal(e.ListNulls, []uint64{meta.RowAddr(0, 4), meta.RowAddr(2, 1)}) {
		t.Fatalf("entries %v (first valid %v), nulls %v", e.Addrs, e.Values.IsValid(0), e.ListNulls)
	}
	if len(ll.Maps) != 3 || ll.Keys.IsValid(0) || string(ll.Keys.Bytes(1)) != "a" || string(ll.Keys.Bytes(2)) != "b" {
		t.Fatalf("keys: %d, want null, a, b", len(ll.Maps))
	}
}

// TestLabelListRefusesBadNulls: a nulls key that names no global buffer
// or holds a bad number is a one-line format error.
func TestLabelListRefusesBadNulls(t *testing.T) {
	for _, md := range []string{"7", "x", "0"} {
		e := &Entries{Values: &file.Array{Type: file.DataType{Kind: file.KindInt32}}, Keys: &pb.Field{Name: "item", LogicalType: "int32", Nullable: true}}
		var buf memBuf
		if _, err := writeBitmapFile(&buf, e.Keys, e, map[string][]byte{labelListNullsKey: []byte(md)}, nil); err != nil {
			t.Fatal(err)
		}
		_, err := ReadLabelList(memReader(buf.b))
		if err == nil || !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
			t.Errorf("nulls buffer %q: %v, want a format error", md, err)
		}
	}
}

func FuzzReadLabelList(f *testing.F) {
	good := labelListSample(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(append(slices.Clone(good[:len(good)-50]), good[len(good)-40:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		ll, err := ReadLabelList(memReader(b))
		if err != nil {
			return
		}
		_, _ = ll.Entries(func(uint32) (uint64, bool) { return 5, true })
	})
}

// FuzzRemapLabelList: a label-list segment of any bytes, remapped (its
// keys streamed, its null lists' map remapped whole), gives a segment or
// an error, never a panic.
func FuzzRemapLabelList(f *testing.F) {
	good := labelListSample(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx := context.Background()
		bk, err := storage.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		defer bk.Close()
		u, id := meta.NewUUID()
		if err := bk.Put(ctx, meta.IndexDir(id)+BitmapLookupFile, raw); err != nil {
			t.Fatal(err)
		}
		all := roaring.BitmapOf(0, 1)
		m, err := SegmentMetadata("tags_idx", []int32{0}, KindLabelList, nil, 1, all, &Written{UUID: u, Files: []*pb.IndexFile{{Path: BitmapLookupFile, SizeBytes: uint64(len(raw))}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tf := &pb.Field{Name: "tags", Id: 0, ParentId: -1, LogicalType: "list", Nullable: true}
		remap := func(a uint64) (uint64, bool) { return a + 1<<32, a%3 != 0 }
		_, _, _, _ = Remap(ctx, bk, m, remap, RemapOptions{Field: tf, DatasetVersion: 2, Bitmap: all, Full: func(uint32) (uint64, bool) { return 5, true }})
	})
}
