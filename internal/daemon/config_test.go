package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMain(m *testing.M) { stores.Main(m) }

// Every way a configuration can be wrong gets one clear sentence naming
// the key and, when there is one, its line.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       []string
	}{
		{"unknown top-level key", "workers: 2\nworkerz: 3\n", 2, []string{`unknown key "workerz" in the top level`, "known keys:"}},
		{"unknown nested key", "schedule:\n  merge: \"@every 1s\"\n  mrege: \"@every 1s\"\n", 3, []string{`unknown key "mrege" in schedule`, "merge"}},
		{"unknown key in a job section", "jobs:\n  cleanup:\n    retain_version: 3\n", 3, []string{`unknown key "retain_version" in jobs.cleanup`}},
		{"unknown key in a table", "tables:\n  - url: mem://x\n    nmae: y\n", 3, []string{`unknown key "nmae" in tables[0]`}},
		{"bad cron spec", "schedule:\n  compact: \"*/5 * *\"\n", 2, []string{"schedule.compact", `invalid cron spec "*/5 * *"`}},
		{"bad @every", "schedule:\n  trim: \"@every soon\"\n", 2, []string{"schedule.trim", "@every needs a positive duration"}},
		{"bad duration", "poll_interval: 5 seconds\n", 1, []string{"poll_interval", `"5 seconds" is not a duration`}},
		{"bare number as duration", "sync_interval: 30\n", 1, []string{"sync_interval", `"30" is not a duration`}},
		{"bad nested duration", "lease:\n  ttl: forever\n", 2, []string{"lease.ttl", "not a duration"}},
		{"not an integer", "workers: many\n", 1, []string{"workers", `"many" is not an integer`}},
		{"bad URL scheme", "tables:\n  - url: ftp://host/t\n", 2, []string{"tables[0].url", `unsupported scheme "ftp"`}},
		{"file URL without absolute path", "tables:\n  - url: file://relative/t\n", 2, []string{"tables[0].url", "absolute path"}},
		{"duplicate table URL", "tables:\n  - url: mem://b/t\n  - url: mem://b/t\n    name: other\n", 3, []string{"tables[1].url", "duplicate table mem://b/t", "tables[0]"}},
		{"duplicate table name", "tables:\n  - url: mem://b/x/t\n  - url: mem://b/y/t\n", 3, []string{"tables[1].name", `duplicate table name "t"`}},
		{"bad table name", "tables:\n  - url: mem://b/t\n    name: a/b\n", 3, []string{"tables[0].name", "only letters"}},
		{"validation of a value", "workers: 0\n", 1, []string{"workers must be at least 1"}},
		{"lease renew too slow", "lease:\n  ttl: 30s\n  renew_interval: 20s\n", 3, []string{"lease.renew_interval", "a third"}},
		{"bad listen", "http:\n  listen: nowhere\n", 2, []string{"http.listen", "host:port"}},
		{"bad log level", "log:\n  level: loud\n", 2, []string{"log.level", "loud"}},
		{"job validation", "jobs:\n  trim:\n    keep_shard_manifests: 1\n", 2, []string{"jobs.trim", "keep_shard_manifests"}},
		{"min_age below the floor", "jobs:\n  cleanup:\n    min_age: 0s\n", 2, []string{"jobs.cleanup", "min_age 0s is below the floor of 1h0m0s", "allow_deleting_in_flight_writes: true"}},
		{"older_than below the floor", "jobs:\n  cleanup:\n    older_than: 10m\n", 2, []string{"jobs.cleanup", "older_than 10m0s is below the floor of 1h0m0s", "conflicts", "allow_deleting_in_flight_writes: true"}},
		{"negative memory budget", "jobs:\n  compact:\n    memory_budget_mib: -1\n", 2, []string{"jobs.compact", "memory_budget_mib must not be negative"}},
		{"negative rebuild threshold", "jobs:\n  index:\n    rebuild_segments_over: -1\n", 2, []string{"jobs.index", "rebuild_segments_over must not be negative"}},
		{"negative rebuild threshold in an override", "overrides:\n  - match: t\n    jobs:\n      index:\n        rebuild_segments_over: -2\n", 0, []string{"overrides[0].jobs.index", "rebuild_segments_over must not be negative"}},
		{"syntax error", "schedule: [\n", 0, []string{"config bad.yaml"}},
		{"wrong shape", "tables: mem://x\n", 1, []string{"tables must be a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := daemon.Parse([]byte(tc.yaml), "bad.yaml", daemon.Overrides{})
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *daemon.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not a ConfigError: %v", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("message spans lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if tc.line > 0 && ce.Line != tc.line {
				t.Errorf("line %d, want %d (%s)", ce.Line, tc.line, msg)
			}
			if tc.line > 0 && !strings.HasPrefix(msg, "config bad.yaml:") {
				t.Errorf("message %q does not start with the file and line", msg)
			}
		})
	}
}

