package meta

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func detect(t *testing.T, dir string) bool {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ok, err := Detect(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestDetect(t *testing.T) {
	names, err := lancedb.CorpusNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !detect(t, lancedb.CorpusDir(t, name)) {
			t.Errorf("%s: not detected as Lance", name)
		}
	}
	if detect(t, t.TempDir()) {
		t.Error("an empty directory is Lance")
	}
	// The private format: same names, "CMPD" framing.
	priv := t.TempDir()
	if err := os.MkdirAll(filepath.Join(priv, "_versions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(priv, ManifestKey(NamingV2, 1)), []byte("CMPD\x01payload-crc!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if detect(t, priv) {
		t.Error("a private-format table is Lance")
	}
	// A damaged newest manifest does not hide a Lance table.
	dir := lancedb.CorpusDir(t, "plain")
	if err := os.Truncate(filepath.Join(dir, ManifestKey(NamingV2, 3)), 10); err != nil {
		t.Fatal(err)
	}
	if !detect(t, dir) {
		t.Error("plain with a truncated newest manifest: not Lance")
	}
	// Nor does a single damaged manifest: Lance's data file names decide.
	one := lancedb.CorpusDir(t, "deletes_bin")
	for v := uint64(1); v <= 2; v++ {
		if err := os.WriteFile(filepath.Join(one, ManifestKey(NamingV2, v)), []byte("garbage!"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !detect(t, one) {
		t.Error("every manifest damaged: not Lance")
	}
}
