package file

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestCheckCorpus: every page of every corpus file decodes under Check,
// which reports each page once: in 2.1+ the rows reported are the file's
// rows once per leaf column.
func TestCheckCorpus(t *testing.T) {
	for name, b := range corpusBytes(t) {
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var rows, size uint64
		if err := f.Check(func(r, n uint64) { rows += r; size += n }); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if size == 0 || size > uint64(len(b)) {
			t.Errorf("%s: %d page bytes reported of a %d-byte file", name, size, len(b))
		}
		if f.Version() != V2_0 {
			if want := f.NumRows() * uint64(len(f.Columns)); rows != want {
				t.Errorf("%s: %d rows reported, want %d (%d rows × %d columns)", name, rows, want, f.NumRows(), len(f.Columns))
			}
		}
	}
}

// TestCheckNamesThePage damages one page at a time (its buffers
// overwritten with a pattern, the file's size and metadata unchanged):
// whenever reading the file's columns fails, Check fails too, naming
// exactly that column and page. Damage that still decodes (plain
// fixed-width values, as in packed_v20.lance) is not found: most is.
// CheckKeepFSST, which does not expand strings, finds nearly as much and
// never fails where Check passes.
func TestCheckNamesThePage(t *testing.T) {
	found, tried, keepFound := 0, 0, 0
	var keepMissed []string
	for name, b := range corpusBytes(t) {
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for c, cm := range f.Columns {
			for i, p := range cm.GetPages() {
				if len(p.GetBufferOffsets()) == 0 {
					continue
				}
				for _, fill := range []byte{0xff, 0x7b} {
					d := bytes.Clone(b)
					for k, off := range p.GetBufferOffsets() {
						n := p.GetBufferSizes()[k]
						for j := off; j < off+n; j++ {
							d[j] = fill ^ byte(j)
						}
					}
					tried++
					df, err := Open(bytes.NewReader(d), int64(len(d)))
					if err != nil {
						t.Fatalf("%s: metadata changed: %v", name, err)
					}
					cerr := df.Check(nil)
					if rerr := readEverything(d); rerr != nil && cerr == nil {
						t.Errorf("%s column %d page %d: a read fails (%v) but Check passes", name, c, i, rerr)
					}
					kerr := df.CheckKeepFSST(nil)
					if kerr != nil && cerr == nil {
						t.Errorf("%s column %d page %d: CheckKeepFSST fails (%v) where Check passes", name, c, i, kerr)
					}
					if cerr == nil {
						continue
					}
					found++
					if kerr != nil {
						keepFound++
						var pe *PageError
						if !errors.As(kerr, &pe) || pe.Column != c || pe.Page != i {
							t.Errorf("%s: damaged column %d page %d, CheckKeepFSST says %v", name, c, i, kerr)
						}
					} else {
						keepMissed = append(keepMissed, fmt.Sprintf("%s column %d page %d: %v", name, c, i, cerr))
					}
					var pe *PageError
					if !errors.As(cerr, &pe) || pe.Column != c || pe.Page != i {
						t.Errorf("%s: damaged column %d page %d, Check says %v", name, c, i, cerr)
					}
					if !errors.Is(cerr, ErrFormat) {
						t.Errorf("%s: %v does not wrap ErrFormat", name, cerr)
					}
				}
			}
		}
	}
	if found < tried/2 {
		t.Errorf("Check found %d of %d damaged pages", found, tried)
	}
	// Without expanding strings, the structure alone (chunk sizes,
	// offsets, symbol tables, bit widths) still gives most damage away
	// (on this corpus: all of it).
	if keepFound < found*9/10 {
		t.Errorf("CheckKeepFSST found %d of the %d damaged pages Check found: %v", keepFound, found, keepMissed)
	}
	t.Logf("Check found %d of %d damaged pages; CheckKeepFSST (strings not expanded) %d, missing %v", found, tried, keepFound, keepMissed)
}

// TestWellFormed: the checks a decoder's output gets, each failing alone.
func TestWellFormed(t *testing.T) {
	str := DataType{Kind: KindUtf8}
	i32 := DataType{Kind: KindInt32}
	cases := []struct {
		name string
		a    *Array
		ok   bool
	}{
		{"strings", &Array{Type: str, Len: 2, Offsets: []int64{0, 1, 3}, Values: []byte("abc")}, true},
		{"offsets past values", &Array{Type: str, Len: 2, Offsets: []int64{0, 1, 4}, Values: []byte("abc")}, false},
		{"offsets backwards", &Array{Type: str, Len: 2, Offsets: []int64{0, 2, 1}, Values: []byte("abc")}, false},
		{"offsets short", &Array{Type: str, Len: 2, Offsets: []int64{0, 1}, Values: []byte("abc")}, false},
		{"validity short", &Array{Type: i32, Len: 9, Valid: []byte{0xff}, Values: make([]byte, 36)}, false},
		{"values short", &Array{Type: i32, Len: 3, Values: make([]byte, 11)}, false},
		{"list items short", &Array{Type: DataType{Kind: KindList}, Len: 1, Offsets: []int64{0, 3},
			Children: []*Array{{Type: i32, Len: 2, Values: make([]byte, 8)}}}, false},
		{"fixed-size list", &Array{Type: DataType{Kind: KindFixedSizeList, Size: 2}, Len: 2,
			Children: []*Array{{Type: i32, Len: 4, Values: make([]byte, 16)}}}, true},
		{"fixed-size list items short", &Array{Type: DataType{Kind: KindFixedSizeList, Size: 2}, Len: 2,
			Children: []*Array{{Type: i32, Len: 3, Values: make([]byte, 12)}}}, false},
		{"struct field short", &Array{Type: DataType{Kind: KindStruct}, Len: 2,
			Children: []*Array{{Name: "x", Type: i32, Len: 1, Values: make([]byte, 4)}}}, false},
	}
	for _, tc := range cases {
		err := tc.a.wellFormed()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestDictInRange: undict records the values whose index is past the
// dictionary, and Check refuses such a value unless its slot is null.
func TestDictInRange(t *testing.T) {
	dict := &block{n: 2, bits: 32, data: make([]byte, 8)}
	idx := &block{n: 4, bits: 8, data: []byte{0, 1, 7, 1}}
	vals, err := undict(idx, dict)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals.outOfDict) != 1 || vals.outOfDict[0] != 2 {
		t.Fatalf("out of range: %v, want [2]", vals.outOfDict)
	}
	for _, tc := range []struct {
		def []uint16
		ok  bool
	}{
		{nil, false},                 // every slot valid
		{[]uint16{0, 0, 1, 0}, true}, // the slot is null
		{[]uint16{0, 0, 0, 1}, false},
		{[]uint16{0, 0}, true}, // levels that do not pair with the values: not judged
	} {
		lp := &leafPage{values: vals, def: tc.def}
		if err := lp.dictInRange(); (err == nil) != tc.ok {
			t.Errorf("def %v: %v", tc.def, err)
		}
	}
	if ok, err := undict(&block{n: 2, bits: 8, data: []byte{1, 0}}, dict); err != nil || len(ok.outOfDict) != 0 {
		t.Errorf("indices in range: %v %v", ok.outOfDict, err)
	}
}
