package deletion

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

type expectedFile struct {
	Table        string   `json:"table"`
	File         string   `json:"file"`
	Fragment     uint64   `json:"fragment"`
	PhysicalRows uint64   `json:"physical_rows"`
	Deleted      []uint32 `json:"deleted"`
}

func loadExpected(t testing.TB) []expectedFile {
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp []expectedFile
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	return exp
}

// TestRealFiles decodes the deletion files LanceDB wrote (testdata/make.mjs)
// and compares them with the rows LanceDB itself no longer returns.
func TestRealFiles(t *testing.T) {
	exp := loadExpected(t)
	var arrow, bin int
	for _, e := range exp {
		key := Dir + "/" + strings.TrimPrefix(e.File, e.Table+"_")
		frag, df, err := ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if frag != e.Fragment || Key(frag, df) != key {
			t.Errorf("%s: parsed fragment %d, key back %s", key, frag, Key(frag, df))
		}
		data, err := os.ReadFile(filepath.Join("testdata", e.File))
		if err != nil {
			t.Fatal(err)
		}
		df.NumDeletedRows = uint64(len(e.Deleted))
		bm, err := Decode(df, data, e.PhysicalRows)
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		if got := bm.ToArray(); !reflect.DeepEqual(got, e.Deleted) {
			t.Errorf("%s: decoded %v, LanceDB deleted %v", e.File, got, e.Deleted)
		}
		// Lance's choice of encoding is ours too.
		if want := len(e.Deleted) >= BitmapThreshold; (df.FileType == lancepb.DeletionFile_BITMAP) != want {
			t.Errorf("%s: %d deleted rows in a %s file", e.File, len(e.Deleted), df.FileType)
		}
		if df.FileType == lancepb.DeletionFile_BITMAP {
			bin++
		} else {
			arrow++
			// LanceDB writes ZSTD, one batch, a non-nullable uint32 row_id.
			st, err := arrowipc.ReadFile(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if f := st.Schema.Fields[0]; f.Name != ColumnName || f.Nullable || len(st.Batches) != 1 {
				t.Errorf("%s: field %v, %d batches", e.File, f, len(st.Batches))
			}
		}
		// Physical rows are checked: one row fewer makes the last offset
		// corrupt when it is the last row.
		if _, err := Decode(df, data, uint64(e.Deleted[len(e.Deleted)-1])); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: offset %d accepted for as many physical rows: %v", e.File, e.Deleted[len(e.Deleted)-1], err)
		}
	}
	if arrow < 2 || bin < 2 {
		t.Errorf("test data has %d .arrow and %d .bin files", arrow, bin)
	}
}

