package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const dashboardPath = "deploy/grafana/compactord.json"

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readRepoFile(t, dashboardPath), &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardPath, err)
	}
	return d
}

// queryPanels are the panels that run queries (rows only group).
func (d dashboard) queryPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		if p.Type != "row" {
			out = append(out, p)
		}
	}
	return out
}

// grafanaVars replaces the dashboard's template variables with what
// Grafana would send for "All" and a 1m rate window, so that an expression
// can be run by Prometheus directly.
func grafanaVars(expr string) string {
	return strings.NewReplacer(
		"$__rate_interval", "1m",
		"$__interval", "15s",
		"$instance", ".*",
		"$table", ".*",
	).Replace(expr)
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/prometheus/compactord-rules.yml"), &rf); err != nil {
		t.Fatalf("parse the rules: %v", err)
	}
	return rf
}

// recorded is the set of recording-rule names.
func (rf ruleFile) recorded() map[string]bool {
	m := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				m[r.Record] = true
			}
		}
	}
	return m
}

// TestGrafanaDashboard checks the dashboard's structure offline: the
// required topics each have a panel, every panel queries the Prometheus
// data source variable and references compactord metrics.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "instance", "table"} {
		if !vars[v] {
			t.Errorf("no template variable $%s", v)
		}
	}
	panels := d.queryPanels()
	if len(panels) < 6 {
		t.Fatalf("%d panels, want at least 6", len(panels))
	}
	ids := map[int]bool{}
	all := ""
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel %q: duplicate id %d", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource must be the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		for _, tg := range p.Targets {
			if len(metricRefs(tg.Expr)) == 0 {
				t.Errorf("panel %q query %s references no compactord metric", p.Title, tg.RefID)
			}
			all += tg.Expr + "\n"
		}
	}
	// The topics the dashboard exists for.
	for topic, metric := range map[string]string{
		"job rates":             "compactord_job_runs_total",
		"job failures":          "compactord_job_failures_total",
		"commit conflicts":      "compactord_commit_conflicts_total",
		"LSM debt (pending)":    "compactord_mem_wal_pending_generations",
		"LSM debt (retained)":   "compactord_sstable_retained_bytes",
		"catch-up lag":          "compactord_index_catchup_lag_generations",
		"bytes reclaimed":       "compactord_sstable_trimmed_bytes_total",
		"object-store latency":  "compactord_objstore_operation_duration_seconds_bucket",
		"object-store requests": "compactord_objstore_operations_total",
	} {
		if !strings.Contains(all, metric) {
			t.Errorf("no panel for %s (%s)", topic, metric)
		}
	}
	if !strings.Contains(all, "by (table, index, shard)") {
		t.Errorf("catch-up lag must be shown per index (by table, index, shard)")
	}
}

// TestMetricsExist runs the daemon (the Dockerfile-built binary) on the
// demo workload and checks its /metrics: promtool's linter passes, the
// series docs/operations.md documents exist, and every metric the dashboard and the
// alert rules reference is exported. A renamed metric fails here rather
// than leaving an empty panel or an alert that can never fire.
func TestMetricsExist(t *testing.T) {
	d := startDaemon(t)
	dash := loadDashboard(t)
	rules := loadRules(t)
	recorded := rules.recorded()

	var refs []string
	where := map[string][]string{}
	for _, p := range dash.queryPanels() {
		for _, tg := range p.Targets {
			for _, r := range metricRefs(tg.Expr) {
				refs = append(refs, r)
				where[r] = append(where[r], "panel "+p.Title)
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range metricRefs(r.Expr) {
				refs = append(refs, m)
				where[m] = append(where[m], "rule "+r.Alert+r.Record)
			}
		}
	}
	// Per-shard and per-index series appear after the demo has created its
	// indices and MemWAL shards and a sync has seen them: poll.
	var missing []string
	waitFor(t, 90*time.Second, "every referenced metric in /metrics", d.proc, func() (bool, string) {
		missing = missingMetrics(uniq(refs), parseExposition(d.scrape(t)), recorded)
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})

	text := d.scrape(t)
	e := parseExposition(text)
	for _, name := range []string{
		"compactord_job_runs_total", "compactord_job_failures_total", "compactord_job_duration_seconds_bucket",
		"compactord_job_last_success_timestamp_seconds", "compactord_commit_attempts_total",
		"compactord_commit_conflicts_total", "compactord_commit_rebases_total", "compactord_commit_ambiguous_total",
		"compactord_objstore_operations_total", "compactord_objstore_operation_duration_seconds_bucket",
		"compactord_mem_wal_pending_generations", "compactord_sstable_retained_bytes",
		"compactord_index_catchup_lag_generations", "compactord_fri_versions", "compactord_table_halted",
		"compactord_lease_owned", "compactord_sstable_trimmed_bytes_total",
	} {
		if !e.names[name] {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// The metrics reference documents every family the daemon exports.
	docs := string(readRepoFile(t, "docs/operations.md"))
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && strings.HasPrefix(f[2], "compactord_") &&
			!strings.Contains(docs, "`"+f[2]+"`") {
			t.Errorf("docs/operations.md does not document the metric %s (%s)", f[2], f[3])
		}
	}
	if promtool, err := lookTool("promtool"); err == nil {
		if out, err := runStdin(t, text, promtool, "check", "metrics"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics (err %v):\n%s", err, out)
		}
	} else {
		skipOrFail(t, "promtool not found; install it with: apt-get install -y prometheus")
	}
	stopDaemon(t, d)
}

func uniq(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	out := make([]string, 0, len(m))
	for x := range m {
		out = append(out, x)
	}
	sort.Strings(out)
	return out
}

// TestRunbooks: every alert links to its own section of
// docs/operations.md, and the section exists.
func TestRunbooks(t *testing.T) {
	docs := string(readRepoFile(t, "docs/operations.md"))
	const base = "https://github.com/compactord/compactord/blob/main/docs/operations.md#"
	n := 0
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !strings.Contains(docs, "\n### "+r.Alert+"\n") {
				t.Errorf("alert %s has no section \"### %s\" in docs/operations.md", r.Alert, r.Alert)
			}
			if want := base + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("alert %s severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s needs a summary and a description", r.Alert)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d alerts, want at least 6", n)
	}
}
