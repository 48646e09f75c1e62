package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/table"
)

// Bad cleanup/trim input: one clear line, non-zero exit, nothing deleted.
func TestCleanupTrimBadInput(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10")
	mustRun(t, "", "table", "delete", dir, "--keys", "1")
	for _, tc := range []struct {
		args   []string
		expect string
	}{
		{[]string{"cleanup", dir, "--older-than", "-3h"}, "must not be negative"},
		{[]string{"cleanup", dir, "--min-age", "soon"}, "not a duration"},
		{[]string{"cleanup", dir, "--retain-versions", "0"}, "at least 1"},
		{[]string{"cleanup", dir, "--concurrency", "0"}, "at least 1"},
		{[]string{"trim", dir, "--keep-shard-manifests", "1"}, "at least 2"},
	} {
		before := snapshot(t, dir)
		r := run(t, "", tc.args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, tc.expect) {
			t.Fatalf("%v: exit %d, stderr %q; want one line mentioning %q", tc.args, r.code, r.stderr, tc.expect)
		}
		if after := snapshot(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
			t.Fatalf("%v changed files", tc.args)
		}
	}
	// A dry run prints the plan and changes nothing. Versions younger than
	// the floor are never deleted, so the plan is empty now and names the
	// two older versions once the floor has passed.
	before := snapshot(t, dir)
	args := []string{"cleanup", dir, "--retain-versions", "1", "--older-than", "0s", "--min-age", "0s", "--dry-run"}
	if vs, ok := mustRun(t, "", args...)["delete_versions"].([]any); !ok || len(vs) != 0 {
		t.Fatalf("dry-run plan deletes versions younger than the floor: %v", vs)
	}
	later := time.Now().Add(table.VersionFloor + time.Minute)
	cleanupNow = func() time.Time { return later }
	defer func() { cleanupNow = time.Now }()
	doc := mustRun(t, "", args...)
	if vs, ok := doc["delete_versions"].([]any); !ok || len(vs) != 2 {
		t.Fatalf("dry-run plan %v", doc)
	}
	if after := snapshot(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatal("cleanup --dry-run changed files")
	}
}

// `cleanup --older-than 0s` keeps versions younger than the version floor:
// the dry-run plan says so for every kept version, gives every kept file
// its reason, and --help documents the floor.
func TestCleanupPlanExplainsWhatItKeeps(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10")
	mustRun(t, "", "table", "append", dir, "--rows", "10", "--start", "100")
	doc := mustRun(t, "", "cleanup", dir, "--retain-versions", "1", "--older-than", "0s", "--min-age", "0s", "--dry-run")
	reasons, _ := doc["kept_version_reasons"].([]any)
	if len(reasons) != 3 {
		t.Fatalf("kept_version_reasons %v", doc["kept_version_reasons"])
	}
	for i, want := range []string{"the latest version", "younger than the version floor (10m0s", "younger than the version floor (10m0s"} {
		r := reasons[i].(map[string]any)
		if r["version"] != float64(3-i) || !strings.HasPrefix(r["reason"].(string), want) {
			t.Errorf("kept version %d: %v, want reason %q", 3-i, r, want)
		}
	}
	files, _ := doc["kept_files"].([]any)
	if len(files) < 2 {
		t.Fatalf("kept_files %v", doc["kept_files"])
	}
	for _, f := range files {
		f := f.(map[string]any)
		if f["key"] == "" || !strings.HasPrefix(f["reason"].(string), "referenced by retained version ") {
			t.Errorf("kept file %v", f)
		}
	}
	help := run(t, "", "cleanup", "--help")
	if !strings.Contains(help.stdout, "version floor (10m0s") || !strings.Contains(help.stdout, "--older-than 0s still keeps the last 10m0s") {
		t.Errorf("cleanup --help does not document the floor:\n%s", help.stdout)
	}
}
