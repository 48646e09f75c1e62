package cli

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// `==` is accepted as `=` in --where (the `=` alternative used to match
// first and leave "= 5" as the literal).
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
	} {
		doc := mustRun(t, "", "table", "delete", dir, "--where", tc.where)
		if doc["deleted_rows"].(float64) != 1 {
			t.Fatalf("--where %q: %v", tc.where, doc)
		}
		if _, ok := scanIDs(t, dir)[tc.gone]; ok {
			t.Fatalf("--where %q: id %v still live", tc.where, tc.gone)
		}
	}
}

// Timestamps outside years 0000-9999 have no RFC 3339 form: scan prints
// them as integer microseconds, which append reads back, so scan output
// always round-trips.
func TestScanTimestampsRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	mustRun(t, "", "table", "create", src, "--schema", "ts:timestamp,v:int64", "--primary-key", "ts")
	in := ""
	for _, us := range []int64{0, 1_700_000_000_123_456, 253402300799999999, 253402300800000000, 9223372036854775807, -62135596800000000, -62135596800000001, -9223372036854775808} {
		in += fmt.Sprintf("{\"ts\": %d, \"v\": 1}\n", us)
	}
	mustRun(t, in, "table", "append", src, "--jsonl", "-")
	r := run(t, "", "table", "scan", src)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	if !strings.Contains(r.stdout, `"2023-11-14T22:13:20.123456Z"`) || !strings.Contains(r.stdout, `"9999-12-31T23:59:59.999999Z"`) {
		t.Fatalf("in-range timestamps not in RFC 3339:\n%s", r.stdout)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	mustRun(t, "", "table", "create", dst, "--schema", "ts:timestamp,v:int64", "--primary-key", "ts")
	mustRun(t, r.stdout, "table", "append", dst, "--jsonl", "-")
	again := run(t, "", "table", "scan", dst)
	if again.code != 0 || sortedLines(again.stdout) != sortedLines(r.stdout) {
		t.Fatalf("round trip changed rows:\n%s\nvs\n%s (%s)", r.stdout, again.stdout, again.stderr)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
