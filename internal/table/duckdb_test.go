package table

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/storage"
)

// duckdb returns a function running SQL through DuckDB (npm @duckdb/node-api,
// installed into bench/ by `make test`). Missing DuckDB skips the test, or
// fails it under CI=true: a real component a user runs must not be faked.
func duckdb(t *testing.T) func(sql string) []map[string]any {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "bench", "duckdb-query.mjs")
	_, errMod := os.Stat(filepath.Join(root, "bench", "node_modules", "@duckdb", "node-api"))
	node, errNode := exec.LookPath("node")
	if errMod != nil || errNode != nil {
		msg := "DuckDB (node + bench/node_modules/@duckdb/node-api) not installed; run `make tools`"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return func(sql string) []map[string]any {
		out, err := exec.Command(node, script, sql).CombinedOutput()
		if err != nil {
			t.Fatalf("duckdb: %v: %s", err, out)
		}
		var rows []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("duckdb output %q: %v", line, err)
			}
			rows = append(rows, r)
		}
		return rows
	}
}

// Fragments are plain Parquet: DuckDB reads every type with the same values.
func TestDuckDBReadsFragments(t *testing.T) {
	query := duckdb(t)
	dir := t.TempDir()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, _ := ParseSchema("id:int64,cat:string,val:float64,ok:bool,raw:bytes,ts:timestamp", []string{"id"})
	w, err := NewFragmentWriter(ctx, b, s)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for i := int64(0); i < 1000; i++ {
		var cat any = "c" + string(rune('a'+i%3))
		if i%10 == 0 {
			cat = nil
		}
		rows = append(rows, Row{i, cat, float64(i) / 4, i%2 == 0, []byte{byte(i % 256)}, Timestamp(1_700_000_000_000_000 + i)})
	}
	if err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	f, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.FromSlash(f.DataFile.Path))
	got := query("SELECT count(*) AS n, sum(id) AS s, count(cat) AS c, sum(val) AS v, count(*) FILTER (WHERE ok) AS t, " +
		"min(epoch_us(ts)) AS ts0, max(octet_length(raw)) AS rl FROM read_parquet('" + path + "')")
	want := map[string]any{"n": "1000", "s": "499500", "c": "900", "v": 124875.0, "t": "500", "ts0": "1700000000000000", "rl": "1"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v (%T), want %v", k, got[0][k], got[0][k], v)
		}
	}
	types := map[string]string{}
	for _, r := range query("DESCRIBE SELECT * FROM read_parquet('" + path + "')") {
		types[r["column_name"].(string)] = r["column_type"].(string)
	}
	for col, typ := range map[string]string{"id": "BIGINT", "cat": "VARCHAR", "val": "DOUBLE", "ok": "BOOLEAN", "raw": "BLOB", "ts": "TIMESTAMP WITH TIME ZONE"} {
		if types[col] != typ {
			t.Errorf("column %s has DuckDB type %q, want %q", col, types[col], typ)
		}
	}
}
