package fts

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWriteFSTMapRoundTrip: maps written here read back as the same keys
// and values, including the empty key, shared prefixes, nodes of more
// than 32 and of all 256 transitions, and values of up to 8 bytes; the
// LanceDB seed's map re-encodes to the same content.
func TestWriteFSTMapRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	wide := [][]byte{}
	for c := range 256 {
		wide = append(wide, []byte{byte(c), 'x'})
	}
	seedKeys, seedVals, err := ReadFSTMap(seed(t, "tokens.fst"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][][]byte{
		"none":  {},
		"empty": {{}},
		"words": {[]byte(""), []byte("a"), []byte("ab"), []byte("abc"), []byte("b"), []byte("run")},
		"wide":  wide,
		"seed":  seedKeys,
	}
	var random [][]byte
	for range 2000 {
		k := make([]byte, r.IntN(12))
		for i := range k {
			k[i] = byte('a' + r.IntN(40))
		}
		random = append(random, k)
	}
	slices.SortFunc(random, bytes.Compare)
	cases["random"] = slices.CompactFunc(random, bytes.Equal)
	for name, keys := range cases {
		t.Run(name, func(t *testing.T) {
			vals := make([]uint64, len(keys))
			for i := range vals {
				vals[i] = uint64(i)
				if name == "wide" {
					vals[i] = uint64(i) << 50
				}
			}
			if name == "seed" {
				vals = seedVals
			}
			b, err := WriteFSTMap(keys, vals)
			if err != nil {
				t.Fatal(err)
			}
			k2, v2, err := ReadFSTMap(b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(k2, keys, bytes.Equal) || !slices.Equal(v2, vals) {
				t.Fatalf("round trip: %d keys, want %d", len(k2), len(keys))
			}
		})
	}
	if _, err := WriteFSTMap([][]byte{[]byte("b"), []byte("a")}, []uint64{0, 1}); err == nil {
		t.Fatal("unsorted keys accepted")
	}
}
