package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestConstantPagesWithNulls: a page whose non-null values are all one
// value is a constant layout with its levels in raw u16 buffers (no level
// counts in the layout): [rep, def] after an inline value, [value, rep,
// def] for a string. The nulls must survive the read; they once read as
// the constant.
func TestConstantPagesWithNulls(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "n", Type: "int32", Nullable: true},
		{Name: "s", Type: "utf8", Nullable: true}, {Name: "b", Type: "bool", Nullable: true}, {Name: "f", Type: "float64", Nullable: true}}
	rows := []lancedb.Row{
		{"id": int64(0), "n": nil, "s": nil, "b": true, "f": nil},
		{"id": int64(1), "n": int32(7), "s": "xyz", "b": nil, "f": nil},
		{"id": int64(2), "n": int32(7), "s": nil, "b": true, "f": nil},
	}
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: []lancedb.Step{lancedb.Create(schema, rows)}})
	files, _ := filepath.Glob(filepath.Join(dir, "t.lance", "data", "*.lance"))
	if len(files) != 1 {
		t.Fatalf("%d data files", len(files))
	}
	fh, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	f, err := Open(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, s, b, fl := all.Column("n"), all.Column("s"), all.Column("b"), all.Column("f")
	for i, want := range []struct {
		n    int32
		s    string
		b, f bool // valid
	}{{0, "", true, false}, {7, "xyz", false, false}, {7, "", true, false}} {
		if got := n.IsValid(i); got != (want.n != 0) || got && n.Int32s()[i] != want.n {
			t.Errorf("row %d: n valid=%v %v, want %d", i, got, n.Int32s()[i], want.n)
		}
		if got := s.IsValid(i); got != (want.s != "") || got && string(s.Bytes(i)) != want.s {
			t.Errorf("row %d: s valid=%v %q, want %q", i, got, s.Bytes(i), want.s)
		}
		if got := b.IsValid(i); got != want.b || got && !b.Bool(i) {
			t.Errorf("row %d: b valid=%v, want %v (true)", i, got, want.b)
		}
		if fl.IsValid(i) != want.f {
			t.Errorf("row %d: f valid", i)
		}
	}
}
