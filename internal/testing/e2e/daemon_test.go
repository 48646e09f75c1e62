package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// daemonConfig runs the built-in demo workload on a local table with short
// schedules, so that every job kind runs within seconds. Leasing is off: a
// single instance, and no wait for a first lease round.
const daemonConfig = `
log:
  level: info
  format: json
http:
  listen: %s
workers: 2
schedule:
  merge: "@every 1s"
  compact: "@every 2s"
  index: "@every 1s"
  trim: "@every 2s"
  cleanup: "@every 3s"
poll_interval: 500ms
sync_interval: 1s
shutdown_grace: 10s
lease:
  enabled: false
jobs:
  compact:
    target_rows_per_fragment: 4096
  cleanup:
    retain_versions: 10
    older_than: 2s
    min_age: 2s
    allow_deleting_in_flight_writes: true
demo:
  enabled: true
  url: %s
  tables: [demo]
  shards: 2
  key_space: 2000
  write_interval: 100ms
  batch_size: 20
  delete_fraction: 0.1
  flush_interval: 1s
  base_interval: 1s
  base_rows: 100
`

// daemonProc is a running `compactord run`.
type daemonProc struct {
	*proc
	addr string // host:port
	dir  string
}

// startDaemon runs the Dockerfile-built binary on the demo workload and
// waits until /-/ready answers 200.
func startDaemon(t *testing.T) *daemonProc {
	t.Helper()
	bin := imageBinary(t)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfgPath := filepath.Join(dir, "compactord.yaml")
	cfg := fmt.Sprintf(daemonConfig, addr, filepath.Join(dir, "table"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Dir = dir
	p := startProc(t, "compactord", cmd)
	d := &daemonProc{proc: p, addr: addr, dir: dir}
	waitFor(t, 60*time.Second, "compactord /-/ready", p, func() (bool, string) {
		code, body, err := httpGet("http://" + addr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		return code == 200, fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
	})
	return d
}

// stopDaemon drains the daemon with SIGTERM and requires a clean exit: the
// drain path (stop new work, finish running jobs) must end with status 0.
func stopDaemon(t *testing.T, d *daemonProc) {
	t.Helper()
	if err := d.stop(); err != nil {
		t.Errorf("compactord did not exit cleanly on SIGTERM: %v\n%s", err, d.Output())
	}
}

// scrape returns the daemon's /metrics text.
func (d *daemonProc) scrape(t *testing.T) string {
	t.Helper()
	code, body, err := httpGet("http://" + d.addr + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return body
}

// exposition is the parsed text format: metric family names and samples.
type exposition struct {
	names   map[string]bool    // every sample name (histogram _bucket/_sum/_count included)
	samples map[string]float64 // series text (name{labels}) -> value
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

func parseExposition(text string) exposition {
	e := exposition{names: map[string]bool{}, samples: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(m[3], &v); err != nil {
			continue
		}
		e.names[m[1]] = true
		e.samples[m[1]+m[2]] = v
	}
	return e
}

// sum adds the samples of a metric whose labels contain every given
// label="value" pair.
func (e exposition) sum(name string, labels ...string) float64 {
	total := 0.0
	for k, v := range e.samples {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(k, l) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

var metricRefRE = regexp.MustCompile(`\bcompactord[_:][a-zA-Z0-9_:]*`)

// metricRefs returns the compactord_* metric names (and compactord:*
// recording rule names) an expression references.
func metricRefs(expr string) []string {
	seen := map[string]bool{}
	for _, m := range metricRefRE.FindAllString(expr, -1) {
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// missingMetrics lists the referenced metric names the exposition lacks.
// Recording-rule names (compactord:...) must be recorded by the rules file.
func missingMetrics(refs []string, e exposition, recorded map[string]bool) []string {
	var missing []string
	for _, r := range refs {
		if strings.Contains(r, ":") {
			if !recorded[r] {
				missing = append(missing, r+" (not recorded by compactord-rules.yml)")
			}
			continue
		}
		if !e.names[r] {
			missing = append(missing, r)
		}
	}
	return missing
}
