package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/compactord/compactord/internal/scheduler"
)

const promInstall = "apt-get install -y prometheus"

// TestPrometheusRules checks the rules with promtool and runs their unit
// tests (deploy/prometheus/compactord-rules_test.yml).
func TestPrometheusRules(t *testing.T) {
	promtool := requireTool(t, "promtool", promInstall)
	dir := repoFile(t, "deploy/prometheus")
	if out, err := run(t, dir, nil, promtool, "check", "rules", "compactord-rules.yml"); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	out, err := run(t, dir, nil, promtool, "test", "rules", "compactord-rules_test.yml")
	if err != nil || !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// TestJobAlertFollowsSchedules: CompactordJobNotSucceeding reads the
// schedule the daemons run with (compactord_job_schedule_interval_seconds),
// so no recording rule has to be kept in step with schedule: (one that
// held the defaults made the alert fire early or late for any other
// configuration).
func TestJobAlertFollowsSchedules(t *testing.T) {
	rules := loadRules(t)
	found := false
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if strings.Contains(r.Expr, "vector(") {
				t.Errorf("rule %s%s hard-codes a value: %s", r.Record, r.Alert, r.Expr)
			}
			if r.Alert == "CompactordJobNotSucceeding" {
				found = strings.Contains(r.Expr, "compactord_job_schedule_interval_seconds")
			}
		}
	}
	if !found {
		t.Error("CompactordJobNotSucceeding does not read compactord_job_schedule_interval_seconds")
	}
}

