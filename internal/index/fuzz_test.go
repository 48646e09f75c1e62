package index

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// corpusSegmentFiles returns LanceDB's segment files of the corpus by name.
func corpusSegmentFiles(t testing.TB, name string) [][]byte {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(lancedb.CorpusRoot(), "*", "_indices", "*", name))
	var out [][]byte
	for _, p := range ps {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("no %s in the corpus", name)
	}
	return out
}

func FuzzDecodeRowAddrMap(f *testing.F) {
	for _, raw := range corpusSegmentFiles(f, BitmapLookupFile) {
		bm, err := ReadBitmap(memReader(raw))
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range bm.Maps {
			b, _ := m.MarshalBinary()
			f.Add(b)
		}
	}
	f.Add([]byte{1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeRowAddrMap(b)
		if err != nil {
			return
		}
		enc, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeRowAddrMap(enc)
		if err != nil {
			t.Fatalf("re-encoded map does not decode: %v", err)
		}
		a1, _ := m.Addrs(func(uint32) (uint64, bool) { return 3, true })
		a2, _ := m2.Addrs(func(uint32) (uint64, bool) { return 3, true })
		if len(a1) != len(a2) {
			t.Fatalf("round trip changed the map: %d vs %d addresses", len(a1), len(a2))
		}
	})
}

func FuzzReadBTree(f *testing.F) {
	datas, lookups := corpusSegmentFiles(f, BTreeDataFile), corpusSegmentFiles(f, BTreeLookupFile)
	for i := range datas {
		f.Add(datas[i], lookups[i])
	}
	f.Fuzz(func(t *testing.T, data, lookup []byte) {
		bt, err := ReadBTree(memReader(data), memReader(lookup))
		if err != nil {
			return
		}
		_ = bt.Entries.Sorted()
	})
}

func FuzzReadBitmap(f *testing.F) {
	for _, b := range corpusSegmentFiles(f, BitmapLookupFile) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bm, err := ReadBitmap(memReader(b))
		if err != nil {
			return
		}
		_, _ = bm.Entries(func(uint32) (uint64, bool) { return 2, true })
	})
}

// TestDecodersRejectDamage: every truncation and a sample of byte flips of
// LanceDB's segment files give an error or a decode, never a panic.
func TestDecodersRejectDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bm := corpusSegmentFiles(t, BitmapLookupFile)[0]
	data, lookup := corpusSegmentFiles(t, BTreeDataFile)[0], corpusSegmentFiles(t, BTreeLookupFile)[0]
	for cut := 0; cut < len(bm); cut += 7 {
		if _, err := ReadBitmap(memReader(bm[:cut])); err == nil {
			t.Errorf("bitmap file cut at %d decodes", cut)
		}
	}
	for cut := 0; cut < len(lookup); cut += 7 {
		if _, err := ReadBTree(memReader(data), memReader(lookup[:cut])); err == nil {
			t.Errorf("page_lookup cut at %d decodes", cut)
		}
	}
	for range 2000 {
		for _, src := range [][]byte{bm, data, lookup} {
			b := bytes.Clone(src)
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			_, _ = ReadBitmap(memReader(b))
			_, _ = ReadBTree(memReader(b), memReader(lookup))
			_, _ = ReadBTree(memReader(data), memReader(b))
		}
	}
	// A RowAddrTreeMap with a size past its end, a duplicate fragment, and
	// trailing bytes.
	for _, b := range [][]byte{
		{1, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0},
		{2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 9},
		{255, 255, 255, 255},
	} {
		if _, err := DecodeRowAddrMap(b); err == nil {
			t.Errorf("map %x decodes", b)
		}
	}
}

// TestRandomRoundTrip: random columns of every kind family (with nulls,
// duplicates, NaN and -0 for floats, empty strings), up to three btree
// pages, write and read back to the same sorted entries; page lookups
// hold each page's first and last value and its null count.
func TestRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	types := []struct {
		logical string
		kind    file.Kind
	}{{"int32", file.KindInt32}, {"int64", file.KindInt64}, {"uint64", file.KindUint64}, {"double", file.KindFloat64},
		{"float", file.KindFloat32}, {"string", file.KindUtf8}, {"binary", file.KindBinary}, {"bool", file.KindBool}, {"int8", file.KindInt8}}
	for trial := range 40 {
		ty := types[trial%len(types)]
		tf := indexField(nil, "c", 0, ty.logical, true)
		dt, err := fieldType(tf)
		if err != nil {
			t.Fatalf("%s: %v", ty.logical, err)
		}
		if dt.Kind != ty.kind {
			t.Fatalf("%s decodes as %s", ty.logical, dt)
		}
		n := rng.IntN(10000)
		if trial < len(types) {
			n = 0
		}
		var parts []*file.Array
		addrs := make([]uint64, n)
		for i := range n {
			a := nullArray(dt, 1)
			if rng.IntN(5) != 0 {
				a.Valid[0] = 1
				v := rng.Uint64() % uint64(1+rng.IntN(50))
				switch {
				case dt.Kind == file.KindBool:
					a.Values[0] = byte(v & 1)
				case dt.IsVariable():
					s := []byte{}
					for range v % 7 {
						s = append(s, byte('a'+rng.IntN(3)))
					}
					a.Values, a.Offsets = s, []int64{0, int64(len(s))}
				case dt.Kind == file.KindFloat64 && v == 3:
					le.PutUint64(a.Values, 0x7ff8000000000001) // NaN
				case dt.Kind == file.KindFloat64 && v == 4:
					le.PutUint64(a.Values, 1<<63) // -0
				default:
					for k := range a.Values {
						a.Values[k] = byte(v >> (8 * k))
					}
				}
			}
			parts = append(parts, a)
			addrs[i] = uint64(rng.IntN(4))<<32 | uint64(i)
		}
		e := &Entries{Values: concat(dt, parts), Addrs: addrs}
		if n == 0 {
			e.Values = nullArray(dt, 0)
		}
		want := e.Sorted()
		var data, lookup, bmf bytes.Buffer
		if _, _, err := WriteBTree(&data, &lookup, tf, e); err != nil {
			t.Fatalf("%s: %v", ty.logical, err)
		}
		bt, err := ReadBTree(memReader(data.Bytes()), memReader(lookup.Bytes()))
		if err != nil {
			t.Fatalf("%s, %d rows: %v", ty.logical, n, err)
		}
		if ok, d := bt.Entries.Equal(want); !ok {
			t.Fatalf("%s btree, %d rows: %s", ty.logical, n, d)
		}
		if len(bt.Pages) != (n+BTreeBatchSize-1)/BTreeBatchSize {
			t.Fatalf("%s: %d pages for %d rows", ty.logical, len(bt.Pages), n)
		}
		for i, p := range bt.Pages {
			first, last := i*BTreeBatchSize, min(n, (i+1)*BTreeBatchSize)-1
			if !sameValue(p.Min, want.Values.Slice(first, first+1)) || !sameValue(p.Max, want.Values.Slice(last, last+1)) ||
				int(p.NullCount) != want.Values.Slice(first, last+1).NullCount() {
				t.Fatalf("%s: page %d lookup wrong", ty.logical, i)
			}
		}
		if _, err := WriteBitmap(&bmf, tf, e); err != nil {
			t.Fatal(err)
		}
		bm, err := ReadBitmap(memReader(bmf.Bytes()))
		if err != nil {
			t.Fatalf("%s bitmap: %v", ty.logical, err)
		}
		got, err := bm.Entries(nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, d := got.Equal(want); !ok {
			t.Fatalf("%s bitmap, %d rows: %s", ty.logical, n, d)
		}
	}
}
