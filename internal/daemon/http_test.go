package daemon_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/daemon"
)

func TestHTTPEndpoints(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/t1")
	createTable(t, root+"/t2")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/t1"}, {URL: root + "/t2"}}
	cfg.HTTP.AdminTokenFile = tok
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs(), Version: "test"})

	if res := do(t, "GET", r.base+"/-/healthy", ""); res.status != 200 || res.body != "OK\n" {
		t.Fatalf("healthy: %+v", res)
	}
	eventually(t, "ready", func() bool { return do(t, "GET", r.base+"/-/ready", "").status == 200 })

	res := do(t, "GET", r.base+"/api/v1/tables", "")
	if res.status != 200 || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("tables: %+v", res)
	}
	doc := decode(t, res.body)
	tables := doc["tables"].([]any)
	if len(tables) != 2 {
		t.Fatalf("%d tables", len(tables))
	}
	t1 := tables[0].(map[string]any)
	if t1["name"] != "t1" || t1["state"] != "ok" || t1["synced"] != true {
		t.Fatalf("t1: %v", t1)
	}
	snap := t1["snapshot"].(map[string]any)
	if snap["version"] != float64(1) || snap["pending_generations"] != float64(0) {
		t.Fatalf("snapshot: %v", snap)
	}
	jobs := t1["jobs"].(map[string]any)
	for _, k := range []string{"merge", "compact", "index", "trim", "cleanup"} {
		j, ok := jobs[k].(map[string]any)
		if !ok || j["available"] != true || j["schedule"] != "off" {
			t.Fatalf("jobs[%s] = %v", k, jobs[k])
		}
	}
	if inst := doc["instance"].(map[string]any); inst["version"] != "test" || inst["ready"] != true {
		t.Fatalf("instance: %v", inst)
	}

	if res := do(t, "GET", r.base+"/api/v1/tables/nope", ""); res.status != 404 || !strings.Contains(decode(t, res.body)["error"].(string), `"nope"`) {
		t.Fatalf("unknown table: %+v", res)
	}
	// The admin API needs the token.
	res = do(t, "POST", r.base+"/api/v1/tables/t1/jobs/merge", "")
	if res.status != 401 || res.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %+v", res)
	}
	if res := do(t, "POST", r.base+"/api/v1/tables/t1/jobs/merge", "wrong"); res.status != 401 {
		t.Fatalf("wrong token: %+v", res)
	}
	res = do(t, "POST", r.base+"/api/v1/tables/t1/jobs/merge", "s3cret")
	if res.status != 202 || decode(t, res.body)["status"] != "queued" {
		t.Fatalf("trigger: %+v", res)
	}
	eventually(t, "merge ran", func() bool { return rec.has("t1/merge") })
	eventually(t, "recorded in the status", func() bool {
		d := decode(t, do(t, "GET", r.base+"/api/v1/tables/t1", "").body)
		last, _ := d["jobs"].(map[string]any)["merge"].(map[string]any)["last_run"].(map[string]any)
		return last != nil && last["result"] == "success" && last["trigger"] == "manual" && len(d["recent"].([]any)) == 1
	})
	if res := do(t, "POST", r.base+"/api/v1/tables/t1/jobs/defrag", "s3cret"); res.status != 400 {
		t.Fatalf("bad kind: %+v", res)
	}
	if res := do(t, "POST", r.base+"/api/v1/tables/nope/jobs/merge", "s3cret"); res.status != 404 {
		t.Fatalf("trigger on an unknown table: %+v", res)
	}
	if res := do(t, "GET", r.base+"/api/v1/tables/t1/jobs/merge", ""); res.status != 405 {
		t.Fatalf("GET on a POST endpoint: %+v", res)
	}
	res = do(t, "POST", r.base+"/api/v1/tables/t2/pause", "s3cret")
	if res.status != 200 || decode(t, res.body)["state"] != "paused" {
		t.Fatalf("pause: %+v", res)
	}
	if res := do(t, "POST", r.base+"/api/v1/tables/t2/jobs/trim", "s3cret"); res.status != 409 {
		t.Fatalf("trigger on a paused table: %+v", res)
	}
	res = do(t, "POST", r.base+"/api/v1/tables/t2/resume", "s3cret")
	if res.status != 200 || decode(t, res.body)["paused"] != false {
		t.Fatalf("resume: %+v", res)
	}
	if res := do(t, "GET", r.base+"/", ""); res.status != 200 || !strings.Contains(res.body, "<h2>t1") {
		t.Fatalf("status page: %d", res.status)
	}
	// The profiler sits behind the admin guard.
	if res := do(t, "GET", r.base+"/debug/pprof/heap?debug=1", ""); res.status != 401 {
		t.Fatalf("profile without a token: %+v", res)
	}
	if res := do(t, "GET", r.base+"/debug/pprof/", "s3cret"); res.status != 200 || !strings.Contains(res.body, "goroutine") {
		t.Fatalf("profile index: %+v", res)
	}
	if res := do(t, "GET", r.base+"/debug/pprof/heap?debug=1", "s3cret"); res.status != 200 || !strings.Contains(res.body, "heap profile") {
		t.Fatalf("heap profile: %+v", res)
	}
	if res := do(t, "GET", r.base+"/nothing-here", ""); res.status != 404 {
		t.Fatalf("unknown path: %d", res.status)
	}

	// Draining: not ready, and Run returns nil.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// Without a token, a browser page on another origin cannot drive the admin
// API of a daemon on loopback.
func TestAdminRefusesCrossOriginWithoutToken(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/t")
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/t"}}
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs()})
	eventually(t, "ready", func() bool { return r.d.Ready() })
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/merge", "", "Origin", "https://evil.example"); res.status != 403 {
		t.Fatalf("cross-origin: %+v", res)
	}
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/merge", "", "Origin", r.base); res.status != 202 {
		t.Fatalf("same origin: %+v", res)
	}
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/merge", ""); res.status != 202 {
		t.Fatalf("no origin (curl): %+v", res)
	}
}

// promtool check metrics is clean on /metrics: every series is pre-created,
// named and typed as Prometheus expects.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (apt-get install -y prometheus)")
		}
		t.Skip("promtool not installed (apt-get install -y prometheus)")
	}
	root := memRoot(t)
	createTable(t, root+"/t")
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/t"}}
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs(), Version: "test"})
	eventually(t, "ready", func() bool { return r.d.Ready() })
	if err := r.d.Scheduler().Trigger("t", "compact"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "compact ran", func() bool { return rec.has("t/compact") })
	res := do(t, "GET", r.base+"/metrics", "")
	if res.status != 200 {
		t.Fatalf("metrics: %d", res.status)
	}
	for _, want := range []string{
		`compactord_job_runs_total{kind="compact",result="success",table="t"} 1`,
		`compactord_job_failures_total{kind="merge",table="t"} 0`,
		`compactord_table_halted{reason="corrupt",table="t"} 0`,
		`compactord_lease_owned{table="t"} 1`,
		`compactord_commit_attempts_total{operation="update"} 0`,
		`compactord_objstore_operations_total{operation="put_if_absent",result="success"}`,
		// A test binary records no VCS revision.
		`compactord_build_info{goversion="` + runtime.Version() + `",revision="unknown",version="test"} 1`,
		"compactord_config_last_reload_successful 1",
		`process_resident_memory_bytes`,
		`go_goroutines`,
	} {
		if !strings.Contains(res.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cmd := exec.CommandContext(context.Background(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(res.body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	if strings.TrimSpace(out.String()) != "" {
		t.Fatalf("promtool check metrics complains:\n%s", out.String())
	}
}