// TestRealArrowIsUnsorted documents that LanceDB's .arrow files are not in
// offset order, which is why Decode must not assume order.
func TestRealArrowIsUnsorted(t *testing.T) {
	data, err := os.ReadFile("testdata/small_0-1-16735274353257639560.arrow")
	if err != nil {
		t.Fatal(err)
	}
	st, err := arrowipc.ReadFile(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The order LanceDB wrote (its HashSet's), as arrow-go also reads it.
	if v := st.Batches[0].Columns[0].Uint32s(); !reflect.DeepEqual(v, []uint32{60, 15, 42, 93, 7}) {
		t.Errorf("row_id column %v", v)
	}
}

func TestKey(t *testing.T) {
	df := &lancepb.DeletionFile{FileType: lancepb.DeletionFile_BITMAP, ReadVersion: 12, Id: 18446744073709551615}
	if got, want := Key(3, df), "_deletions/3-12-18446744073709551615.bin"; got != want {
		t.Errorf("Key = %s, want %s", got, want)
	}
	for _, bad := range []string{
		"_deletions/3-12-5", "_deletions/3-12-5.parquet", "_deletions/3-12.arrow", "_deletions/3-12-5-1.arrow",
		"_deletions/03-12-5.arrow", "_deletions/3-+12-5.arrow", "_deletions/3-12-18446744073709551616.arrow",
		"data/3-12-5.arrow", "_deletions/3-12-0x5.arrow", "_deletions/-12-5.arrow",
	} {
		if _, _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	f, d, err := ParseKey("s3://b/t.lance/_deletions/0-1-0.arrow")
	if err != nil || f != 0 || d.GetReadVersion() != 1 || d.GetId() != 0 || d.GetFileType() != lancepb.DeletionFile_ARROW_ARRAY {
		t.Errorf("full path: %d %v %v", f, d, err)
	}
}

// TestRoundTripProperty encodes random deletion sets of sizes around the
// threshold and decodes them.
func TestRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 2, 100, BitmapThreshold - 1, BitmapThreshold, BitmapThreshold + 1, 70000} {
		phys := uint64(n + rng.IntN(3*n+1))
		bm := roaring.New()
		for bm.GetCardinality() < uint64(n) {
			bm.Add(uint32(rng.Uint64N(phys)))
		}
		df, key, data, err := Encode(9, bm, 4)
		if err != nil {
			t.Fatal(err)
		}
		if want := n >= BitmapThreshold; (df.FileType == lancepb.DeletionFile_BITMAP) != want {
			t.Errorf("n=%d: %s", n, df.FileType)
		}
		f, pd, err := ParseKey(key)
		if err != nil || f != 9 || pd.Id != df.Id || pd.ReadVersion != 4 || pd.FileType != df.FileType {
			t.Errorf("n=%d: key %s parses to %d %v %v", n, key, f, pd, err)
		}
		got, err := Decode(df, data, phys)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !got.Equals(bm) {
			t.Errorf("n=%d: round trip differs", n)
		}
		if _, err := Decode(df, data, uint64(bm.Maximum())); err == nil {
			t.Errorf("n=%d: max offset %d accepted with as many physical rows", n, bm.Maximum())
		}
	}
	if _, _, _, err := Encode(0, roaring.New(), 1); err == nil {
		t.Error("empty bitmap encoded")
	}
}

// TestReadersAcceptOtherForms: unsorted, uncompressed and LZ4 .arrow files
// decode; duplicates, nulls, wrong types and counts are corruption.
func TestReadersAcceptOtherForms(t *testing.T) {
	df := &lancepb.DeletionFile{FileType: lancepb.DeletionFile_ARROW_ARRAY}
	for _, codec := range []arrowipc.Compression{arrowipc.None, arrowipc.LZ4Frame, arrowipc.ZSTD} {
		data, err := EncodeArrow([]uint32{9, 2, 7}, codec)
		if err != nil {
			t.Fatal(err)
		}
		bm, err := Decode(df, data, 10)
		if err != nil || !reflect.DeepEqual(bm.ToArray(), []uint32{2, 7, 9}) {
			t.Errorf("%s: %v %v", codec, bm, err)
		}
		if _, err := Decode(&lancepb.DeletionFile{NumDeletedRows: 4}, data, 10); err == nil {
			t.Errorf("%s: count mismatch accepted", codec)
		}
	}
	dup, _ := EncodeArrow([]uint32{1, 1}, arrowipc.ZSTD)
	if _, err := Decode(df, dup, 10); err == nil {
		t.Error("duplicate offsets accepted")
	}
	s := &arrowipc.Schema{Fields: []arrowipc.Field{{Name: ColumnName, Type: arrowipc.TInt64}}}
	wrong, _ := arrowipc.WriteFile(s, []*arrowipc.Batch{{Len: 1, Columns: []*arrowipc.Array{arrowipc.FixedArray(arrowipc.TInt64, []int64{1}, nil)}}}, arrowipc.None)
	if _, err := Decode(df, wrong, 10); err == nil {
		t.Error("int64 column accepted")
	}
	s.Fields[0].Type, s.Fields[0].Nullable = arrowipc.TUint32, true
	nulls, _ := arrowipc.WriteFile(s, []*arrowipc.Batch{{Len: 2, Columns: []*arrowipc.Array{arrowipc.FixedArray(arrowipc.TUint32, []uint32{1, 2}, []bool{true, false})}}}, arrowipc.None)
	if _, err := Decode(df, nulls, 10); err == nil {
		t.Error("null offsets accepted")
	}
	if _, err := Decode(&lancepb.DeletionFile{FileType: lancepb.DeletionFile_BITMAP}, []byte("not a bitmap"), 10); err == nil {
		t.Error("junk bitmap accepted")
	}
	if _, err := Decode(&lancepb.DeletionFile{FileType: 7}, nil, 10); err == nil {
		t.Error("unknown type accepted")
	}
}

// lanceModules is node and the node_modules of the project's LanceDB
// install (make tools; skipped without it, a failure under CI=true).
func lanceModules(t *testing.T) (string, string) {
	t.Helper()
	in := lancedb.Require(t)
	return in.Node, in.NodeModules
}

func readback(t *testing.T, out any, args ...string) {
	t.Helper()
	node, mods := lanceModules(t)
	cmd := exec.Command(node, append([]string{"testdata/readback.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "LANCEDB_MODULES="+mods)
	b, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("readback.mjs %v: %v\n%s", args, err, msg)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("readback.mjs %v: %v: %s", args, err, b)
	}
}

// TestLanceDBReadsOurs swaps the deletion file LanceDB wrote for one we
// encoded (same count, different rows; in every codec) and checks that
// LanceDB then hides exactly our rows.
func TestLanceDBReadsOurs(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		pred  string
		ours  func() *roaring.Bitmap
		codec arrowipc.Compression
	}{
		{"arrow zstd", 100, "id IN (1, 2, 3)", func() *roaring.Bitmap { return roaring.BitmapOf(90, 10, 55) }, arrowipc.ZSTD},
		{"arrow lz4", 100, "id IN (1, 2, 3)", func() *roaring.Bitmap { return roaring.BitmapOf(99, 0, 50) }, arrowipc.LZ4Frame},
		{"arrow none", 100, "id IN (1, 2, 3)", func() *roaring.Bitmap { return roaring.BitmapOf(4, 5, 6) }, arrowipc.None},
		{"bitmap", 12000, "id < 5000", func() *roaring.Bitmap {
			bm := roaring.New()
			for i := uint32(0); i < 10000; i += 2 {
				bm.Add(i)
			}
			return bm
		}, arrowipc.ZSTD},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var files []string
			readback(t, &files, "create", dir, fmt.Sprint(c.n), c.pred)
			if len(files) != 1 {
				t.Fatalf("LanceDB wrote %v", files)
			}
			frag, df, err := ParseKey(Dir + "/" + files[0])
			if err != nil {
				t.Fatal(err)
			}
			bm := c.ours()
			ndf, _, data, err := Encode(frag, bm, df.ReadVersion)
			if err != nil {
				t.Fatal(err)
			}
			if ndf.FileType != df.FileType {
				t.Fatalf("we chose %s, LanceDB %s", ndf.FileType, df.FileType)
			}
			if ndf.FileType == lancepb.DeletionFile_ARROW_ARRAY {
				if data, err = EncodeArrow(bm.ToArray(), c.codec); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "t.lance", Key(frag, df))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var live struct {
				Count int      `json:"count"`
				Live  []uint32 `json:"live"`
			}
			readback(t, &live, "live", dir)
			var want []uint32
			for i := 0; i < c.n; i++ {
				if !bm.Contains(uint32(i)) {
					want = append(want, uint32(i))
				}
			}
			if !reflect.DeepEqual(live.Live, want) {
				t.Errorf("LanceDB returns %d rows, want %d (our deletions %v...)", len(live.Live), len(want), bm.ToArray()[:min(3, int(bm.GetCardinality()))])
			}
			if c.codec == arrowipc.None && ndf.FileType == lancepb.DeletionFile_ARROW_ARRAY {
				// apache-arrow (no compression support in 18.1) reads it too.
				var js struct {
					Name     string   `json:"name"`
					Type     string   `json:"type"`
					Nullable bool     `json:"nullable"`
					Values   []uint32 `json:"values"`
				}
				readback(t, &js, "arrowjs", path)
				if js.Name != ColumnName || js.Type != "Uint32" || js.Nullable || !reflect.DeepEqual(js.Values, bm.ToArray()) {
					t.Errorf("apache-arrow reads %+v", js)
				}
			}
		})
	}
}
