package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceCompactCLI: --dry-run prints the groups and changes nothing;
// compact --defer-remap=true lands one Rewrite with an FRI version,
// LanceDB reads the same rows, and a second run finds nothing; by
// default the remap is inline (no FRI).
func TestLanceCompactCLI(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Deletes(t, "")
	files := snapshot(t, f.Dir)
	code, out, stderr := runCLI(t, "compact", f.Dir, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	plan := jsonLines(t, out)
	if len(plan) != 1 || plan[0]["dry_run"] != true || len(plan[0]["groups"].([]any)) != 1 {
		t.Fatalf("dry run: %s", out)
	}
	if got := snapshot(t, f.Dir); strings.Join(got, "\n") != strings.Join(files, "\n") {
		t.Fatal("the dry run changed the table")
	}
	code, out, stderr = runCLI(t, "compact", f.Dir, "--defer-remap=true")
	if code != 0 {
		t.Fatalf("compact: exit %d: %s", code, stderr)
	}
	res := jsonLines(t, out)
	if len(res) != 1 || res[0]["groups"] != float64(1) || res[0]["version"].(float64) <= float64(f.Version) || res[0]["defer_remap"] != true {
		t.Fatalf("compact: %s", out)
	}
	got := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := got.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	byID, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := lancedb.DiffByID(byID, f.Want); d != "" {
		t.Fatalf("LanceDB after compact: %s", d)
	}
	code, out, stderr = runCLI(t, "compact", f.Dir)
	if code != 0 || !strings.Contains(out, `"groups":0`) {
		t.Fatalf("second compact: exit %d: %s %s", code, out, stderr)
	}

	// The default on a fresh copy of the table: the remap is inline, no
	// FRI is written.
	g := lancedb.Deletes(t, "")
	code, out, stderr = runCLI(t, "compact", g.Dir)
	if code != 0 || !strings.Contains(out, `"defer_remap":false`) || strings.Contains(out, "frag_reuse_index") {
		t.Fatalf("inline compact: exit %d: %s %s", code, out, stderr)
	}
}

// TestLanceCompactInspectRemoved: on LanceDB's indexed table with a
// fragment deleted whole, inspect after a deferred compaction shows the
// FRI version with that fragment in removed_fragments.
func TestLanceCompactInspectRemoved(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	f.Run(t, lancedb.Delete("id >= 10 AND id < 20"))
	code, out, stderr := runCLI(t, "compact", f.Dir, "--defer-remap=true")
	if code != 0 || !strings.Contains(out, `"removed_fragments":[1]`) {
		t.Fatalf("compact: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "inspect", f.Dir)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	if !strings.Contains(strings.ReplaceAll(out, " ", ""), `"removed_fragments":[1]`) {
		t.Fatalf("inspect does not show fragment 1 removed: %s", out)
	}
}

// TestLanceCompactDryRunSkips: on a table whose first fragments an HNSW
// index covers, the dry run of a deferred compaction lists them under
// skipped with the index and the reason, and plans the others.
func TestLanceCompactDryRunSkips(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 300, "v")), lancedb.Add(lancedb.VectorRows(300, 600, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_hnsw_sq", "vec_idx", map[string]any{"numPartitions": 1}),
		lancedb.Add(lancedb.VectorRows(600, 700, "v")), lancedb.Add(lancedb.VectorRows(700, 800, "v")),
		lancedb.Delete("id % 5 = 0"))
	code, out, stderr := runCLI(t, "compact", f.Dir, "--dry-run", "--defer-remap=true")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	var plan struct {
		Groups []struct {
			Fragments []uint64 `json:"fragments"`
		} `json:"groups"`
		Skipped []struct {
			Fragment uint64 `json:"fragment"`
			Code     string `json:"code"`
			Reason   string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("dry run: %v: %s", err, out)
	}
	if len(plan.Groups) != 1 || fmt.Sprint(plan.Groups[0].Fragments) != "[2 3]" || len(plan.Skipped) != 2 {
		t.Fatalf("dry run: %s; want fragments 2 and 3 planned, 0 and 1 skipped", out)
	}
	for i, s := range plan.Skipped {
		if s.Fragment != uint64(i) || s.Code != "unremappable_index" || !strings.Contains(s.Reason, `vector index "vec_idx"`) {
			t.Errorf("skip %+v", s)
		}
	}
}

// TestLanceCompactThenLanceDBOptimize is the reproduction of the hazard
// a deferred remap left to LanceDB: 6 x 500 rows with a btree on id and a
// bitmap on cat, id % 10 = 0 deleted; compact (by default, and with
// --defer-remap=true followed by index remap); then LanceDB deletes
// id % 3 = 0 and runs optimize(). The btree and the bitmap count what a
// scan counts, an acknowledged delete deletes, a merge-insert of an
// existing key leaves one copy.
func TestLanceCompactThenLanceDBOptimize(t *testing.T) {
	lancedb.Require(t)
	for _, args := range [][]string{nil, {"--defer-remap=true"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 500))}
			for lo := int64(500); lo < 3000; lo += 500 {
				steps = append(steps, lancedb.Add(lancedb.BasicRows(lo, lo+500)))
			}
			f.Run(t, append(steps, lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
				lancedb.Delete("id % 10 = 0"))...)
			code, out, stderr := runCLI(t, append([]string{"compact", f.Dir}, args...)...)
			if code != 0 || !strings.Contains(out, `"groups":1`) {
				t.Fatalf("compact: exit %d: %s %s", code, out, stderr)
			}
			if len(args) > 0 {
				if code, out, stderr := runCLI(t, "index", "remap", f.Dir); code != 0 || !strings.Contains(out, `"removed":true`) {
					t.Fatalf("index remap: exit %d: %s %s", code, out, stderr)
				}
			}
			res := f.Run(t, lancedb.Open(), lancedb.Delete("id % 3 = 0"), lancedb.Optimize(lancedb.OptimizeOpts{}),
				lancedb.CountRows("id >= 0"), lancedb.CountRows("cat = 1"),
				lancedb.Delete("id >= 0 AND id < 100"), lancedb.CountRows("id < 100"),
				lancedb.PlainMergeInsert("id", []lancedb.Row{lancedb.BasicRow(101, "m101")}),
				lancedb.CountRows("id = 101"), lancedb.ReadRows(lancedb.ReadOpts{}))
			rows, err := res.Rows(9)
			if err != nil {
				t.Fatal(err)
			}
			scan, cat1 := int64(0), int64(0)
			for id := int64(0); id < 3000; id++ {
				if id%10 != 0 && id%3 != 0 {
					scan++
					if id%4 == 1 {
						cat1++
					}
				}
			}
			count := func(i int) int64 {
				n, err := res.Count(i)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := count(3); n != scan {
				t.Errorf("after LanceDB's optimize(): the btree counts %d rows, the scan %d", n, scan)
			}
			if n := count(4); n != cat1 {
				t.Errorf("after LanceDB's optimize(): the bitmap counts %d rows of cat 1, the scan %d", n, cat1)
			}
			if n := count(6); n != 0 {
				t.Errorf("an acknowledged delete of id < 100 left %d rows", n)
			}
			if n := count(8); n != 1 {
				t.Errorf("a merge-insert of key 101 left %d copies", n)
			}
			// 60 of the live rows have id < 100.
			if want := scan - 60; int64(len(rows)) != want {
				t.Errorf("LanceDB reads %d rows, want %d", len(rows), want)
			}
		})
	}
}

