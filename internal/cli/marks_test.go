package cli

import (
	"context"
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