// TestPrometheusConfig checks the scrape configurations with promtool.
// Debian's Prometheus is built without Kubernetes service discovery, so
// for the Kubernetes example the discovery block is swapped for a static
// target before the check; everything else (relabelling, rule files) is
// checked as written.
func TestPrometheusConfig(t *testing.T) {
	promtool := requireTool(t, "promtool", promInstall)
	dir := repoFile(t, "deploy/prometheus")
	if out, err := run(t, dir, nil, promtool, "check", "config", "prometheus.yml"); err != nil {
		t.Errorf("promtool check config prometheus.yml: %v\n%s", err, out)
	}

	src := readRepoFile(t, "deploy/prometheus/prometheus-kubernetes.yml")
	out, err := run(t, dir, nil, promtool, "check", "config", "prometheus-kubernetes.yml")
	if err == nil {
		return
	}
	if !strings.Contains(out, "kubernetes_sd_configs not found") {
		t.Fatalf("promtool check config prometheus-kubernetes.yml: %v\n%s", err, out)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(src, &cfg); err != nil {
		t.Fatal(err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	swapped := 0
	for _, j := range jobs {
		job := j.(map[string]any)
		if _, ok := job["kubernetes_sd_configs"]; ok {
			delete(job, "kubernetes_sd_configs")
			job["static_configs"] = []any{map[string]any{"targets": []string{"127.0.0.1:9464"}}}
			swapped++
		}
	}
	if swapped == 0 {
		t.Fatalf("no kubernetes_sd_configs to swap, yet promtool rejected the file:\n%s", out)
	}
	cfg["rule_files"] = []string{filepath.Join(dir, "compactord-rules.yml")}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "prometheus-kubernetes.yml")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "", nil, promtool, "check", "config", tmp); err != nil {
		t.Errorf("promtool check config (Kubernetes example, discovery swapped for a static target): %v\n%s", err, out)
	}
}

// promAPI queries a Prometheus server's HTTP API.
type promAPI struct{ base string }

type promVector []struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (v promVector) value(i int) float64 {
	s, _ := v[i].Value[1].(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// query runs an instant query; a PromQL error comes back as err.
func (p promAPI) query(q string) (promVector, error) {
	code, body, err := httpGet(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("HTTP %d, undecodable body %q: %v", code, body, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, nil // scalars: valid, nothing to inspect
	}
	var v promVector
	err = json.Unmarshal(r.Data.Result, &v)
	return v, err
}

// TestPrometheusScrapesDaemon is the end-to-end check of the monitoring
// path: the Debian prometheus server scrapes a running daemon with the
// shipped rules loaded, and the HTTP API shows compactord job metrics being
// ingested and growing, every rule evaluating cleanly, and every dashboard
// query parsing and running. It polls the API; it never sleeps.
func TestPrometheusScrapesDaemon(t *testing.T) {
	promBin := requireTool(t, "prometheus", promInstall)
	d := startDaemon(t)

	dir := t.TempDir()
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: compactord
    static_configs:
      - targets: ["%s"]
`, repoFile(t, "deploy/prometheus/compactord-rules.yml"), d.addr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
		"--log.level=warn")
	cmd.Dir = dir
	pp := startProc(t, "prometheus", cmd)
	api := promAPI{base: "http://" + promAddr}
	waitFor(t, 60*time.Second, "prometheus /-/ready", pp, func() (bool, string) {
		code, body, err := httpGet(api.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		return code == 200, fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
	})

	// The target is up and job runs are ingested...
	waitFor(t, 60*time.Second, "up{job=\"compactord\"} == 1", pp, func() (bool, string) {
		v, err := api.query(`up{job="compactord"}`)
		if err != nil || len(v) != 1 {
			return false, fmt.Sprintf("%v %v", v, err)
		}
		return v.value(0) == 1, fmt.Sprintf("up=%v", v.value(0))
	})
	const successes = `sum(compactord_job_runs_total{job="compactord",result="success"})`
	var first float64
	waitFor(t, 90*time.Second, "successful job runs in Prometheus", pp, func() (bool, string) {
		v, err := api.query(successes)
		if err != nil || len(v) == 0 {
			return false, fmt.Sprintf("%v %v", v, err)
		}
		first = v.value(0)
		return first > 0, fmt.Sprintf("%s = %v", successes, first)
	})
	// ... and keep being ingested: the counter grows between scrapes, and
	// every job kind has succeeded at least once.
	waitFor(t, 90*time.Second, "the success counter to grow", pp, func() (bool, string) {
		v, err := api.query(successes)
		if err != nil || len(v) == 0 {
			return false, fmt.Sprintf("%v %v", v, err)
		}
		return v.value(0) > first, fmt.Sprintf("%v, first seen %v", v.value(0), first)
	})
	waitFor(t, 90*time.Second, "a success of every job kind", pp, func() (bool, string) {
		v, err := api.query(`sum by (kind) (compactord_job_runs_total{result=~"success|skipped"}) > 0`)
		if err != nil {
			return false, err.Error()
		}
		kinds := map[string]bool{}
		for _, s := range v {
			kinds[s.Metric["kind"]] = true
		}
		var missing []string
		for _, k := range scheduler.Kinds {
			if !kinds[string(k)] {
				missing = append(missing, string(k))
			}
		}
		return len(missing) == 0, fmt.Sprintf("no success yet of %v", missing)
	})

	// Every rule of the shipped file is loaded and evaluates without error.
	rules := loadRules(t)
	wantRules := 0
	for _, g := range rules.Groups {
		wantRules += len(g.Rules)
	}
	waitFor(t, 60*time.Second, "every rule evaluated with health ok", pp, func() (bool, string) {
		code, body, err := httpGet(api.base + "/api/v1/rules")
		if err != nil || code != 200 {
			return false, fmt.Sprintf("%d %v", code, err)
		}
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name           string `json:"name"`
						Health         string `json:"health"`
						LastError      string `json:"lastError"`
						LastEvaluation string `json:"lastEvaluation"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return false, err.Error()
		}
		n, ok := 0, 0
		var bad []string
		for _, g := range r.Data.Groups {
			for _, rl := range g.Rules {
				n++
				switch {
				case rl.Health == "ok":
					ok++
				case rl.Health == "err":
					bad = append(bad, rl.Name+": "+rl.LastError)
				}
			}
		}
		if len(bad) > 0 {
			t.Fatalf("rules fail to evaluate against real data: %v", bad)
		}
		return n == wantRules && ok == n, fmt.Sprintf("%d of %d rules loaded, %d evaluated ok", n, wantRules, ok)
	})

	// Every dashboard query parses and runs. Those the demo workload
	// exercises must return data once a rate window has passed.
	mustHaveData := map[string]bool{
		"Job runs by kind and result":     true,
		"Commits by operation and result": true,
		"Object-store latency (p50, p99)": true,
		"Pending generations":             true,
		"Index catch-up lag":              true,
	}
	for _, p := range loadDashboard(t).queryPanels() {
		for _, tg := range p.Targets {
			q := grafanaVars(tg.Expr)
			if _, err := api.query(q); err != nil {
				t.Errorf("panel %q query %s does not run: %v\n%s", p.Title, tg.RefID, err, q)
			}
		}
		if mustHaveData[p.Title] {
			q := grafanaVars(p.Targets[0].Expr)
			waitFor(t, 60*time.Second, "data for panel "+p.Title, pp, func() (bool, string) {
				v, err := api.query(q)
				return err == nil && len(v) > 0, fmt.Sprintf("%d series, err %v", len(v), err)
			})
			delete(mustHaveData, p.Title)
		}
	}
	for title := range mustHaveData {
		t.Errorf("no dashboard panel titled %q", title)
	}

	// A healthy demo has no halted table.
	if v, err := api.query(`max(compactord_table_halted)`); err != nil || len(v) != 1 || v.value(0) != 0 {
		t.Errorf("max(compactord_table_halted) = %v (err %v), want 0", v, err)
	}

	if err := pp.stop(); err != nil {
		t.Errorf("prometheus did not exit cleanly: %v", err)
	}
	stopDaemon(t, d)
}
