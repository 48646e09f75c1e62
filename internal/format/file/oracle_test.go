package file

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// canon renders value i of a in the form gen.mjs prints LanceDB's read in.
func canon(a *Array, i int) any {
	if !a.IsValid(i) {
		return nil
	}
	switch t := a.Type; {
	case t.Kind == KindBool:
		return a.Bool(i)
	case t.IsVariable():
		return hex.EncodeToString(a.Values[a.Offsets[i]:a.Offsets[i+1]])
	case t.Kind == KindList || t.Kind == KindLargeList:
		out := []any{}
		for k := a.Offsets[i]; k < a.Offsets[i+1]; k++ {
			out = append(out, canon(a.Children[0], int(k)))
		}
		return out
	case t.Kind == KindFixedSizeList:
		out := []any{}
		for k := 0; k < t.Size; k++ {
			out = append(out, canon(a.Children[0], i*t.Size+k))
		}
		return out
	case t.Kind == KindStruct:
		out := map[string]any{}
		for _, c := range a.Children {
			out[c.Name] = canon(c, i)
		}
		return out
	default:
		w := t.ByteWidth()
		return hex.EncodeToString(a.Values[i*w : (i+1)*w])
	}
}

func canonColumn(a *Array) []any {
	out := make([]any, a.Len)
	for i := range out {
		out[i] = canon(a, i)
	}
	return out
}

type oracle struct {
	Rows    int                        `json:"rows"`
	Columns map[string]json.RawMessage `json:"columns"`
}

func loadOracle(t testing.TB, path string) *oracle {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	o := &oracle{}
	if err := json.Unmarshal(raw, o); err != nil {
		t.Fatal(err)
	}
	return o
}

func openFile(t testing.TB, path string) *File {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(fh, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// oracleFiles lists (data file, oracle) pairs in dir.
func oracleFiles(t testing.TB, dir string) [][2]string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.lance"))
	var out [][2]string
	for _, p := range m {
		base := strings.TrimSuffix(p, ".lance")
		for _, o := range []string{base + ".json.gz", base + ".json"} {
			if _, err := os.Stat(o); err == nil {
				out = append(out, [2]string{p, o})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// compareWithOracle reads every column of the file and checks it against
// LanceDB's read; it reports each differing column once.
func compareWithOracle(t *testing.T, lance, oraclePath string) {
	f := openFile(t, lance)
	o := loadOracle(t, oraclePath)
	if int(f.NumRows()) != o.Rows {
		t.Fatalf("rows %d, LanceDB read %d", f.NumRows(), o.Rows)
	}
	for _, fl := range f.Schema.Fields {
		want, ok := o.Columns[fl.Name]
		if !ok {
			t.Errorf("%s: LanceDB's read has no such column", fl.Name)
			continue
		}
		b, err := f.ReadAll([]string{fl.Name})
		if err != nil {
			t.Errorf("%s (%s): %v", fl.Name, fl.Type, err)
			continue
		}
		got := canonColumn(b.Columns[0])
		var w []any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		gj, _ := json.Marshal(got)
		var g []any
		_ = json.Unmarshal(gj, &g)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s (%s): %s", fl.Name, fl.Type, firstDiff(g, w))
		}
	}
}

func firstDiff(g, w []any) string {
	if len(g) != len(w) {
		return fmt.Sprintf("%d values, LanceDB read %d", len(g), len(w))
	}
	for i := range g {
		if !reflect.DeepEqual(g[i], w[i]) {
			gs, _ := json.Marshal(g[i])
			ws, _ := json.Marshal(w[i])
			return fmt.Sprintf("row %d: got %.200s, LanceDB read %.200s", i, gs, ws)
		}
	}
	return "?"
}

// TestCorpus checks every committed file against LanceDB's own read.
func TestCorpus(t *testing.T) {
	pairs := oracleFiles(t, "testdata")
	if len(pairs) == 0 {
		t.Fatal("no corpus files in testdata")
	}
	for _, p := range pairs {
		t.Run(filepath.Base(p[0]), func(t *testing.T) { compareWithOracle(t, p[0], p[1]) })
	}
}

// TestOracleDir checks the files in LANCE_ORACLE_DIR (made by gen.mjs).
func TestOracleDir(t *testing.T) {
	dir := os.Getenv("LANCE_ORACLE_DIR")
	if dir == "" {
		t.Skip("LANCE_ORACLE_DIR not set")
	}
	for _, p := range oracleFiles(t, dir) {
		t.Run(filepath.Base(p[0]), func(t *testing.T) { compareWithOracle(t, p[0], p[1]) })
	}
}
