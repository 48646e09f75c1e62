package file

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// readEverything opens b and decodes every field, returning the first
// error. It must never panic.
func readEverything(b []byte) error {
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	for _, fl := range f.Schema.Fields {
		if _, err := f.ReadAll([]string{fl.Name}); err != nil {
			return err
		}
	}
	return nil
}

func corpusBytes(t testing.TB) map[string][]byte {
	m, _ := filepath.Glob(filepath.Join("testdata", "*.lance"))
	out := map[string][]byte{}
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	if len(out) == 0 {
		t.Fatal("no corpus")
	}
	return out
}

// TestTruncated: every prefix cut of a real file is refused with an error
// that blames the file, not a panic.
func TestTruncated(t *testing.T) {
	for name, b := range corpusBytes(t) {
		for _, cut := range []int{0, 1, 39, 40, len(b) / 2, len(b) - 41, len(b) - 40, len(b) - 1} {
			if cut < 0 || cut >= len(b) {
				continue
			}
			err := readEverything(b[:cut])
			if err == nil {
				t.Errorf("%s cut to %d bytes: no error", name, cut)
			} else if !errors.Is(err, ErrFormat) {
				t.Errorf("%s cut to %d bytes: %v does not wrap ErrFormat", name, cut, err)
			}
		}
	}
}

// TestCorruptPages flips bytes inside page data of real files: the reader
// must return (an error or some values), never panic.
func TestCorruptPages(t *testing.T) {
	for name, b := range corpusBytes(t) {
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		end := int(f.Footer.ColumnMetaStart)
		for k := 0; k < 64; k++ {
			c := bytes.Clone(b)
			pos := (k*7919 + 13) % end
			c[pos] ^= 0xff
			c[(pos+1)%end] ^= 0x5a
			_ = readEverything(c)
		}
		_ = name
	}
}

// TestErrorsAreOneLine: error messages fit on one line.
func TestErrorsAreOneLine(t *testing.T) {
	b := corpusBytes(t)["all_v22.lance"]
	for _, cut := range []int{10, len(b) - 1} {
		err := readEverything(b[:cut])
		if err == nil || bytes.ContainsRune([]byte(err.Error()), '\n') {
			t.Errorf("cut %d: %v", cut, err)
		}
	}
}
