package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

var (
	wantValue = regexp.MustCompile(`^# want (\S+): (\S+) = (.*) from (.*)$`)
	wantError = regexp.MustCompile(`^# want error: (.*)$`)
	wantLine  = regexp.MustCompile(`^# want line: (\d+)$`)
)

// Each file under testdata/policy is a configuration whose leading
// comments say what it must give: "# want TABLE: KEY = VALUE from SOURCE"
// for a value of a table's effective policy, or "# want error: TEXT"
// (and "# want line: N") for a configuration check config must refuse.
func TestPolicyConfig(t *testing.T) {
	files, err := filepath.Glob("testdata/policy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var values [][]string
			var errs []string
			line := 0
			for l := range strings.SplitSeq(string(data), "\n") {
				if m := wantValue.FindStringSubmatch(l); m != nil {
					values = append(values, m[1:])
				} else if m := wantError.FindStringSubmatch(l); m != nil {
					errs = append(errs, m[1])
				} else if m := wantLine.FindStringSubmatch(l); m != nil {
					line, _ = strconv.Atoi(m[1])
				}
			}
			if len(values) == 0 && len(errs) == 0 {
				t.Fatal("the file states no expectation")
			}
			cfg, err := daemon.Parse(data, f, daemon.Overrides{})
			if len(errs) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				var ce *daemon.ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("%T is not a ConfigError: %v", err, err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("message spans lines: %q", err)
				}
				for _, w := range errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message %q lacks %q", err, w)
					}
				}
				if line > 0 && ce.Line != line {
					t.Errorf("line %d, want %d (%v)", ce.Line, line, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range values {
				table, key, value, source := v[0], v[1], v[2], v[3]
				p := cfg.PolicyFor(table)
				i := slices.IndexFunc(p.Values, func(pv daemon.PolicyValue) bool { return pv.Key == key })
				if i < 0 {
					t.Errorf("%s: no key %s in %v", table, key, p.Values)
					continue
				}
				if got := fmt.Sprint(p.Values[i].Value); got != value || p.Values[i].Source != source {
					t.Errorf("%s: %s = %s from %s, want %s from %s", table, key, got, p.Values[i].Source, value, source)
				}
			}
		})
	}
}

