package fts

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The seeds in testdata are LanceDB 0.39's bytes (ftsFixture): its token
// FST (1015 tokens) and token alpha3's two posting blocks (200 postings:
// one full block, one tail of 72).
func seed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSeedsDecode: the seeds decode as the fixture's data says.
func TestSeedsDecode(t *testing.T) {
	keys, vals, err := ReadFSTMap(seed(t, "tokens.fst"))
	if err != nil || len(keys) != 1015 || !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatalf("fst: %d keys, sorted %v, %v", len(keys), slices.IsSortedFunc(keys, bytes.Compare), err)
	}
	ids := slices.Sorted(slices.Values(vals))
	for i, v := range ids {
		if v != uint64(i) {
			t.Fatalf("fst values are not 0..1014: %d at %d", v, i)
		}
	}
	p, err := DecodePostings([][]byte{seed(t, "block_full.bin"), seed(t, "block_tail.bin")}, 200, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range p.Docs {
		if d != uint32(5*i+3) || p.Freqs[i] != 1 {
			t.Fatalf("posting %d: doc %d freq %d, want doc %d freq 1", i, d, p.Freqs[i], 5*i+3)
		}
	}
}

func FuzzReadFSTMap(f *testing.F) {
	f.Add(seed(f, "tokens.fst"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, vals, err := ReadFSTMap(b)
		if err == nil && len(keys) != len(vals) {
			t.Fatalf("%d keys, %d values", len(keys), len(vals))
		}
	})
}

func FuzzDecodePostings(f *testing.F) {
	f.Add(seed(f, "block_full.bin"), seed(f, "block_tail.bin"), uint16(200))
	f.Add(seed(f, "block_tail.bin"), []byte{}, uint16(72))
	f.Fuzz(func(t *testing.T, a, b []byte, n uint16) {
		blocks := [][]byte{a}
		if len(b) > 0 {
			blocks = append(blocks, b)
		}
		p, err := DecodePostings(blocks, int(n), false)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		enc, err := EncodePostings(p, false)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodePostings(enc, int(n), false)
		if err != nil || !slices.Equal(p.Docs, q.Docs) || !slices.Equal(p.Freqs, q.Freqs) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
