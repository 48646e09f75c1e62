package scan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func scanDir(t *testing.T, dir string, o scan.Options) []string {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tb, err := scan.Open(ctx, b, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := tb.Write(ctx, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if out.Len() == 0 {
		lines = nil
	}
	if int(n) != len(lines) {
		t.Fatalf("Write reported %d rows, printed %d", n, len(lines))
	}
	return lines
}

var typesSchema = []lancedb.Column{
	{Name: "id", Type: "int64"},
	{Name: "i32", Type: "int32", Nullable: true},
	{Name: "f32", Type: "float32", Nullable: true},
	{Name: "f64", Type: "float64", Nullable: true},
	{Name: "b", Type: "bool", Nullable: true},
	{Name: "s", Type: "utf8", Nullable: true},
	{Name: "bin", Type: "binary", Nullable: true},
	{Name: "ts", Type: "timestamp[us]", Nullable: true},
	{Name: "vec", Type: "vector[4]", Nullable: true},
	{Name: "li", Type: "list<int32>", Nullable: true},
	{Name: "big", Type: "int64", Nullable: true},
}

// typesRow makes row id with a null in some column on most rows and
// awkward values (extreme integers, non-finite floats, escapes).
func typesRow(id int64) lancedb.Row {
	r := lancedb.Row{
		"id":  id,
		"i32": int32(id*7919 - 1_000_000),
		"f32": float32(id) / 3,
		"f64": float64(id) * 1.1,
		"b":   id%3 == 0,
		"s":   fmt.Sprintf("r%d \"q\"\n\t\\ é ☃ %s", id, strings.Repeat("x", int(id%17))),
		"bin": []byte{byte(id), byte(id >> 8), 0, 0xff},
		"ts":  time.UnixMicro(1_700_000_000_000_000 + id*1_000_003),
		"vec": []float32{float32(id), -float32(id) / 7, 0.1, float32(math.Pi)},
		"li":  []int32{int32(id), int32(-id)}[:id%3],
		"big": []int64{math.MaxInt64, math.MinInt64, 1<<53 + 1, -(1<<53 + 1)}[id%4],
	}
	switch id % 11 {
	case 1:
		r["f64"] = math.NaN()
	case 2:
		r["f64"] = math.Inf(-1)
	}
	col := typesSchema[1+int(id%int64(len(typesSchema)-1))].Name
	if id%5 != 0 {
		r[col] = nil
	}
	return r
}

func typesRows(lo, hi int64) []lancedb.Row {
	var rows []lancedb.Row
	for id := lo; id < hi; id++ {
		rows = append(rows, typesRow(id))
	}
	return rows
}

// canon turns one JSON row into a comparable string: keys sorted,
// float32 columns compared as float32, floats in one spelling.
func canon(t *testing.T, line []byte, float32Cols map[string]bool) (int64, string) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("row %s: %v", line, err)
	}
	idn, _ := m["id"].(json.Number)
	id, err := strconv.ParseInt(string(idn), 10, 64)
	if err != nil {
		t.Fatalf("row %s: no integer id", line)
	}
	for k, v := range m {
		m[k] = canonValue(v, float32Cols[k])
	}
	out, _ := json.Marshal(m)
	return id, string(out)
}

