package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lookupIDs runs index lookup and returns the ids of the rows printed.
func lookupIDs(t *testing.T, dir, name, key string, extra ...string) []int {
	t.Helper()
	r := run(t, "", append([]string{"index", "lookup", dir, "--name", name, "--key", key}, extra...)...)
	if r.code != 0 {
		t.Fatalf("lookup %s=%s: %s", name, key, r.stderr)
	}
	var ids []int
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("lookup output %q: %v", line, err)
		}
		ids = append(ids, int(row["id"].(float64)))
	}
	slices.Sort(ids)
	return ids
}

func appendFragments(t *testing.T, dir string, n, rows int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustRun(t, "", "table", "append", dir, "--rows", fmt.Sprint(rows), "--start", fmt.Sprint(i*rows))
	}
}

func friVersions(t *testing.T, dir string) []any {
	t.Helper()
	doc := mustRun(t, "", "inspect", dir)
	return doc["frag_reuse"].(map[string]any)["versions"].([]any)
}

// The upstream regression end to end (seed fri-prune-fully-deleted-
// fragments): 10 fragments, an index, one fragment fully deleted, a
// deferred compaction of the rest. The FRI version's removed_fragments is
// exactly that fragment and no lookup returns its rows; then index remap
// trims the FRI and lookups answer the same.
func TestIndexCompactRemapEndToEnd(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 10, 20)
	doc := mustRun(t, "", "index", "create", dir, "--name", "by_id", "--column", "id", "--type", "btree")
	if doc["operation"] != "create_index" || doc["entries"].(float64) != 200 {
		t.Fatalf("create: %v", doc)
	}
	mustRun(t, "", "index", "create", dir, "--name", "by_cat", "--column", "cat", "--type", "bitmap")
	if got := lookupIDs(t, dir, "by_id", "65"); !slices.Equal(got, []int{65}) {
		t.Fatalf("lookup 65: %v", got)
	}
	mustRun(t, "", "table", "delete", dir, "--fragment", "3")
	doc = mustRun(t, "", "compact", dir, "--target-rows", "1000")
	if doc["groups"].(float64) != 1 || doc["fragments_in"].(float64) != 9 || doc["defer_remap"] != true {
		t.Fatalf("compact: %v", doc)
	}
	vs := friVersions(t, dir)
	if len(vs) != 1 {
		t.Fatalf("FRI versions %v", vs)
	}
	if rm := vs[0].(map[string]any)["removed_fragments"].([]any); len(rm) != 1 || rm[0].(float64) != 3 {
		t.Fatalf("removed_fragments = %v, want [3]", rm)
	}
	for k := 60; k < 80; k++ {
		if got := lookupIDs(t, dir, "by_id", fmt.Sprint(k)); len(got) != 0 {
			t.Fatalf("deleted key %d found: %v", k, got)
		}
	}
	before := map[string][]int{}
	for _, k := range []string{"0", "59", "80", "199"} {
		before[k] = lookupIDs(t, dir, "by_id", k, "--index-only")
		if len(before[k]) != 1 {
			t.Fatalf("lookup %s: %v", k, before[k])
		}
	}
	catBefore := lookupIDs(t, dir, "by_cat", "c3", "--index-only")

	doc = mustRun(t, "", "index", "remap", dir)
	if doc["operation"] != "index_remap" || len(doc["remapped"].([]any)) != 2 || doc["fri_versions_dropped"].(float64) != 1 || doc["fri_versions_kept"].(float64) != 0 {
		t.Fatalf("remap: %v", doc)
	}
	if vs := friVersions(t, dir); len(vs) != 0 {
		t.Fatalf("FRI versions after remap: %v", vs)
	}
	for k, want := range before {
		if got := lookupIDs(t, dir, "by_id", k, "--index-only"); !slices.Equal(got, want) {
			t.Fatalf("lookup %s after remap: %v, want %v", k, got, want)
		}
	}
	if got := lookupIDs(t, dir, "by_cat", "c3", "--index-only"); !slices.Equal(got, catBefore) {
		t.Fatalf("by_cat after remap: %v, want %v", got, catBefore)
	}

	// Catch-up, then the index finds appended rows without scanning.
	mustRun(t, "", "table", "append", dir, "--rows", "5", "--start", "500")
	if got := lookupIDs(t, dir, "by_id", "502", "--index-only"); len(got) != 0 {
		t.Fatalf("an index-only lookup found an unindexed row: %v", got)
	}
	if got := lookupIDs(t, dir, "by_id", "502"); !slices.Equal(got, []int{502}) {
		t.Fatalf("a scanning lookup missed an unindexed row: %v", got)
	}
	doc = mustRun(t, "", "index", "catchup", dir)
	if doc["committed"] != true || len(doc["indices"].([]any)) != 2 {
		t.Fatalf("catchup: %v", doc)
	}
	if got := lookupIDs(t, dir, "by_id", "502", "--index-only"); !slices.Equal(got, []int{502}) {
		t.Fatalf("after catch-up: %v", got)
	}
	doc = mustRun(t, "", "index", "optimize", dir, "--name", "by_id")
	if doc["committed"] != true || doc["merged_segments"].(float64) != 2 {
		t.Fatalf("optimize: %v", doc)
	}
	if got := lookupIDs(t, dir, "by_id", "502", "--index-only"); !slices.Equal(got, []int{502}) {
		t.Fatalf("after optimize: %v", got)
	}
}

