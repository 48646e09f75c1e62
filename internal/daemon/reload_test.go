package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler/clock"
)

func names(d *daemon.Daemon) []string {
	var out []string
	for _, st := range d.Scheduler().Tables() {
		out = append(out, st.Name)
	}
	return out
}

// SIGHUP's reload, in process: tables are added and removed and schedules
// change without a restart; a bad file keeps the running configuration.
func TestReload(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/t1")
	createTable(t, root+"/t2")
	file := filepath.Join(t.TempDir(), "c.yaml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	common := "lease:\n  enabled: false\npoll_interval: 0s\nschedule:\n  compact: \"off\"\n  index: \"off\"\n  trim: \"off\"\n  cleanup: \"off\"\n"
	write(common + fmt.Sprintf("  merge: \"off\"\ntables:\n  - url: %s/t1\n", root))
	load := func() (daemon.Config, error) { return daemon.Load(file, daemon.Overrides{Listen: "127.0.0.1:0"}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs(), Reload: load, Clock: clk})
	eventually(t, "ready", r.d.Ready)
	if got := names(r.d); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("tables %v", got)
	}

	write(common + fmt.Sprintf("  merge: \"@every 1s\"\ntables:\n  - url: %s/t2\n", root))
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := names(r.d); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("tables after reload %v", got)
	}
	st, _ := r.d.Scheduler().Table("t2")
	if st.Jobs["merge"].Schedule != "@every 1s" {
		t.Fatalf("schedule after reload %q", st.Jobs["merge"].Schedule)
	}
	eventually(t, "t2 synced", func() bool { st, _ := r.d.Scheduler().Table("t2"); return st.Synced })
	for i := 0; i < 20 && !within(func() bool { return rec.has("t2/merge") }); i++ {
		clk.Advance(time.Second)
	}
	if !rec.has("t2/merge") {
		t.Fatal("the reloaded schedule never ran")
	}

	write(common + "  merge: \"@every 1s\"\n  bogus: 1\n")
	if err := r.d.Reload(); err == nil {
		t.Fatal("a bad file was applied")
	}
	if got := names(r.d); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("tables after a failed reload %v", got)
	}
}
