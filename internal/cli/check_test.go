package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check config reports which override each configured table gets, and
// refuses an override that loosens cleanup's floor without naming the
// hazard itself, with start-up's message.
func TestCheckConfigOverrides(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	body := "tables:\n  - url: mem://b/logs.app\n  - url: mem://b/orders\noverrides:\n  - match: \"logs.*\"\n    jobs:\n      compact:\n        inline_remap: false\n"
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "check", "config", good)
	var doc struct {
		Valid          bool              `json:"valid"`
		Overrides      int               `json:"overrides"`
		TableOverrides map[string]string `json:"table_overrides"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !doc.Valid || doc.Overrides != 1 || len(doc.TableOverrides) != 1 || doc.TableOverrides["logs.app"] != `overrides[0] (match "logs.*")` {
		t.Fatalf("check config: %s", r.stdout)
	}
	bad := filepath.Join(dir, "bad.yaml")
	body = "jobs:\n  cleanup:\n    min_age: 30m\n    allow_deleting_in_flight_writes: true\noverrides:\n  - match: scratch\n    jobs:\n      cleanup:\n        min_age: 1m\n"
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "check", "config", bad)
	start := run(t, "", "run", "--config", bad)
	if r.code != 2 || r.stderr != start.stderr || !strings.HasPrefix(r.stderr, "compactord: config "+bad+":9: overrides[0].jobs.cleanup.min_age: 1m0s is below the floor") {
		t.Fatalf("exit %d, stderr %q; run --config says %q", r.code, r.stderr, start.stderr)
	}
}