// dictRows are rows for dictSchema: strings and numbers from a few values
// (some null) in the dictionary columns, large strings and binaries
// beside. cat8 and full8 use all 128 int8 keys in every 300 rows, so the
// fragments' dictionaries together fill the key's range.
func dictRows(lo, hi int64) []lancedb.Row {
	words := []string{"alpha", "beta", "gamma", "delta ünïcödé", ""}
	i32s := []int64{10, -7, 100000, 0}
	f64s := []float64{1.5, -2.25, 3e10, math.Inf(1), 0}
	i64s := []int64{1 << 40, -3, 7, math.MinInt64}
	f32s := []float32{0.5, -1.25, 3}
	u16s := []int64{1, 65535, 300}
	var rows []lancedb.Row
	for i := lo; i < hi; i++ {
		r := lancedb.Row{"id": i, "cat": words[i%5], "cat8": fmt.Sprint("w", i%128), "name": fmt.Sprintf("n%d", i), "blob": []byte{byte(i), byte(i >> 8), 0xff},
			"n32": i32s[i%4], "f64": f64s[i%5], "i64": i64s[i%4], "f32": f32s[i%3], "u16": u16s[i%3], "i8": i % 100, "full8": float64(i%128) / 4, "flag": i%3 == 1}
		if i%7 == 0 {
			r["cat"], r["f64"] = nil, nil
		}
		if i%11 == 0 {
			r["name"], r["blob"], r["i64"], r["i8"], r["flag"] = nil, nil, nil, nil, nil
		}
		if i%13 == 0 {
			r["f32"] = nil
		}
		rows = append(rows, r)
	}
	return rows
}

// dictSchema has Arrow dictionary columns of strings and of numbers with
// several value and key types.
var dictSchema = []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "cat", Type: "dict<utf8>", Nullable: true},
	{Name: "cat8", Type: "dict<utf8,int8>"}, {Name: "name", Type: "large_utf8", Nullable: true}, {Name: "blob", Type: "large_binary", Nullable: true},
	{Name: "n32", Type: "dict<int32>"}, {Name: "f64", Type: "dict<float64,int8>", Nullable: true},
	{Name: "i64", Type: "dict<int64,uint8>", Nullable: true}, {Name: "f32", Type: "dict<float32,int16>", Nullable: true},
	{Name: "u16", Type: "dict<uint16,uint32>"}, {Name: "i8", Type: "dict<int8,int64>", Nullable: true},
	{Name: "full8", Type: "dict<float64,int8>"}, {Name: "flag", Type: "dict<bool,int8>", Nullable: true}}

