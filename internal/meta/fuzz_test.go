package meta

import (
	"os"
	"strings"
	"testing"
)

// Seeds are the real files of the LanceDB corpus; the fuzzers check that no
// input panics and that anything decoded re-encodes and decodes again.

func addSeeds(f *testing.F, match func(string) bool) {
	for _, p := range corpusFiles(f, match) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func FuzzDecodeManifestFile(f *testing.F) {
	addSeeds(f, isManifest)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifestFile(data)
		if err != nil {
			return
		}
		out, err := EncodeManifestFile(m)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		if _, err := DecodeManifestFile(out); err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		_ = CheckWrite(m.Manifest)
		for _, ix := range m.Indices {
			_, _, _ = FragmentBitmap(ix)
		}
	})
}

func FuzzDecodeTransaction(f *testing.F) {
	addSeeds(f, isTxn)
	f.Fuzz(func(t *testing.T, data []byte) {
		txn, err := DecodeTransaction(data)
		if err != nil {
			return
		}
		if _, err := EncodeTransaction(txn); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeHint(f *testing.F) {
	f.Add([]byte(`{"version":4}`))
	f.Add([]byte(`{"version":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeHint(data)
	})
}

func FuzzDecodeTag(f *testing.F) {
	addSeeds(f, func(p string) bool { return strings.Contains(p, "/_refs/tags/") })
	f.Fuzz(func(t *testing.T, data []byte) {
		if tag, err := DecodeTag(data); err == nil && tag.Version == 0 {
			t.Fatal("a tag without a version decoded")
		}
	})
}
