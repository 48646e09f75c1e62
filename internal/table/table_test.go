package table

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
)

func TestManifestKeyOrderNewestFirst(t *testing.T) {
	vs := []uint64{1, 2, 10, 99, 100, 1 << 40, math.MaxUint64 - 1}
	keys := make([]string, len(vs))
	for i, v := range vs {
		keys[i] = ManifestKey(v)
		got, ok := ParseManifestKey(keys[i])
		if !ok || got != v {
			t.Fatalf("ParseManifestKey(%q) = %d, %v; want %d", keys[i], got, ok, v)
		}
	}
	sort.Strings(keys)
	for i := 1; i < len(keys); i++ {
		a, _ := ParseManifestKey(keys[i-1])
		b, _ := ParseManifestKey(keys[i])
		if a <= b {
			t.Fatalf("lexical order is not newest first: %d before %d", a, b)
		}
	}
	for _, bad := range []string{"_versions/x.manifest", "_versions/123.manifest", "data/00000000000000000001.manifest"} {
		if _, ok := ParseManifestKey(bad); ok {
			t.Errorf("ParseManifestKey(%q) accepted", bad)
		}
	}
}

func TestFrameRejectsTruncationAndDamage(t *testing.T) {
	m := &pb.Manifest{Version: 7, Fragments: []*pb.Fragment{{Id: 1, PhysicalRows: 10, DataFile: &pb.DataFile{Path: "data/a.parquet"}}}}
	data, err := EncodeProto(m)
	if err != nil {
		t.Fatal(err)
	}
	got := &pb.Manifest{}
	if err := DecodeProto("m", data, got); err != nil || got.Version != 7 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for n := 0; n < len(data); n++ {
		if err := DecodeProto("m", data[:n], &pb.Manifest{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: got %v, want ErrCorrupt", n, err)
		}
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x40
	if err := DecodeProto("m", flipped, &pb.Manifest{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit flip: got %v, want ErrCorrupt", err)
	}
}

func TestParseSchema(t *testing.T) {
	s, err := ParseSchema("id:int64, cat:string,val:float64,ok:bool,b:bytes,ts:timestamp", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Fields) != 6 || s.PrimaryKey[0] != 0 || s.Fields[0].Nullable {
		t.Fatalf("unexpected schema %v", s)
	}
	for _, tc := range []struct{ spec, pk string }{
		{"id:int64", "nope"}, {"id:int65", "id"}, {"id", "id"}, {"", "id"}, {"id:int64,id:string", "id"}, {"v:float64", "v"}, {"_x:int64", "_x"},
	} {
		if _, err := ParseSchema(tc.spec, []string{tc.pk}); err == nil {
			t.Errorf("ParseSchema(%q, %q) accepted", tc.spec, tc.pk)
		}
	}
}

func TestParseJSONRow(t *testing.T) {
	s, _ := ParseSchema("id:int64,cat:string,val:float64,ts:timestamp", []string{"id"})
	r, op, err := ParseJSONRow(s, []byte(`{"id": 3, "cat": "a", "val": 1.5, "ts": "2024-01-02T03:04:05Z"}`))
	if err != nil || op != "" {
		t.Fatal(err, op)
	}
	if r[0] != int64(3) || r[1] != "a" || r[2] != 1.5 || r[3] != Timestamp(1704164645000000) {
		t.Fatalf("row %#v", r)
	}
	if r, op, err = ParseJSONRow(s, []byte(`{"id": 4, "_op": "delete"}`)); err != nil || op != "delete" || r[0] != int64(4) {
		t.Fatalf("tombstone: %v %q %v", r, op, err)
	}
	for _, bad := range []string{`{"cat":"a"}`, `{"id":"x"}`, `{"id":1.5}`, `{"id":1,"zzz":2}`, `[1]`, `{"id":1} {"id":2}`, `{"id":1,"_op":"merge"}`, `null`, `{"id":1,"ts":"yesterday"}`} {
		if _, _, err := ParseJSONRow(s, []byte(bad)); err == nil {
			t.Errorf("ParseJSONRow(%s) accepted", bad)
		}
	}
}

// RowJSON's output parses back to the same row for every timestamp:
// outside years 0000-9999 (no RFC 3339 form) it prints integer microseconds.
func TestRowJSONTimestampsRoundTrip(t *testing.T) {
	s, _ := ParseSchema("id:int64,ts:timestamp", []string{"id"})
	for _, us := range []int64{0, -1, 1704164645000001, 253402300799999999, 253402300800000000, -62167219200000000, -62167219200000001, math.MaxInt64, math.MinInt64} {
		r := Row{int64(1), Timestamp(us)}
		got, _, err := ParseJSONRow(s, RowJSON(s, r))
		if err != nil || got[1] != r[1] {
			t.Errorf("%d: %s read back as %v (%v)", us, RowJSON(s, r), got, err)
		}
	}
}

func TestKeyEncodingPreservesOrder(t *testing.T) {
	vals := []any{int64(math.MinInt64), int64(-5), int64(0), int64(7), int64(math.MaxInt64)}
	for i := 1; i < len(vals); i++ {
		a, b := AppendKey(nil, vals[i-1]), AppendKey(nil, vals[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("%v !< %v in key encoding", vals[i-1], vals[i])
		}
	}
	strs := []string{"", "a", "a\x00", "a\x00b", "ab", "b"}
	for i := 1; i < len(strs); i++ {
		if bytes.Compare(AppendKey(nil, strs[i-1]), AppendKey(nil, strs[i])) >= 0 {
			t.Fatalf("%q !< %q in key encoding", strs[i-1], strs[i])
		}
	}
}

func TestFragmentRoundTripWithDeletions(t *testing.T) {
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ParseSchema("id:int64,cat:string,val:float64,ok:bool,b:bytes,ts:timestamp", []string{"id"})
	w, err := NewFragmentWriter(ctx, b, s)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for i := int64(0); i < 3000; i++ {
		var cat any = "c"
		if i%7 == 0 {
			cat = nil
		}
		rows = append(rows, Row{i, cat, float64(i) / 2, i%2 == 0, []byte{byte(i)}, Timestamp(i * 1000)})
	}
	if err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	f, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if f.PhysicalRows != 3000 || f.DataFile.SizeBytes == 0 {
		t.Fatalf("fragment %v", f)
	}
	del := roaring.BitmapOf(0, 5, 2999)
	df, err := WriteDeletionFile(ctx, b, 1, 1, del)
	if err != nil {
		t.Fatal(err)
	}
	f.DeletionFile = df
	var seen int
	err = ScanFragment(ctx, b, s, f, func(off uint32, r Row) error {
		if del.Contains(off) {
			t.Fatalf("deleted offset %d returned", off)
		}
		want := rows[off]
		for i := range want {
			if CompareValues(r[i], want[i]) != 0 {
				t.Fatalf("offset %d field %d: got %#v want %#v", off, i, r[i], want[i])
			}
		}
		seen++
		return nil
	})
	if err != nil || seen != 2997 {
		t.Fatalf("scan: %d rows, %v", seen, err)
	}
	// A deletion file whose count disagrees with the manifest is corrupt.
	df.NumDeleted = 4
	if _, err := ReadDeletionFile(ctx, b, df); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count mismatch: %v", err)
	}
}