// Bad input gives one clear line on stderr, a non-zero exit, and deletes
// nothing.
func TestIndexBadInput(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 2, 10)
	mustRun(t, "", "index", "create", dir, "--name", "by_id", "--column", "id", "--type", "btree")
	before := snapshot(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"index", "lookup", dir, "--name", "nope", "--key", "1"}, `no such index "nope"`},
		{[]string{"index", "lookup", dir, "--name", "by_id", "--key", "x"}, "not an integer"},
		{[]string{"index", "create", dir, "--name", "x", "--column", "nope", "--type", "btree"}, `no column "nope"`},
		{[]string{"index", "create", dir, "--name", "x", "--column", "id", "--type", "hash"}, `unknown index type "hash"`},
		{[]string{"index", "create", dir, "--name", "by_id", "--column", "id", "--type", "btree"}, "already exists"},
		{[]string{"index", "create", dir, "--name", "__x", "--column", "id", "--type", "btree"}, "reserved"},
		{[]string{"index", "catchup", dir, "--indices", "nope"}, "no such index"},
		{[]string{"index", "optimize", dir, "--name", "nope"}, "no such index"},
		{[]string{"index", "lookup", dir, "--name", "by_id"}, "key"},
	} {
		r := run(t, "", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Fatalf("%v: exit %d, stderr %q; want one line containing %q", c.args[:2], r.code, r.stderr, c.want)
		}
	}
	if after := snapshot(t, dir); !slices.Equal(before, after) {
		t.Fatalf("bad input changed the table:\n%v\n%v", before, after)
	}

	// A corrupt segment file: a clear error, and nothing deleted.
	segs, err := filepath.Glob(filepath.Join(dir, "_indices", "*", "btree.parquet"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segment files %v, %v", segs, err)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segs[0], data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, dir)
	for _, args := range [][]string{
		{"index", "lookup", dir, "--name", "by_id", "--key", "3"},
		{"index", "optimize", dir, "--name", "by_id"},
		{"compact", dir, "--defer-remap=false", "--target-rows", "100"},
	} {
		r := run(t, "", args...)
		if args[1] == "optimize" {
			continue // one segment: nothing to read
		}
		if r.code == 0 || !strings.Contains(r.stderr, "corrupt") {
			t.Fatalf("%v on a corrupt segment: exit %d, %q", args[:2], r.code, r.stderr)
		}
	}
	if after := snapshot(t, dir); !slices.Equal(before, after) {
		t.Fatalf("a corrupt segment made something change:\n%v\n%v", before, after)
	}
}