// dictSchemaString is dictSchema as LanceDB describes it.
const dictSchemaString = "[{id int64} {cat dict<utf8>} {cat8 dict<utf8,int8>} {name large_utf8} {blob large_binary} " +
	"{n32 dict<int32>} {f64 dict<float64,int8>} {i64 dict<int64,uint8>} {f32 dict<float32,int16>} {u16 dict<uint16,uint32>} {i8 dict<int8,int64>} {full8 dict<float64,int8>} {flag dict<bool,int8>}]"

// lanceDBRowsJSON is LanceDB's read of the whole table, each row as JSON
// by id.
func lanceDBRowsJSON(t *testing.T, f *lancedb.Fixture) map[int64]string {
	t.Helper()
	rows, err := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{})).Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, r := range rows {
		id, ok := r.Int("id")
		if !ok {
			t.Fatalf("row without id: %v", r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = string(b)
	}
	return out
}

// TestLanceCompactDictColumn: a LanceDB table (file versions 2.0, 2.1,
// 2.2) with Arrow dictionary columns (strings with int32 and int8 keys;
// int32, float64, int64, float32, uint16, int8 and bool values with
// int8..int64 and uint8..uint32 keys; two columns using every int8 key in each
// fragment) and large strings and binaries, compacted with and without
// deletions: LanceDB reads the same rows before and after, the schema
// keeps the dictionary types, `table scan` prints every live row and
// verify --deep passes.
func TestLanceCompactDictColumn(t *testing.T) {
	lancedb.Require(t)
	for _, v := range []string{"2.0", "2.1", "2.2"} {
		for _, del := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%s_deletes=%v", v, del), func(t *testing.T) {
				f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				f.Dir = f.URI + "/t.lance"
				steps := []lancedb.Step{lancedb.CreateVersion(dictSchema, dictRows(0, 300), v),
					lancedb.Add(dictRows(300, 600)), lancedb.Add(dictRows(600, 900))}
				if del {
					steps = append(steps, lancedb.Delete("id % 10 = 3"))
				}
				f.Run(t, steps...)
				before := lanceDBRowsJSON(t, f)
				want := 900
				if del {
					want = 810
				}
				if len(before) != want {
					t.Fatalf("LanceDB reads %d rows before, want %d", len(before), want)
				}
				code, out, stderr := runCLI(t, "compact", f.Dir)
				if code != 0 {
					t.Fatalf("compact: exit %d: %s %s", code, out, stderr)
				}
				if res := jsonLines(t, out); len(res) != 1 || res[0]["groups"] != float64(1) {
					t.Fatalf("compact: %s", out)
				}
				after := lanceDBRowsJSON(t, f)
				if d := lancedb.DiffByID(after, before); d != "" {
					t.Fatalf("LanceDB after compact: %s", d)
				}
				// The rows hold the values written (not, say, nulls on both sides).
				for id, want := range map[int64]string{
					1:  `{"blob":"AQD/","cat":"beta","cat8":"w1","f32":-1.25,"f64":-2.25,"flag":true,"full8":0.25,"i64":-3,"i8":1,"id":1,"n32":-7,"name":"n1","u16":65535}`,
					14: `{"blob":"DgD/","cat":null,"cat8":"w14","f32":3,"f64":null,"flag":false,"full8":3.5,"i64":7,"i8":14,"id":14,"n32":100000,"name":"n14","u16":300}`,
				} {
					if after[id] != want {
						t.Errorf("LanceDB reads row %d after compact as %s, want %s", id, after[id], want)
					}
				}
				var got struct{ Schema []struct{ Name, Type string } }
				if err := f.Run(t, lancedb.Open(), lancedb.Schema()).Decode(1, &got); err != nil {
					t.Fatal(err)
				}
				if schema := got.Schema; fmt.Sprint(schema) != dictSchemaString {
					t.Errorf("schema after compact: %v", schema)
				}
				code, out, stderr = runCLI(t, "table", "scan", f.Dir)
				if code != 0 || len(jsonLines(t, out)) != want {
					t.Fatalf("scan: exit %d, %d lines, want %d: %s", code, len(jsonLines(t, out)), want, stderr)
				}
				if code, out, stderr := runCLI(t, "verify", f.Dir, "--deep"); code != 0 {
					t.Fatalf("verify: exit %d: %s %s", code, out, stderr)
				}
			})
		}
	}
}
