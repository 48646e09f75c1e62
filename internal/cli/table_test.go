package cli

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func scanIDs(t *testing.T, dir string) map[float64]bool {
	t.Helper()
	r := run(t, "", "table", "scan", dir, "--columns", "id")
	if r.code != 0 {
		t.Fatalf("scan: exit %d: %s", r.code, r.stderr)
	}
	ids := map[float64]bool{}
	for _, row := range jsonLines(t, r.stdout) {
		ids[row["id"].(float64)] = true
	}
	return ids
}

// `==` is accepted as `=` in --where (with the `=` alternative first, "id
// == 5" read "= 5" as the literal).
func TestDeleteWhereDoubleEquals(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10")
	for _, tc := range []struct {
		where string
		gone  float64
	}{
		{"id == 5", 5},
		{"id=6", 6},
		{"id==7 AND cat != 'zz'", 7},
		{"id = 8 and val >= 0", 8},
	} {
		doc := mustRun(t, "", "table", "delete", dir, "--where", tc.where)
		if doc["deleted_rows"].(float64) != 1 || doc["operation"] != "delete" {
			t.Fatalf("--where %q: %v", tc.where, doc)
		}
		if scanIDs(t, dir)[tc.gone] {
			t.Fatalf("--where %q: id %v still live", tc.where, tc.gone)
		}
	}
	if n := len(scanIDs(t, dir)); n != 6 {
		t.Fatalf("%d rows live after 4 one-row deletes of 10", n)
	}
}

// A delete that matches nothing commits nothing; one that matches every
// row of the fragment removes the fragment.
func TestDeleteWhereNoMatchAndWholeFragment(t *testing.T) {
	dir := newTable(t)
	first := mustRun(t, "", "table", "append", dir, "--rows", "10")
	doc := mustRun(t, "", "table", "delete", dir, "--where", "id > 100")
	if doc["deleted_rows"].(float64) != 0 || doc["version"] != first["version"] {
		t.Fatalf("no-match delete: %v (append was %v)", doc, first)
	}
	mustRun(t, "", "table", "append", dir, "--rows", "5", "--start", "10")
	doc = mustRun(t, "", "table", "delete", dir, "--where", "id < 10")
	if doc["deleted_rows"].(float64) != 10 || len(doc["deleted_fragments"].([]any)) != 1 || len(doc["updated_fragments"].([]any)) != 0 {
		t.Fatalf("whole-fragment delete: %v", doc)
	}
	if n := len(scanIDs(t, dir)); n != 5 {
		t.Fatalf("%d rows live, want 5", n)
	}
	if r := run(t, "", "verify", dir); r.code != 0 {
		t.Fatalf("verify: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}

// A predicate that does not parse is a usage error: exit 2, one line.
func TestDeleteWhereBadPredicate(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "3")
	for _, where := range []string{"id 5", "nope = 1", "id = 'x'", "cat = unquoted", " "} {
		r := run(t, "", "table", "delete", dir, "--where", where)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code != 2 || strings.Contains(line, "\n") || !strings.HasPrefix(line, "compactord: ") {
			t.Errorf("--where %q: exit %d, stderr %q", where, r.code, r.stderr)
		}
	}
}

// On LanceDB's indexed table, `table delete --where` leaves the indexes
// answering right: compactord's index lookup and LanceDB's filtered read
// (through its btree) both miss the deleted keys, and verify is clean.
func TestDeleteWhereOnLanceDBTable(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	code, out, stderr := runCLI(t, "table", "delete", f.Dir, "--where", "id >= 5 AND id < 8")
	if code != 0 || !strings.Contains(out, `"deleted_rows":3`) {
		t.Fatalf("delete: exit %d: %s %s", code, out, stderr)
	}
	for key, n := range map[string]int{"6": 0, "9": 1} {
		code, out, stderr := runCLI(t, "index", "lookup", f.Dir, "--name", "id_idx", "--key", key)
		if code != 0 || len(jsonLines(t, out)) != n {
			t.Fatalf("lookup %s: exit %d: %q %s", key, code, out, stderr)
		}
	}
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 4 AND id <= 8"}))
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("LanceDB reads %d rows of ids 4..8, want 2 (4 and 8): %v", len(rows), rows)
	}
	if code, out, stderr := runCLI(t, "verify", f.Dir, "--deep"); code != 0 {
		t.Fatalf("verify: exit %d: %s %s", code, out, stderr)
	}
}

// Timestamps print as integers in the column's unit, the form append
// reads, so scan output appends back whatever the year (RFC 3339 has no
// form past 9999).
func TestScanTimestampsRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	mustRun(t, "", "table", "create", src, "--schema", "ts:timestamp,v:int64", "--primary-key", "ts")
	in := ""
	for _, us := range []int64{0, 1_700_000_000_123_456, 253402300799999999, 253402300800000000, 9223372036854775807, -62135596800000000, -62135596800000001, -9223372036854775808} {
		in += fmt.Sprintf("{\"ts\": %d, \"v\": 1}\n", us)
	}
	mustRun(t, in, "table", "append", src, "--jsonl", "-")
	r := run(t, "", "table", "scan", src)
	if r.code != 0 || !strings.Contains(r.stdout, `"ts":253402300800000000`) || !strings.Contains(r.stdout, `"ts":-9223372036854775808`) {
		t.Fatalf("scan: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	mustRun(t, "", "table", "create", dst, "--schema", "ts:timestamp,v:int64", "--primary-key", "ts")
	mustRun(t, r.stdout, "table", "append", dst, "--jsonl", "-")
	again := run(t, "", "table", "scan", dst)
	if again.code != 0 || sortedLines(again.stdout) != sortedLines(r.stdout) || strings.Count(r.stdout, "\n") != 8 {
		t.Fatalf("round trip changed rows:\n%s\nvs\n%s (%s)", r.stdout, again.stdout, again.stderr)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
