package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestCompactDryRunChangesNothing(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 4, 10)
	mustRun(t, "", "table", "delete", dir, "--where", "id >= 30")
	before := snapshot(t, dir)
	r := run(t, "", "compact", dir, "--dry-run", "--target-rows", "100")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	var doc struct {
		Version uint64 `json:"version"`
		DryRun  bool   `json:"dry_run"`
		Jobs    []struct {
			Fragments []uint32 `json:"fragments"`
			LiveRows  uint64   `json:"live_rows"`
			Reason    string   `json:"reason"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("dry run output %q: %v", r.stdout, err)
	}
	if !doc.DryRun || doc.Version != 6 || len(doc.Jobs) != 1 || !slices.Equal(doc.Jobs[0].Fragments, []uint32{0, 1, 2}) || doc.Jobs[0].LiveRows != 30 {
		t.Fatalf("plan %+v", doc)
	}
	if after := snapshot(t, dir); !slices.Equal(before, after) {
		t.Fatalf("dry run changed the table:\n%v\n%v", before, after)
	}
	// The real run does what the plan said.
	out := mustRun(t, "", "compact", dir, "--target-rows", "100")
	if out["version"].(float64) != 7 || out["fragments_in"].(float64) != 3 || out["rows"].(float64) != 30 {
		t.Fatalf("compact: %v", out)
	}
	// Nothing left to do.
	out = mustRun(t, "", "compact", dir, "--target-rows", "100")
	if out["groups"].(float64) != 0 || out["version"].(float64) != 7 {
		t.Fatalf("second compact: %v", out)
	}
}

func TestCompactBadInput(t *testing.T) {
	dir := newTable(t)
	appendFragments(t, dir, 2, 10)
	before := snapshot(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compact", dir, "--target-rows", "0"}, "--target-rows"},
		{[]string{"compact", dir, "--deletion-threshold", "2"}, "--deletion-threshold"},
		{[]string{"compact", dir, "--fragments", "a,b"}, "--fragments"},
		{[]string{"compact", dir, "--defer-remap=maybe"}, "defer-remap"},
		{[]string{"compact", dir + "-missing"}, "no table"},
	} {
		r := run(t, "", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("%v: exit %d, stderr %q; want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if after := snapshot(t, dir); !slices.Equal(before, after) {
		t.Fatalf("bad input changed the table:\n%v\n%v", before, after)
	}
}

// Compactions of disjoint fragments both land, across processes: two
// compactd processes compact disjoint
// fragments of one file:// table at the same time; both land. With inline
// remap the second reserves its own fragment ids.
func TestTwoProcessesCompactDisjointFragments(t *testing.T) {
	for _, deferRemap := range []string{"true", "false"} {
		t.Run("defer="+deferRemap, func(t *testing.T) {
			dir := newTable(t)
			appendFragments(t, dir, 8, 25)
			mustRun(t, "", "index", "create", dir, "--name", "by_id", "--column", "id", "--type", "btree")
			var cmds []*exec.Cmd
			var outs []*bytes.Buffer
			for _, frags := range []string{"0,1,2,3", "4,5,6,7"} {
				c := exec.Command(os.Args[0], "compact", dir, "--fragments", frags, "--target-rows", "1000", "--defer-remap="+deferRemap)
				c.Env = append(os.Environ(), "COMPACTORD_CLI_CHILD=1")
				var b bytes.Buffer
				c.Stdout, c.Stderr = &b, &b
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, c), append(outs, &b)
			}
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					t.Fatalf("process %d: %v: %s", i, err, outs[i])
				}
				var doc map[string]any
				if err := json.Unmarshal(outs[i].Bytes(), &doc); err != nil || doc["fragments_in"].(float64) != 4 {
					t.Fatalf("process %d: %s", i, outs[i])
				}
			}
			doc := mustRun(t, "", "inspect", dir)
			if n := len(doc["fragments"].([]any)); n != 2 {
				t.Fatalf("%d fragments, want 2", n)
			}
			if n := len(friVersions(t, dir)); deferRemap == "true" && n != 2 || deferRemap == "false" && n != 0 {
				t.Fatalf("%d FRI versions with defer=%s", n, deferRemap)
			}
			r := run(t, "", "table", "scan", dir)
			if r.code != 0 || strings.Count(r.stdout, "\n") != 200 {
				t.Fatalf("scan: %d rows, %s", strings.Count(r.stdout, "\n"), r.stderr)
			}
			for _, k := range []string{"0", "99", "100", "199"} {
				if got := lookupIDs(t, dir, "by_id", k, "--index-only"); len(got) != 1 {
					t.Fatalf("lookup %s: %v", k, got)
				}
			}
		})
	}
}
