package lancewal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestBloomMatchesLanceDB: the bloom filter of the keys LanceDB 0.39
// flushed into the corpus generations is byte-for-byte the one the writer
// builds for the same keys (SipHash-1-3 of the key, 32 KiB SBBF).
func TestBloomMatchesLanceDB(t *testing.T) {
	if got := bloomBytes(bloomExpectedKeys, bloomFPP); got != 32768 {
		t.Fatalf("bloom size %d, LanceDB's is 32768", got)
	}
	for _, tc := range []struct {
		gen  string
		keys []int64
	}{
		{"*_gen_1", []int64{0, 1, 2, 3, 4, 100, 101, 102, 103, 104}},
		{"*_gen_2", []int64{0, 1, 2, 3, 4, 200, 201, 202, 203, 204}},
	} {
		g, _ := filepath.Glob(filepath.Join(lancedb.CorpusRoot(), "memwal_1/_mem_wal/*", tc.gen, "bloom_filter.bin"))
		if len(g) != 1 {
			t.Fatalf("corpus generation %s: %v", tc.gen, g)
		}
		want, err := os.ReadFile(g[0])
		if err != nil {
			t.Fatal(err)
		}
		c := column{field: &pb.Field{Name: "id"}, t: file.DataType{Kind: file.KindInt64}, width: 8}
		ch := newChunk(c, len(tc.keys))
		bl := newBloom()
		for i, k := range tc.keys {
			if err := ch.add(k); err != nil {
				t.Fatal(err)
			}
			bl.insert(pkHash(ch, i))
		}
		if got := bl.bytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: bloom filter differs from LanceDB's", tc.gen)
		}
		ch.add(int64(5))
		if bl.contains(pkHash(ch, len(tc.keys))) {
			t.Logf("key 5 is a false positive (allowed, but unlikely)")
		}
	}
}

// TestShardIDsMatchLanceDB: shard ids derived as LanceDB derives them
// name the corpus shard directories.
func TestShardIDsMatchLanceDB(t *testing.T) {
	for _, tc := range []struct{ corpus, name string }{
		{"memwal_1", "unsharded"}, {"memwal_4", "bucket-0"}, {"memwal_4", "bucket-2"}, {"memwal_4", "bucket-3"},
	} {
		id := shardUUID(tc.name)
		if _, err := os.Stat(filepath.Join(lancedb.CorpusRoot(), tc.corpus, "_mem_wal", id)); err != nil {
			t.Errorf("%s: shard %s (%s) has no directory: %v", tc.corpus, tc.name, id, err)
		}
	}
	// Bucket routing: the oracle's murmur3 of 8-byte little-endian keys.
	if h := murmur3([]byte{}); h != 0 {
		t.Errorf("murmur3('') = %#x, want 0", h)
	}
	if h := murmur3([]byte("hello")); h != 0x248bfa47 {
		t.Errorf("murmur3(hello) = %#x, want 0x248bfa47", h)
	}
}