func canonValue(v any, f32 bool) any {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil && !f32 {
			return string(x)
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		if f == 0 {
			return "0" // JSON.stringify(-0) is "0": the oracle cannot tell
		}
		if f32 {
			return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case []any:
		for i := range x {
			x[i] = canonValue(x[i], f32)
		}
	case map[string]any:
		for k := range x {
			x[k] = canonValue(x[k], f32)
		}
	}
	return v
}

func lanceRows(t *testing.T, res *lancedb.Results, step int) [][]byte {
	t.Helper()
	var out struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(res.Steps[step].Result, &out); err != nil {
		t.Fatal(err)
	}
	rows := make([][]byte, len(out.Rows))
	for i, r := range out.Rows {
		rows[i] = r
	}
	return rows
}

func compare(t *testing.T, what string, got []string, want [][]byte, f32 map[string]bool) {
	t.Helper()
	type kv struct {
		id int64
		s  string
	}
	var g, w []kv
	for _, l := range got {
		id, s := canon(t, []byte(l), f32)
		g = append(g, kv{id, s})
	}
	for _, l := range want {
		id, s := canon(t, l, f32)
		w = append(w, kv{id, s})
	}
	byID := func(a, b kv) int { return int(a.id - b.id) }
	slices.SortFunc(g, byID)
	slices.SortFunc(w, byID)
	if len(g) != len(w) {
		t.Errorf("%s: %d rows, LanceDB reads %d", what, len(g), len(w))
	}
	bad := 0
	for i := 0; i < min(len(g), len(w)); i++ {
		if g[i] != w[i] {
			if bad++; bad <= 3 {
				t.Errorf("%s: row %d:\n got  %s\n want %s", what, i, g[i].s, w[i].s)
			}
		}
	}
}

// TestScanMatchesLanceDB builds a table of every type the harness writes
// (with nulls in every nullable column, several fragments, row deletions
// and a fully deleted fragment) and reads it with LanceDB and with Scan.
func TestScanMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	steps := []lancedb.Step{
		lancedb.Create(typesSchema, typesRows(0, 300)),             // v1
		lancedb.Add(typesRows(300, 9000)),                          // v2: several batches and pages
		lancedb.Add(typesRows(9000, 9100)),                         // v3
		lancedb.Delete("id % 7 = 3 OR (id >= 9000 AND id < 9100)"), // v4
		lancedb.Add(typesRows(9100, 9200)),                         // v5
	}
	read := len(steps)
	steps = append(steps,
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Version: 2}),
		lancedb.ReadRows(lancedb.ReadOpts{Columns: []string{"vec", "id", "s"}}),
	)
	res := lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: steps})
	tdir := filepath.Join(dir, "t.lance")
	f32 := map[string]bool{"f32": true, "vec": true}

	compare(t, "latest", scanDir(t, tdir, scan.Options{}), lanceRows(t, res, read), f32)
	compare(t, "version 2", scanDir(t, tdir, scan.Options{Version: 2, BatchRows: 1000}), lanceRows(t, res, read+1), f32)
	proj := scanDir(t, tdir, scan.Options{Columns: []string{"vec", "id", "s"}, BatchRows: 333})
	compare(t, "projection", proj, lanceRows(t, res, read+2), f32)
	// Views of the decoded pages, each printed before the next batch.
	compare(t, "views", scanDir(t, tdir, scan.Options{Views: true, BatchRows: 333}), lanceRows(t, res, read), f32)
	if !strings.HasPrefix(proj[0], `{"vec":`) {
		t.Errorf("projected row %s: columns not in the order asked", proj[0])
	}
	// Exactness: int64 extremes print as written, not through float64.
	all := strings.Join(scanDir(t, tdir, scan.Options{Columns: []string{"big"}}), "\n")
	for _, want := range []string{"9223372036854775807", "-9223372036854775808", "9007199254740993"} {
		if !strings.Contains(all, want) {
			t.Errorf("no big value %s in the scan", want)
		}
	}
}

func TestScanCorpus(t *testing.T) {
	for _, name := range []string{"plain", "deletes_arrow", "deletes_bin", "compacted", "indexed", "tagged"} {
		t.Run(name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, name)
			rows := scanDir(t, dir, scan.Options{})
			ids := map[int64]bool{}
			for _, l := range rows {
				var r struct {
					ID *int64  `json:"id"`
					S  *string `json:"s"`
				}
				if err := json.Unmarshal([]byte(l), &r); err != nil || r.ID == nil || r.S == nil {
					t.Fatalf("row %s: %v", l, err)
				}
				if *r.S != fmt.Sprintf("v%d", *r.ID) {
					t.Errorf("row %s: s is not v<id>", l)
				}
				if ids[*r.ID] {
					t.Errorf("id %d twice", *r.ID)
				}
				ids[*r.ID] = true
			}
			want := map[string]int{"plain": 30, "deletes_arrow": 18, "deletes_bin": 1000, "compacted": 18, "indexed": 35, "tagged": 30}[name]
			if len(ids) != want {
				t.Errorf("%d rows, want %d", len(ids), want)
			}
		})
	}
}

func TestScanErrors(t *testing.T) {
	dir := lancedb.CorpusDir(t, "plain")
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, o := range []scan.Options{{Columns: []string{"nope"}}, {Columns: []string{"id", "id"}}, {Version: 99}} {
		if _, err := scan.Open(ctx, b, o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}
