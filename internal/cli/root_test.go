package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/buildinfo"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// Usage errors exit 2, like Go's flag package; a failing command exits 1.
func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"no-such-command"},
		{"run", "--no-such-flag"},
		{"run", "extra-argument"},
		{"cleanup"},
		{"cleanup", "a", "b"},
		{"cleanup", "x", "--older-than", "soon"},
		{"check", "config"},
		{"--log-level", "loud", "version"},
	} {
		r := run(t, "", args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "compactord: ") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("compactord %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := run(t, "", "inspect", filepath.Join(t.TempDir(), "none")); r.code != 1 {
		t.Errorf("inspect of a missing table: exit %d, want 1 (%s)", r.code, r.stderr)
	}
}

// A listen address that cannot be bound is a configuration error: exit 2,
// naming the file and the line, before anything starts.
func TestRunBadListenAddress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("workers: 2\nhttp:\n  listen: 127.0.0.1:99999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "run", "--config", file)
	want := "compactord: config " + file + ":3: http.listen: "
	if r.code != 2 || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "99999") {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, want)
	}
	for _, bad := range []string{"127.0.0.1:-1", "127.0.0.1:http-alt-nope", "127.0.0.1", ":65536"} {
		r := run(t, "", "run", "--listen", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "http.listen") {
			t.Errorf("--listen %s: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

// `compactord check config FILE` validates exactly as start-up does.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("workers: 2\ntables:\n  - url: mem://b/t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("workers: 2\nschedule:\n  merge: \"every second\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "check", "config", good)
	var doc map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc["valid"] != true || doc["tables"] != float64(1) {
		t.Fatalf("good config: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = run(t, "", "check", "config", bad)
	start := run(t, "", "run", "--config", bad)
	if r.code != 2 || r.stderr != start.stderr || !strings.HasPrefix(r.stderr, "compactord: config "+bad+":3: schedule.merge") {
		t.Fatalf("bad config: exit %d, stderr %q; run --config says %q", r.code, r.stderr, start.stderr)
	}
	if r := run(t, "", "check", "config", filepath.Join(dir, "missing.yaml")); r.code != 2 {
		t.Fatalf("missing file: exit %d", r.code)
	}
}

// --version and `version` report the build's VCS revision from the Go
// build info (internal/buildinfo tests the plain `go build` case: a test
// binary records no VCS revision).
func TestVersion(t *testing.T) {
	info := buildinfo.Get(Version)
	if info.Version == "" || info.GoVersion == "" || info.Revision == "" {
		t.Fatalf("build info %+v", info)
	}
	r := run(t, "", "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "compactord "+info.Version) || !strings.Contains(r.stdout, "revision "+info.Revision) {
		t.Fatalf("--version: exit %d, %q", r.code, r.stdout)
	}
	doc := mustRun(t, "", "version")
	if doc["version"] != info.Version || doc["revision"] != info.Revision || doc["go_version"] != info.GoVersion {
		t.Fatalf("version: %v, want %+v", doc, info)
	}
	// The compatibility statement: file formats, and flag 1024 (Lance 13's
	// fragment-reuse index) refused for writing.
	lc, _ := doc["lance_compatibility"].(map[string]any)
	if fmt.Sprint(lc["file_formats"]) != "[2.0 2.1 2.2]" {
		t.Fatalf("version: lance_compatibility %v", lc)
	}
	flags, _ := lc["feature_flags"].([]any)
	found := false
	for _, f := range flags {
		if m, _ := f.(map[string]any); m["bit"] == float64(1024) {
			found = m["write"] == "refused"
		}
	}
	if !found {
		t.Fatalf("version: flag 1024 not stated as refused: %v", flags)
	}
}

// --pretty indents the JSON documents a command prints (inspect's one long
// line, a plan), the same documents as without it.
func TestPrettyIndentsJSONDocuments(t *testing.T) {
	dir := lancedb.CorpusDir(t, "indexed")
	for _, args := range [][]string{{"inspect", dir}, {"compact", dir, "--dry-run"}, {"index", "catchup", dir, "--dry-run"}} {
		plain := run(t, "", args...)
		pretty := run(t, "", append(args, "--pretty")...)
		if plain.code != 0 || pretty.code != 0 {
			t.Fatalf("%v: exit %d and %d: %s %s", args, plain.code, pretty.code, plain.stderr, pretty.stderr)
		}
		if n := strings.Count(strings.TrimSpace(plain.stdout), "\n"); n != 0 {
			t.Errorf("%v: %d lines without --pretty", args, n+1)
		}
		if !strings.HasPrefix(pretty.stdout, "{\n  \"") || strings.Count(pretty.stdout, "\n") < 5 {
			t.Errorf("%v --pretty is not indented:\n%s", args, pretty.stdout)
		}
		var a, b any
		if err := json.Unmarshal([]byte(plain.stdout), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(pretty.stdout), &b); err != nil {
			t.Fatalf("%v --pretty: %v", args, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%v: --pretty printed another document", args)
		}
	}
}

// check config on a discovery config names where tables are discovered,
// not a count of 0 that reads as "no tables".
func TestCheckConfigWithDiscovery(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("discover:\n  url: mem://fleet/db\n  interval: 2m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "check", "config", file)
	var doc struct {
		Tables     *int `json:"tables"`
		Configured *int `json:"configured_tables"`
		Discover   struct {
			URL, Interval, Tables string
		} `json:"discover"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if doc.Tables != nil || doc.Configured == nil || *doc.Configured != 0 || doc.Discover.URL != "mem://fleet/db" ||
		doc.Discover.Interval != "2m0s" || !strings.Contains(doc.Discover.Tables, "*.lance") {
		t.Fatalf("check config on a discovery config: %s", r.stdout)
	}
}
