package lancedb

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// CorpusRoot is the committed corpus of small LanceDB 0.39.0 tables
// (testdata/corpus/<name>/, each the contents of a <name>.lance table
// directory; see its README.md). It needs no node.
func CorpusRoot() string { return filepath.Join(packageDir(), "testdata", "corpus") }

// CorpusNames lists the corpus tables.
func CorpusNames() ([]string, error) {
	ents, err := os.ReadDir(CorpusRoot())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// CorpusDir copies corpus table name into a fresh t.TempDir() and returns
// the copy's path, <tmp>/<name>.lance, which tests may change. LanceDB
// opens it as table name of the database filepath.Dir(path).
func CorpusDir(t testing.TB, name string) string {
	t.Helper()
	src := filepath.Join(CorpusRoot(), name)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		t.Fatalf("no corpus table %q in %s", name, CorpusRoot())
	}
	dst := filepath.Join(t.TempDir(), name+".lance")
	if err := copyTree(src, dst); err != nil {
		t.Fatalf("copy corpus table %s: %v", name, err)
	}
	return dst
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// CorpusFiles returns every file under the committed corpus whose
// slash-separated path match accepts; none is a test failure.
func CorpusFiles(t testing.TB, match func(path string) bool) []string {
	t.Helper()
	var out []string
	root := CorpusRoot()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && match(filepath.ToSlash(p)) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no corpus files matched under %s", root)
	}
	return out
}
