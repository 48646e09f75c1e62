package layout_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/layout"
)

const mod = "example.com/m"

func p(path string, imports ...string) layout.Package {
	full := func(s string) string { return mod + "/" + s }
	pk := layout.Package{ImportPath: full(path)}
	for _, i := range imports {
		pk.Imports = append(pk.Imports, full(i))
		pk.Deps = append(pk.Deps, full(i))
	}
	return pk
}

func rules() layout.Rules {
	r := layout.Project
	r.Allow = nil
	return r
}

func strs(vs []layout.Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

// Each rule fails on a package that breaks it and passes on one that
// keeps it.
func TestCheckRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkgs []layout.Package
		want []string
	}{
		{"product imports a harness", []layout.Package{p("internal/daemon", "internal/testing/faults")},
			[]string{"no-harness: internal/daemon: imports the test harness internal/testing/faults"}},
		{"harness imports a harness", []layout.Package{p("internal/testing/model", "internal/testing/faults")}, nil},
		{"scheduler imports a format package", []layout.Package{p("internal/scheduler", "internal/meta")},
			[]string{"format-free: internal/scheduler: depends on the format package internal/meta"}},
		{"clock reaches a format subpackage indirectly", []layout.Package{{ImportPath: mod + "/internal/clock",
			Imports: []string{mod + "/internal/x"}, Deps: []string{mod + "/internal/x", mod + "/internal/format/file"}}},
			[]string{"format-free: internal/clock: depends on the format package internal/format/file (indirectly)"}},
		{"scheduler on its own leaves", []layout.Package{p("internal/scheduler", "internal/jobclass", "internal/observe", "internal/storage")}, nil},
		{"a job package may import formats", []layout.Package{p("internal/daemon", "internal/meta", "internal/commit")}, nil},
		{"daemon links the demo", []layout.Package{p("internal/daemon", "internal/demo")},
			[]string{"no-demo: internal/daemon: links internal/demo"}},
		{"daemon may use the demo's configuration", []layout.Package{p("internal/daemon", "internal/demo/democfg")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stale, err := layout.Check(mod, tc.pkgs, rules())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(strs(got), tc.want) || len(stale) != 0 {
				t.Fatalf("violations %q (stale allows %q), want %q", strs(got), stale, tc.want)
			}
		})
	}
}

// writeModule writes a module of the given files (path → source) into a
// temporary directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module " + mod + "\n\ngo 1.26\n"
	for name, src := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The whole check, from `go list` on: a synthetic module whose product
// package imports a test harness and whose storage declares a fault
// injector fails; the same module with both moved out passes, and a test
// file may import the harness.
func TestCheckSyntheticModule(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	bad := writeModule(t, map[string]string{
		"internal/testing/faults/faults.go": "package faults\n\nfunc Wrap() {}\n",
		"internal/daemon/daemon.go":         "package daemon\n\nimport \"example.com/m/internal/testing/faults\"\n\nfunc Run() { faults.Wrap() }\n",
		"internal/storage/storage.go":       "package storage\n\ntype Bucket interface{}\n",
		"internal/storage/faults.go":        "package storage\n\ntype Faulty struct{}\n\nvar ErrInjected error\n",
		"internal/storage/storage_test.go":  "package storage\n\ntype FaultyForTest struct{}\n",
	})
	module, pkgs, err := layout.Load(goCmd, bad)
	if err != nil {
		t.Fatal(err)
	}
	if module != mod {
		t.Fatalf("module %q", module)
	}
	got, _, err := layout.Check(module, pkgs, rules())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fault-free: internal/storage: faults.go declares ErrInjected, Faulty",
		"no-harness: internal/daemon: imports the test harness internal/testing/faults",
	}
	if !slices.Equal(strs(got), want) {
		t.Fatalf("violations %q, want %q", strs(got), want)
	}
	// Allowed, the storage violation does not fail; an allow entry that
	// matches nothing is reported stale.
	r := rules()
	r.Allow = []string{"fault-free: internal/storage: faults.go ", "no-harness: internal/nothing"}
	got, stale, err := layout.Check(module, pkgs, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0].Rule, "no-harness") || !slices.Equal(stale, []string{"no-harness: internal/nothing"}) {
		t.Fatalf("with allows: violations %q, stale %q", strs(got), stale)
	}

	good := writeModule(t, map[string]string{
		"internal/testing/faults/faults.go": "package faults\n\ntype Faulty struct{}\n",
		"internal/daemon/daemon.go":         "package daemon\n\nfunc Run() {}\n",
		"internal/daemon/daemon_test.go":    "package daemon\n\nimport (\n\t\"testing\"\n\n\t\"example.com/m/internal/testing/faults\"\n)\n\nfunc TestX(t *testing.T) { _ = faults.Faulty{} }\n",
		"internal/storage/storage.go":       "package storage\n\ntype Bucket interface{}\n",
		"internal/scheduler/scheduler.go":   "package scheduler\n\nimport _ \"example.com/m/internal/storage\"\n",
	})
	module, pkgs, err = layout.Load(goCmd, good)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := layout.Check(module, pkgs, rules()); err != nil || len(got) != 0 {
		t.Fatalf("clean module: %q, %v", strs(got), err)
	}
}

// compactord itself keeps its boundaries (make check runs the same check
// through ./internal/testing/layout/checklayout).
func TestProjectLayout(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	module, pkgs, err := layout.Load(goCmd, filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	got, stale, err := layout.Check(module, pkgs, layout.Project)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		t.Error(v)
	}
	for _, a := range stale {
		t.Logf("allowed violation no longer seen (remove it from layout.Project.Allow): %q", a)
	}
}