// Every key an override may set is a key of the defaults block, of the
// same type: the policy lists each with its value, and the effective
// settings the jobs read are the listed ones.
func TestPolicyKeysExist(t *testing.T) {
	cfg, err := daemon.Parse([]byte(`overrides:
  - match: t
    schedule: {merge: "@every 7s", compact: "@every 8s", index: "@every 9s", trim: "@every 10s", cleanup: "@every 11s"}
    jobs:
      merge: {max_generations: 3}
      compact: {target_rows_per_fragment: 1000, deletion_threshold: 0.5, inline_remap: false}
      index: {rebuild_segments_over: 6}
      trim: {reader_grace: 2m, keep_shard_manifests: 4}
      cleanup: {retain_versions: 5, older_than: 6h, min_age: 2h, allow_deleting_in_flight_writes: true}
`), "keys.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.PolicyFor("t")
	keys := daemon.PolicyKeys()
	if len(p.Values) != len(keys) || len(keys) != 16 {
		t.Fatalf("policy lists %d values for %d keys (want 16): %v", len(p.Values), len(keys), p.Values)
	}
	for i, v := range p.Values {
		if v.Key != keys[i] || v.Source != `overrides[0] (match "t")` {
			t.Errorf("value %d: %+v", i, v)
		}
	}
	j, s := p.Jobs, p.Schedule
	if s.Merge != "@every 7s" || s.Cleanup != "@every 11s" || j.Merge.MaxGenerations != 3 || j.Compact.TargetRowsPerFragment != 1000 ||
		j.Compact.DeletionThreshold != 0.5 || j.Compact.InlineRemap || j.Trim.ReaderGrace.Minutes() != 2 || j.Trim.KeepShardManifests != 4 ||
		j.Cleanup.RetainVersions != 5 || j.Cleanup.OlderThan.Hours() != 6 || j.Cleanup.MinAge.Hours() != 2 || !j.Cleanup.AllowDeletingInFlightWrites ||
		j.Index.RebuildSegmentsOver != 6 {
		t.Fatalf("effective settings: %+v %+v", s, j)
	}
	// The process-wide settings stay the defaults'.
	if j.Compact.Parallelism != cfg.Jobs.Compact.Parallelism || j.Cleanup.Concurrency != cfg.Jobs.Cleanup.Concurrency {
		t.Fatalf("process-wide settings changed: %+v", j)
	}
	// Another table keeps the defaults.
	if o := cfg.PolicyFor("u"); o.Override != "" || o.Jobs.Cleanup.RetainVersions != cfg.Jobs.Cleanup.RetainVersions {
		t.Fatalf("table u: %+v", o)
	}
}

// The scheduler runs each table on its own policy's schedule, on the
// injected clock, and a reload moves a table onto a new override without
// a restart.
func TestDaemonRunsTablePolicySchedule(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/fast1")
	createTable(t, root+"/slow")
	file := filepath.Join(t.TempDir(), "c.yaml")
	write := func(overrides string) {
		body := fmt.Sprintf("lease:\n  enabled: false\npoll_interval: 0s\nschedule:\n  merge: \"off\"\n  compact: \"@every 1h\"\n"+
			"  index: \"off\"\n  trim: \"off\"\n  cleanup: \"off\"\ntables:\n  - url: %s/fast1\n  - url: %s/slow\noverrides:\n%s", root, root, overrides)
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("  - match: \"fast*\"\n    schedule:\n      compact: \"@every 10s\"\n")
	load := func() (daemon.Config, error) { return daemon.Load(file, daemon.Overrides{Listen: "127.0.0.1:0"}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs(), Reload: load, Clock: clk})
	eventually(t, "ready", r.d.Ready)
	schedule := func(table string) string {
		st, ok := r.d.Scheduler().Table(table)
		if !ok {
			t.Fatalf("no table %s", table)
		}
		return st.Jobs["compact"].Schedule
	}
	if f, s := schedule("fast1"), schedule("slow"); f != "@every 10s" || s != "@every 1h" {
		t.Fatalf("compact schedules: fast1 %q, slow %q", f, s)
	}
	for i := 0; i < 5 && !within(func() bool { return rec.has("fast1/compact") }); i++ {
		clk.Advance(10 * time.Second)
	}
	if !rec.has("fast1/compact") {
		t.Fatal("the table's own schedule never ran")
	}
	if rec.has("slow/compact") {
		t.Fatal("the default hourly schedule ran within a minute")
	}

	write("  - match: \"fast*\"\n    schedule:\n      compact: \"off\"\n  - match: slow\n    schedule:\n      compact: \"@every 10s\"\n")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if f, s := schedule("fast1"), schedule("slow"); f != "off" || s != "@every 10s" {
		t.Fatalf("compact schedules after reload: fast1 %q, slow %q", f, s)
	}
	for i := 0; i < 5 && !within(func() bool { return rec.has("slow/compact") }); i++ {
		clk.Advance(10 * time.Second)
	}
	if !rec.has("slow/compact") {
		t.Fatal("the reloaded override's schedule never ran")
	}
	if st, _ := r.d.Scheduler().Table("fast1"); st.Jobs["compact"].Next != nil {
		t.Fatalf("fast1's compaction is off but has a next run at %v", st.Jobs["compact"].Next)
	}
}

// The table detail of the API and the status page show a table's
// effective policy, the override that applies and where each value came
// from.
func TestTableDetailShowsPolicy(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/events")
	createTable(t, root+"/orders")
	cfg, err := daemon.Parse(fmt.Appendf(nil, `http:
  listen: 127.0.0.1:0
lease:
  enabled: false
poll_interval: 0s
schedule: {merge: "off", compact: "off", index: "off", trim: "off", cleanup: "off"}
jobs:
  cleanup:
    retain_versions: 20
tables:
  - url: %s/events
  - url: %s/orders
overrides:
  - match: "ev*"
    jobs:
      compact:
        inline_remap: false
      cleanup:
        min_age: 2h
`, root, root), "api.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, cfg, daemon.Deps{Jobs: (&recorder{}).jobs()})
	eventually(t, "ready", r.d.Ready)
	source := func(table string) (string, map[string][2]any) {
		res := do(t, "GET", r.base+"/api/v1/tables/"+table, "")
		if res.status != 200 {
			t.Fatalf("%s: %+v", table, res)
		}
		doc := decode(t, res.body)
		if doc["name"] != table || doc["jobs"] == nil {
			t.Fatalf("%s: the status fields are gone: %v", table, doc)
		}
		p, ok := doc["policy"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no policy in %s", table, res.body)
		}
		out := map[string][2]any{}
		for _, v := range p["values"].([]any) {
			m := v.(map[string]any)
			out[m["key"].(string)] = [2]any{m["value"], m["source"]}
		}
		ov, _ := p["override"].(string)
		return ov, out
	}
	ov, ev := source("events")
	const by = `overrides[0] (match "ev*")`
	switch {
	case ov != by:
		t.Fatalf("events: override %q", ov)
	case ev["jobs.compact.inline_remap"] != [2]any{false, by}:
		t.Fatalf("events inline_remap: %v", ev["jobs.compact.inline_remap"])
	case ev["jobs.cleanup.min_age"] != [2]any{"2h0m0s", by}:
		t.Fatalf("events min_age: %v", ev["jobs.cleanup.min_age"])
	case ev["jobs.cleanup.retain_versions"] != [2]any{float64(20), "config"}:
		t.Fatalf("events retain_versions: %v", ev["jobs.cleanup.retain_versions"])
	case ev["jobs.compact.deletion_threshold"] != [2]any{0.1, "default"}:
		t.Fatalf("events deletion_threshold: %v", ev["jobs.compact.deletion_threshold"])
	}
	ov, or := source("orders")
	if ov != "" || or["jobs.compact.inline_remap"] != [2]any{true, "default"} || or["jobs.cleanup.min_age"] != [2]any{"168h0m0s", "default"} {
		t.Fatalf("orders: override %q, %v", ov, or)
	}
	page := do(t, "GET", r.base+"/?q=events", "").body
	for _, w := range []string{`Policy: <code>overrides[0] (match &#34;ev*&#34;)</code>`, `<td><code>jobs.compact.inline_remap</code></td><td>false</td><td>overrides[0] (match &#34;ev*&#34;)</td>`} {
		if !strings.Contains(page, w) {
			t.Errorf("the status page lacks %s", w)
		}
	}
}

// The real jobs read their table's policy: the same cleanup run on two
// tables keeps every version of the one on the defaults and only the
// latest of the one whose override retains one.
func TestJobsUseTablePolicy(t *testing.T) {
	root := memRoot(t)
	for _, n := range []string{"keep", "short"} {
		createTable(t, root+"/"+n)
		appendFragments(t, root+"/"+n, 4, 10)
	}
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/keep"}, {URL: root + "/short"}}
	// Below the in-flight floor, so the override names the hazard: no
	// writer runs beside this test.
	one, zero, allow := 1, time.Duration(0), true
	cfg.TableOverrides = []daemon.PolicyOverride{{Match: "short", Jobs: daemon.PolicyJobs{Cleanup: daemon.PolicyCleanup{
		RetainVersions: &one, OlderThan: &zero, AllowDeletingInFlightWrites: &allow}}}}
	// Every version is two days old on the daemon's clock.
	fc := clock.NewFake(time.Now().Add(48 * time.Hour))
	r := run(t, cfg, daemon.Deps{Clock: fc})
	eventually(t, "ready", r.d.Ready)
	for _, n := range []string{"keep", "short"} {
		if res := do(t, "POST", r.base+"/api/v1/tables/"+n+"/jobs/cleanup", ""); res.status/100 != 2 {
			t.Fatalf("queue cleanup on %s: %+v", n, res)
		}
	}
	for _, n := range []string{"keep", "short"} {
		eventually(t, n+" cleaned up", func() bool {
			st, _ := r.d.Scheduler().Table(n)
			lr := st.Jobs["cleanup"].LastRun
			return lr != nil && (lr.Result == "success" || lr.Result == "skipped")
		})
	}
	versions := func(n string) int {
		b, err := storage.Open(context.Background(), root+"/"+n)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		count := 0
		if err := b.List(context.Background(), meta.VersionsDir, func(a storage.Attrs) error {
			if strings.HasSuffix(a.Key, ".manifest") {
				count++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return count
	}
	if k, s := versions("keep"), versions("short"); k != 5 || s != 1 {
		t.Fatalf("versions left: keep %d (want 5), short %d (want 1)", k, s)
	}
}

// Any file, however malformed its overrides, gives a configuration or one
// line of error, never a panic; an accepted one gives every table a policy
// listing every key from a known source.
func FuzzParseOverrides(f *testing.F) {
	files, _ := filepath.Glob("testdata/policy/*.yaml")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("overrides:\n  - match: \"[\"\n"))
	f.Add([]byte("overrides: {match: x}\n"))
	f.Add([]byte("overrides:\n  - match: x\n    schedule: off\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := daemon.Parse(data, "fuzz.yaml", daemon.Overrides{})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("message spans lines: %q", err)
			}
			return
		}
		for _, name := range []string{"x", "logs.app", "events", "a.b.c"} {
			p := cfg.PolicyFor(name)
			if len(p.Values) != len(daemon.PolicyKeys()) {
				t.Fatalf("%s: %d values", name, len(p.Values))
			}
			for _, v := range p.Values {
				if v.Source != "default" && v.Source != "config" && v.Source != p.Override {
					t.Fatalf("%s: %s from %q", name, v.Key, v.Source)
				}
			}
		}
	})
}
