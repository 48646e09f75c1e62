package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/storage"
)

// `table pause|resume|mark` write and remove the marks every instance
// honours (the scheduler's side: TestMarksHonouredByEveryInstance).
func TestTablePauseResumeMark(t *testing.T) {
	dir := newTable(t)
	marks := func() map[marker.Kind]marker.Mark {
		t.Helper()
		b, err := storage.Open(context.Background(), "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m, err := marker.Load(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if doc := mustRun(t, "", "table", "pause", dir, "--reason", "restore"); doc["set"] != true || doc["mark"] != "pause" {
		t.Fatalf("pause: %v", doc)
	}
	mustRun(t, "", "table", "mark", dir, "no-compact", "--reason", "investigating")
	m := marks()
	if len(m) != 2 || m[marker.Pause].Reason != "restore" || m[marker.NoCompact].Reason != "investigating" || m[marker.Pause].By == "" {
		t.Fatalf("marks %+v", m)
	}
	mustRun(t, "", "table", "resume", dir)
	mustRun(t, "", "table", "mark", dir, "no-compact", "--clear")
	if m := marks(); len(m) != 0 {
		t.Fatalf("marks left %+v", m)
	}
	if r := run(t, "", "table", "mark", dir, "no-merge"); r.code != 2 {
		t.Fatalf("unknown mark: exit %d %q", r.code, r.stderr)
	}
}

// TestMaintenanceCommandsHonourMarks: on a paused table every maintenance
// command refuses in one line with the mark's reason and changes nothing,
// unless --force; a dry run still runs; a no-compact mark refuses compact
// only.
func TestMaintenanceCommandsHonourMarks(t *testing.T) {
	dir := newTable(t)
	for i := range 3 {
		mustRun(t, "", "table", "append", dir, "--rows", "20", "--start", fmt.Sprint(i*20))
	}
	mustRun(t, "", "table", "delete", dir, "--where", "id < 5")
	mustRun(t, "", "index", "create", dir, "--name", "id_idx", "--column", "id", "--type", "btree")
	mustRun(t, "", "table", "pause", dir, "--reason", "restoring a backup")
	guarded := [][]string{
		{"compact", dir},
		{"merge", dir},
		{"index", "catchup", dir},
		{"index", "remap", dir},
		{"index", "trim-fri", dir},
		{"index", "rebuild", dir, "--name", "id_idx"},
		{"index", "create", dir, "--name", "cat_idx", "--column", "cat", "--type", "bitmap"},
		{"index", "drop", dir, "--name", "id_idx"},
		{"trim", dir},
		{"cleanup", dir, "--retain-versions", "1", "--older-than", "0s", "--min-age", "0s"},
	}
	before := snapshot(t, dir)
	for _, args := range guarded {
		r := run(t, "", args...)
		if r.code == 0 || !strings.Contains(r.stderr, "pause mark") || !strings.Contains(r.stderr, "restoring a backup") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v on a paused table: exit %d: %q", args, r.code, r.stderr)
		}
	}
	if after := snapshot(t, dir); !slices.Equal(before, after) {
		t.Fatalf("refused commands changed the table:\nbefore %v\nafter  %v", before, after)
	}
	if r := run(t, "", "compact", dir, "--dry-run"); r.code != 0 {
		t.Errorf("a dry run on a paused table: exit %d: %s", r.code, r.stderr)
	}
	if doc := mustRun(t, "", "index", "create", dir, "--name", "cat_idx", "--column", "cat", "--type", "bitmap", "--force"); doc["created"] != true {
		t.Errorf("--force: %v", doc)
	}
	mustRun(t, "", "table", "resume", dir)
	mustRun(t, "", "table", "mark", dir, "no-compact", "--reason", "investigating")
	if r := run(t, "", "compact", dir); r.code == 0 || !strings.Contains(r.stderr, "no-compact mark") || !strings.Contains(r.stderr, "investigating") {
		t.Errorf("compact on a no-compact table: exit %d: %q", r.code, r.stderr)
	}
	mustRun(t, "", "index", "catchup", dir)
	if doc := mustRun(t, "", "compact", dir, "--force"); doc["version"] == nil {
		t.Errorf("compact --force: %v", doc)
	}
}
