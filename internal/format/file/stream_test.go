package file

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func canonJSON(t *testing.T, a *Array) string {
	t.Helper()
	b, err := json.Marshal(canonColumn(a))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStreamRangeTake: batches, ranges and takes give the same values as a
// full read, for every corpus file and field.
func TestStreamRangeTake(t *testing.T) {
	pairs := oracleFiles(t, "testdata")
	if d := os.Getenv("LANCE_ORACLE_DIR"); d != "" {
		pairs = append(pairs, oracleFiles(t, d)...)
	}
	for _, p := range pairs {
		f := openFile(t, p[0])
		t.Run(filepath.Base(p[0]), func(t *testing.T) {
			all, err := f.ReadAll(nil)
			if err != nil {
				t.Fatal(err)
			}
			n := int(f.NumRows())
			for _, batch := range []int{1, 7, 128, n + 5} {
				if batch == 1 && n > 400 {
					continue
				}
				st, err := f.Stream(nil, batch)
				if err != nil {
					t.Fatal(err)
				}
				got := make([][]any, len(all.Fields))
				for {
					b, err := st.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					for i, c := range b.Columns {
						if c.Len != b.NumRows {
							t.Fatalf("batch column %s has %d rows, batch %d", b.Fields[i].Name, c.Len, b.NumRows)
						}
						got[i] = append(got[i], canonColumn(c)...)
					}
				}
				for i, c := range all.Columns {
					if !reflect.DeepEqual(got[i], canonColumn(c)) {
						t.Errorf("stream batch %d: %s differs from the full read", batch, all.Fields[i].Name)
					}
				}
			}
			r := rand.New(rand.NewSource(int64(n)))
			lo := r.Intn(n)
			hi := lo + r.Intn(n-lo+1)
			rb, err := f.ReadRange(nil, uint64(lo), uint64(hi))
			if err != nil {
				t.Fatal(err)
			}
			rows := []uint64{uint64(n - 1), 0, uint64(n / 2), uint64(n / 2), uint64(r.Intn(n))}
			tb, err := f.Take(nil, rows)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range all.Columns {
				if canonJSON(t, rb.Columns[i]) != canonJSON(t, c.Slice(lo, hi)) {
					t.Errorf("range [%d,%d): %s differs", lo, hi, all.Fields[i].Name)
				}
				idx := make([]int, len(rows))
				for k, x := range rows {
					idx[k] = int(x)
				}
				if canonJSON(t, tb.Columns[i]) != canonJSON(t, c.Take(idx)) {
					t.Errorf("take %v: %s differs", rows, all.Fields[i].Name)
				}
			}
		})
	}
}

// TestProjection reads a subset of fields and rejects unknown ones.
func TestProjection(t *testing.T) {
	f := openFile(t, filepath.Join("testdata", "all_v22.lance"))
	b, err := f.ReadRange([]string{"st2", "int64"}, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Columns) != 2 || b.Fields[0].Name != "st2" || b.Columns[1].Len != 7 {
		t.Fatalf("projection: %+v", b.Fields)
	}
	if _, err := f.ReadAll([]string{"nope"}); err == nil {
		t.Fatal("unknown field accepted")
	}
	if _, err := f.ReadRange(nil, 5, 3); err == nil {
		t.Fatal("inverted range accepted")
	}
	if _, err := f.Take(nil, []uint64{f.NumRows()}); err == nil {
		t.Fatal("take past the end accepted")
	}
}