// The acceptance configuration of issue 6, the demo's and the documented
// example all load.
// TestMinAgeFloorOverride: the key that names the hazard lets a min_age
// and an older_than below the floor through.
func TestMinAgeFloorOverride(t *testing.T) {
	cfg, err := daemon.Parse([]byte("jobs:\n  cleanup:\n    min_age: 30s\n    older_than: 10s\n    allow_deleting_in_flight_writes: true\n"), "ok.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Jobs.Cleanup.MinAge != 30*time.Second || cfg.Jobs.Cleanup.OlderThan != 10*time.Second || !cfg.Jobs.Cleanup.AllowDeletingInFlightWrites {
		t.Fatalf("jobs.cleanup %+v", cfg.Jobs.Cleanup)
	}
}

func TestShippedConfigsLoad(t *testing.T) {
	acceptance := "http:\n  listen: 127.0.0.1:19999\ntables:\n  - url: file:///tmp/x/table\nschedule:\n" +
		"  merge: \"@every 1s\"\n  compact: \"@every 1s\"\n  index: \"@every 1s\"\n  trim: \"@every 1s\"\n  cleanup: \"@every 1h\"\n"
	cfg, err := daemon.Parse([]byte(acceptance), "acceptance.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tables[0].Name != "table" || cfg.Scheduler.Schedule.Cleanup != "@every 1h" || cfg.Scheduler.Workers != 4 {
		t.Fatalf("%+v", cfg)
	}
	for _, f := range []string{"../../configs/demo.yaml", "../../configs/compactord.yaml"} {
		if _, err := daemon.Load(f, daemon.Overrides{}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// An empty file is all defaults.
	if _, err := daemon.Parse(nil, "", daemon.Overrides{}); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	demo := true
	cfg, err := daemon.Parse([]byte("workers: 3\nschedule:\n  merge: \"0 */5 * * * *\"\n"), "x.yaml", daemon.Overrides{
		Listen: "127.0.0.1:0", Workers: 9, Tables: []string{"mem://b/one", filepath.Join(t.TempDir(), "two")},
		LogLevel: "debug", Demo: &demo,
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.Scheduler.Workers != 9, cfg.HTTP.Listen != "127.0.0.1:0", cfg.Log.Level != "debug", !cfg.Demo.Enabled:
		t.Fatalf("overrides not applied: %+v", cfg)
	case cfg.Scheduler.Schedule.Merge != "0 */5 * * * *" || cfg.Scheduler.Schedule.Compact != "@every 5m":
		t.Fatalf("file and defaults not merged: %+v", cfg.Scheduler.Schedule)
	case cfg.Tables[1].Name != "two" || !strings.HasPrefix(cfg.Tables[1].URL, "file:///"):
		t.Fatalf("a bare path is not a file URL: %+v", cfg.Tables[1])
	case cfg.Scheduler.PollInterval != 10*time.Second:
		t.Fatalf("default poll interval %v", cfg.Scheduler.PollInterval)
	}
	if _, err := daemon.Load(filepath.Join(t.TempDir(), "missing.yaml"), daemon.Overrides{}); err == nil ||
		!strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("missing file: %v", err)
	}
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.Parse([]byte("http:\n  admin_token: a\n  admin_token_file: "+tok+"\n"), "x.yaml", daemon.Overrides{}); err == nil {
		t.Fatal("both token settings accepted")
	}
}

// configs/compactord.yaml documents every key: each key path of Config
// appears in it (so a new setting cannot ship undocumented).
func TestExampleConfigHasEveryKey(t *testing.T) {
	data, err := os.ReadFile("../../configs/compactord.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var walk func(n *yaml.Node, p string)
	walk = func(n *yaml.Node, p string) {
		switch n.Kind {
		case yaml.DocumentNode:
			walk(n.Content[0], p)
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if p != "" {
					k = p + "." + k
				}
				have[k] = true
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, p+"[]")
			}
		}
	}
	walk(&root, "")
	var missing []string
	var want func(t reflect.Type, p string)
	want = func(t reflect.Type, p string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if strings.Contains(opts, "inline") {
				want(f.Type, p)
				continue
			}
			k := name
			if p != "" {
				k = p + "." + name
			}
			if !have[k] {
				missing = append(missing, k)
			}
			switch {
			case f.Type.Kind() == reflect.Struct:
				want(f.Type, k)
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				want(f.Type.Elem(), k+"[]")
			}
		}
	}
	want(reflect.TypeOf(daemon.Config{}), "")
	if len(missing) > 0 {
		t.Fatalf("configs/compactord.yaml does not document: %s", strings.Join(missing, ", "))
	}
}

// configs/compactord.yaml states the defaults of the jobs and the commit
// loop: a value there that differs from the package's DefaultConfig would
// tell operators a default that is not the one they get.
func TestExampleConfigStatesTheDefaults(t *testing.T) {
	cfg, err := daemon.Load("../../configs/compactord.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.DefaultConfig()
	if len(cfg.Jobs.Index.Indices) == 0 {
		cfg.Jobs.Index.Indices = nil // indices: [] states "all", as nil does
	}
	if !reflect.DeepEqual(cfg.Jobs, d.Jobs) {
		t.Errorf("configs/compactord.yaml jobs:\n%+v\ndefaults:\n%+v", cfg.Jobs, d.Jobs)
	}
	if cfg.Commit != d.Commit {
		t.Errorf("configs/compactord.yaml commit: %+v, defaults %+v", cfg.Commit, d.Commit)
	}
}
