package memwal

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// corpusFiles returns every real file of the LanceDB corpus match accepts.
func corpusFiles(t testing.TB, match func(rel string) bool) []string {
	t.Helper()
	return lancedb.CorpusFiles(t, match)
}

func isShardManifest(p string) bool {
	return strings.Contains(p, "/manifest/") && strings.HasSuffix(p, ".binpb")
}

func isManifest(p string) bool {
	return strings.Contains(p, "/_versions/") && strings.HasSuffix(p, ".manifest")
}

// Seeds are the real files of the LanceDB corpus; the fuzzers check that no
// input panics and that anything decoded re-encodes.
func addSeeds(f *testing.F, match func(string) bool) {
	for _, p := range corpusFiles(f, match) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func FuzzDecodeShardManifest(f *testing.F) {
	addSeeds(f, isShardManifest)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeShardManifest(data)
		if err != nil {
			return
		}
		if _, err := EncodeShardManifest(m); err != nil {
			t.Fatal(err)
		}
		_ = meta.UUIDString(m.GetShardId())
	})
}

// FuzzDetails: the MemWAL index details of any manifest that decodes read
// without a panic.
func FuzzDetails(f *testing.F) {
	addSeeds(f, isManifest)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := meta.DecodeManifestFile(data)
		if err != nil {
			return
		}
		if ix := Index(m.Indices); ix != nil {
			if d, err := Details(ix); err == nil {
				_ = Compacted(d)
				_ = Catchup(d)
				if _, err := EncodeDetails(d); err != nil {
					t.Fatalf("decoded details do not encode: %v", err)
				}
			}
		}
	})
}

func TestShardManifestNamesMatchVersions(t *testing.T) {
	for _, p := range corpusFiles(t, isShardManifest) {
		raw, _ := os.ReadFile(p)
		m, err := DecodeShardManifest(raw)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		v, ok := ParseBitName(strings.TrimSuffix(filepath.Base(p), ".binpb"))
		if !ok || v != m.GetVersion() {
			t.Errorf("%s: name says %d (ok=%v), manifest says %d", p, v, ok, m.GetVersion())
		}
		shard := filepath.Base(filepath.Dir(filepath.Dir(p)))
		if got := meta.UUIDString(m.GetShardId()); got != shard {
			t.Errorf("%s: shard id %s, directory %s", p, got, shard)
		}
	}
	for _, p := range corpusFiles(t, func(p string) bool { return strings.Contains(p, "/wal/") && strings.HasSuffix(p, ".arrow") }) {
		if _, ok := ParseBitName(strings.TrimSuffix(filepath.Base(p), ".arrow")); !ok {
			t.Errorf("%s: WAL entry name does not parse", p)
		}
	}
}

func TestNames(t *testing.T) {
	if BitName(1) != "1"+strings.Repeat("0", 63) || BitName(5) != "101"+strings.Repeat("0", 61) {
		t.Errorf("BitName(1) = %s, BitName(5) = %s", BitName(1), BitName(5))
	}
	for _, n := range []uint64{0, 1, 2, 3, 1234567, math.MaxUint64} {
		if got, ok := ParseBitName(BitName(n)); !ok || got != n {
			t.Errorf("ParseBitName(BitName(%d)) = %d, %v", n, got, ok)
		}
	}
	if _, ok := ParseBitName("10"); ok {
		t.Error("short bit name accepted")
	}
	if g, ok := ParseGenerationDir("138ce5c3_gen_12"); !ok || g != 12 {
		t.Errorf("ParseGenerationDir = %d, %v", g, ok)
	}
}
