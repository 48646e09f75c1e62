// Package layout checks the module's package boundaries (make check):
// product code does not import the test harnesses, the scheduler and the
// clock know no table format, the daemon does not link the demo writer,
// and fault injection lives with the harnesses, not in storage. It reads
// `go list -json` and the storage package's declarations; the rules are
// data (Rules), so that a test runs them over a synthetic module.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Package is what the rules read of one package (non-test files only).
type Package struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	// Imports are the direct imports, Deps every package it depends on.
	Imports []string
	Deps    []string
}

// Violation is one broken rule.
type Violation struct {
	Rule    string
	Package string
	Detail  string
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s: %s", v.Rule, v.Package, v.Detail) }

// Rules are the boundaries of a module, its import paths relative to the
// module path.
type Rules struct {
	// Harness is the directory of the test harnesses; only packages under
	// it (and test files) may import it.
	Harness string
	// FormatFree packages (and their dependencies) import no Format
	// package.
	FormatFree []string
	// Format lists the table-format packages (a prefix covers its
	// subpackages).
	Format []string
	// NoDemo packages do not depend on the Demo packages (exact paths).
	NoDemo []string
	Demo   []string
	// FaultFree packages declare no fault-injection symbols
	// (FaultSymbol) in their non-test files.
	FaultFree []string
	// Allow lists known violations that do not fail the check, each a
	// prefix of Violation.String(); Check reports the entries that match
	// nothing, so that the list shrinks.
	Allow []string
}

// Project is compactord's layout (README, "Package layout").
var Project = Rules{
	Harness:    "internal/testing",
	FormatFree: []string{"internal/scheduler", "internal/clock", "internal/jobclass", "internal/observe"},
	Format: []string{"internal/commit", "internal/meta", "internal/memwal", "internal/table", "internal/merge",
		"internal/compact", "internal/index", "internal/trim", "internal/cleanup", "internal/fri", "internal/format",
		"internal/scan", "internal/verify", "internal/inspect", "lancewal", "gen/lancepb"},
	NoDemo:    []string{"internal/daemon"},
	Demo:      []string{"internal/demo", "lancewal"},
	FaultFree: []string{"internal/storage"},
}

// FaultSymbol reports whether a top-level name is fault injection's.
func FaultSymbol(name string) bool {
	return strings.HasPrefix(name, "Fault") || strings.HasPrefix(name, "ErrInjected") || strings.HasPrefix(name, "Inject")
}

// under reports whether path is rel (relative to module) or below it.
func under(module, path, rel string) bool {
	p := module + "/" + rel
	return path == p || strings.HasPrefix(path, p+"/")
}

func underAny(module, path string, rels []string) (string, bool) {
	for _, r := range rels {
		if under(module, path, r) {
			return r, true
		}
	}
	return "", false
}

// Check applies r to pkgs, the packages of module. It returns the
// violations r.Allow does not cover, and the Allow entries that cover
// none.
func Check(module string, pkgs []Package, r Rules) (violations []Violation, stale []string, err error) {
	var all []Violation
	for _, p := range pkgs {
		name := rel(module, p.ImportPath)
		if !under(module, p.ImportPath, r.Harness) {
			for _, imp := range p.Imports {
				if under(module, imp, r.Harness) {
					all = append(all, Violation{"no-harness", name, "imports the test harness " + rel(module, imp)})
				}
			}
		}
		if _, ok := underAny(module, p.ImportPath, r.FormatFree); ok {
			for _, dep := range p.Deps {
				if _, bad := underAny(module, dep, r.Format); bad {
					all = append(all, Violation{"format-free", name, "depends on the format package " + rel(module, dep) + via(p, dep)})
				}
			}
		}
		if _, ok := underAny(module, p.ImportPath, r.NoDemo); ok {
			for _, dep := range p.Deps {
				if slices.Contains(r.Demo, rel(module, dep)) {
					all = append(all, Violation{"no-demo", name, "links " + rel(module, dep) + via(p, dep)})
				}
			}
		}
		if _, ok := underAny(module, p.ImportPath, r.FaultFree); ok {
			for _, f := range p.GoFiles {
				names, err := topLevelNames(filepath.Join(p.Dir, f))
				if err != nil {
					return nil, nil, err
				}
				var faults []string
				for _, n := range names {
					if FaultSymbol(n) {
						faults = append(faults, n)
					}
				}
				if len(faults) > 0 {
					sort.Strings(faults)
					all = append(all, Violation{"fault-free", name, f + " declares " + strings.Join(faults, ", ")})
				}
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].String() < all[j].String() })
	used := map[string]bool{}
	for _, v := range all {
		allowed := false
		for _, a := range r.Allow {
			if strings.HasPrefix(v.String(), a) {
				used[a], allowed = true, true
			}
		}
		if !allowed {
			violations = append(violations, v)
		}
	}
	for _, a := range r.Allow {
		if !used[a] {
			stale = append(stale, a)
		}
	}
	return violations, stale, nil
}

// via names the direct import through which p reaches dep, when dep is
// not direct.
func via(p Package, dep string) string {
	if slices.Contains(p.Imports, dep) {
		return ""
	}
	return " (indirectly)"
}

func rel(module, path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

func topLevelNames(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out = append(out, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out, nil
}

// Load lists the packages of the module in dir (go list -json ./...) and
// returns its module path.
func Load(goCmd, dir string) (string, []Package, error) {
	cmd := exec.Command(goCmd, "list", "-e", "-json=ImportPath,Dir,GoFiles,Imports,Deps,Module,Error", "./...")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	dec := json.NewDecoder(&stdout)
	var module string
	var pkgs []Package
	for {
		var p struct {
			Package
			Module *struct{ Path string }
			Error  *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Error != nil {
			return "", nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module != nil && module == "" {
			module = p.Module.Path
		}
		pkgs = append(pkgs, p.Package)
	}
	if module == "" {
		return "", nil, errors.New("go list found no module")
	}
	return module, pkgs, nil
}
