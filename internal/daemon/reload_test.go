package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/daemon"
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

// POST /-/reload reloads as SIGHUP does, behind the admin guard, and the
// outcome shows in compactord_config_last_reload_successful and
// compactord_config_last_reload_success_timestamp_seconds.
func TestReloadEndpointAndMetrics(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/t1")
	createTable(t, root+"/t2")
	dir := t.TempDir()
	file, tok := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	common := "lease:\n  enabled: false\npoll_interval: 0s\nschedule:\n  merge: \"off\"\n  compact: \"off\"\n  index: \"off\"\n  trim: \"off\"\n  cleanup: \"off\"\n" +
		"http:\n  admin_token_file: " + tok + "\n"
	write(common + fmt.Sprintf("tables:\n  - url: %s/t1\n", root))
	load := func() (daemon.Config, error) { return daemon.Load(file, daemon.Overrides{Listen: "127.0.0.1:0"}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	r := run(t, cfg, daemon.Deps{Jobs: (&recorder{}).jobs(), Reload: load, Clock: clk})
	eventually(t, "ready", r.d.Ready)
	metrics := func() string {
		return do(t, "GET", r.base+"/metrics", "").body
	}
	wantMetrics := func(ok int, ts time.Time) {
		t.Helper()
		m := metrics()
		for _, want := range []string{
			fmt.Sprintf("compactord_config_last_reload_successful %d\n", ok),
			fmt.Sprintf("compactord_config_last_reload_success_timestamp_seconds %s\n", strconv.FormatFloat(float64(ts.Unix()), 'g', -1, 64)),
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	}
	wantMetrics(1, start)

	write(common + fmt.Sprintf("tables:\n  - url: %s/t2\n", root))
	if res := do(t, "POST", r.base+"/-/reload", ""); res.status != 401 {
		t.Fatalf("reload without the token: %+v", res)
	}
	if got := names(r.d); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("an unauthorised reload applied: %v", got)
	}
	clk.Advance(time.Minute)
	res := do(t, "POST", r.base+"/-/reload", "s3cret")
	if res.status != 200 || decode(t, res.body)["status"] != "reloaded" {
		t.Fatalf("reload: %+v", res)
	}
	if got := names(r.d); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("tables after reload %v", got)
	}
	wantMetrics(1, start.Add(time.Minute))

	write(common + "workers: 0\n")
	clk.Advance(time.Minute)
	res = do(t, "POST", r.base+"/-/reload", "s3cret")
	if msg, _ := decode(t, res.body)["error"].(string); res.status != 400 || !strings.Contains(msg, "c.yaml:") || !strings.Contains(msg, "workers") {
		t.Fatalf("bad reload: %+v", res)
	}
	if got := names(r.d); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("a failed reload changed the tables: %v", got)
	}
	wantMetrics(0, start.Add(time.Minute))
}

// A reload of a discovery config counts the tables the scheduler runs,
// in its log line and in its reply (the file lists none), and a reload
// that changed a setting only a restart applies says so in the reply, not
// only in the log.
func TestReloadOfDiscoveryReportsTablesAndRestart(t *testing.T) {
	root := memRoot(t)
	for _, n := range []string{"a", "b", "c"} {
		createTable(t, root+"/"+n)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	common := "lease:\n  enabled: false\npoll_interval: 0s\nschedule:\n  merge: \"off\"\n  compact: \"off\"\n  index: \"off\"\n  trim: \"off\"\n  cleanup: \"off\"\n" +
		"discover:\n  url: " + root + "\n"
	write(common + "log:\n  format: json\n")
	load := func() (daemon.Config, error) { return daemon.Load(file, daemon.Overrides{Listen: "127.0.0.1:0"}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	r := run(t, cfg, daemon.Deps{Jobs: (&recorder{}).jobs(), Reload: load, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Logger: zap.New(core)})
	eventually(t, "discovered", func() bool { return len(names(r.d)) == 3 })

	// Unchanged: no restart named.
	res := do(t, "POST", r.base+"/-/reload", "")
	body := decode(t, res.body)
	if res.status != 200 || body["status"] != "reloaded" || body["tables"] != 3.0 || body["need_restart"] != nil {
		t.Fatalf("reload: %+v", res)
	}
	write(common + "log:\n  format: console\n")
	res = do(t, "POST", r.base+"/-/reload", "")
	body = decode(t, res.body)
	msg, _ := body["message"].(string)
	if res.status != 200 || body["tables"] != 3.0 || fmt.Sprint(body["need_restart"]) != "[log.format]" || !strings.Contains(msg, "needs a restart to apply: log.format") {
		t.Fatalf("a reload that needs a restart: %+v", res)
	}
	lines := logs.FilterMessage("configuration reloaded").All()
	if len(lines) != 2 {
		t.Fatalf("%d reload lines", len(lines))
	}
	for _, l := range lines {
		if m := l.ContextMap(); m["tables"] != int64(3) || m["configured_tables"] != int64(0) {
			t.Errorf("reload line %v: want tables 3 (discovered), configured_tables 0", m)
		}
	}
	if m := lines[1].ContextMap(); fmt.Sprint(m["need_restart"]) != "[log.format]" {
		t.Errorf("reload line %v lacks need_restart", m)
	}
}
