package e2e

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// There is no container engine on the test machines, so the Dockerfile is
// checked in two parts: its structure (multi-stage, static build, non-root
// final stage), and its build command, run for real in a copy of the build
// context that .dockerignore would send. The binary that comes out is the
// one the daemon tests run, so the image's binary is what gets tested.

// instr is one Dockerfile instruction.
type instr struct {
	cmd  string // upper case
	args string
	line int
}

// parseDockerfile splits a Dockerfile into instructions, joining
// continuation lines and dropping comments and parser directives.
func parseDockerfile(src string) ([]instr, error) {
	var out []instr
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		text := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		out = append(out, instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	if cur.Len() != 0 {
		return nil, fmt.Errorf("line %d: continuation at end of file", start)
	}
	return out, nil
}

// stage is one FROM ... up to the next FROM.
type stage struct {
	from, name string
	instrs     []instr
}

func stages(ins []instr) []stage {
	var out []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			out = append(out, s)
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].instrs = append(out[len(out)-1].instrs, in)
		}
	}
	return out
}

// shellWords splits a RUN line the way sh would for the simple commands a
// Dockerfile build step uses: words, single and double quotes, ${VAR}.
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return vars[k] })
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			cur.WriteString(expand(s[i+1 : i+1+j]))
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unterminated ${ in %q", s)
				}
				cur.WriteString(vars[s[j+1:j+k]])
				i = j + k
			} else {
				for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
					j++
				}
				cur.WriteString(vars[s[i+1:j]])
				i = j - 1
			}
			inWord = true
		case strings.ContainsRune("|&;<>()`", rune(c)):
			return nil, fmt.Errorf("shell operator %q in %q: keep the build step one simple command", c, s)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// goBuildStep is the Dockerfile's `go build` command.
type goBuildStep struct {
	env    []string // NAME=value assignments before `go`
	args   []string // after `go`
	output string   // the -o path
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func findGoBuild(t *testing.T, st stage, vars map[string]string) goBuildStep {
	t.Helper()
	var found []goBuildStep
	for _, in := range st.instrs {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		words, err := shellWords(in.args, vars)
		if err != nil {
			t.Fatalf("Dockerfile line %d: %v", in.line, err)
		}
		var step goBuildStep
		i := 0
		for ; i < len(words) && assignRE.MatchString(words[i]); i++ {
			step.env = append(step.env, words[i])
		}
		if i+1 >= len(words) || words[i] != "go" || words[i+1] != "build" {
			t.Fatalf("Dockerfile line %d: want `[VAR=value ...] go build ...`, got %q", in.line, in.args)
		}
		step.args = words[i+1:]
		for j, a := range step.args {
			if a == "-o" && j+1 < len(step.args) {
				step.output = step.args[j+1]
			}
		}
		found = append(found, step)
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one RUN ... go build in stage %q, found %d", st.name, len(found))
	}
	return found[0]
}

// dockerignore is a parsed .dockerignore: patterns anchored at the context
// root, `*` and `?` within a path segment, `**` across segments, `!` to
// re-include, the last matching pattern deciding. A pattern that matches a
// directory excludes everything below it.
type dockerignore struct {
	pats []ignorePat
}

type ignorePat struct {
	re     *regexp.Regexp
	negate bool
	text   string
}

func parseDockerignore(src string) (*dockerignore, error) {
	d := &dockerignore{}
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePat{text: line}
		if strings.HasPrefix(line, "!") {
			p.negate = true
			line = line[1:]
		}
		line = strings.Trim(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			case c == '[' || c == '\\':
				return nil, fmt.Errorf("pattern %q: character classes and escapes are not supported by this checker", p.text)
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		r, err := regexp.Compile(re.String())
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", p.text, err)
		}
		p.re = r
		d.pats = append(d.pats, p)
	}
	return d, nil
}

// excluded reports whether rel (slash-separated) is left out of the context.
func (d *dockerignore) excluded(rel string) bool {
	// A path is excluded when it or one of its parent directories matches.
	parts := strings.Split(rel, "/")
	ex := false
	for _, p := range d.pats {
		for i := 1; i <= len(parts); i++ {
			if p.re.MatchString(strings.Join(parts[:i], "/")) {
				ex = !p.negate
				break
			}
		}
	}
	return ex
}

// copyContext copies the module tree into dst, leaving out what
// .dockerignore excludes: what `docker build .` would send.
func copyContext(src, dst string, ign *dockerignore) (int, error) {
	n := 0
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ign.excluded(rel) {
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		switch {
		case de.IsDir():
			return os.MkdirAll(target, 0o755)
		case de.Type().IsRegular():
			n++
			return copyFile(p, target)
		case de.Type()&fs.ModeSymlink != 0:
			// Kept as links, as docker sends them.
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		default:
			return nil // sockets, devices: nothing a build needs
		}
	})
	return n, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// The Dockerfile's build, shared by every test that needs the binary.
var image struct {
	once sync.Once
	path string
	log  string
	err  error
}

// imageBinary builds compactord exactly as the Dockerfile's build stage
// does, from a copy of the build context, and returns the binary's path.
// The binary lives in <module root>/bin/e2e (build output, ignored by git,
// removed by `make clean`); each test binary rebuilds it once, which the
// Go build cache makes a link step after the first time.
func imageBinary(t *testing.T) string {
	t.Helper()
	requireTool(t, "go", "https://go.dev/doc/install")
	image.once.Do(func() { image.path, image.log, image.err = buildImageBinary(t) })
	if image.err != nil {
		t.Fatalf("build compactord as the Dockerfile does: %v\n%s", image.err, image.log)
	}
	return image.path
}

func buildImageBinary(t *testing.T) (string, string, error) {
	root := moduleRoot(t)
	ins, err := parseDockerfile(string(readRepoFile(t, "Dockerfile")))
	if err != nil {
		return "", "", fmt.Errorf("parse Dockerfile: %w", err)
	}
	st := stages(ins)
	if len(st) < 2 {
		return "", "", fmt.Errorf("Dockerfile has %d stages, want a build stage and a runtime stage", len(st))
	}
	build := st[0]
	vars := map[string]string{"VERSION": "e2e"}
	step := findGoBuild(t, build, vars)
	ign, err := parseDockerignore(string(readRepoFile(t, ".dockerignore")))
	if err != nil {
		return "", "", fmt.Errorf("parse .dockerignore: %w", err)
	}
	ctxDir, err := os.MkdirTemp("", "compactord-docker-context-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(ctxDir)
	if _, err := copyContext(root, ctxDir, ign); err != nil {
		return "", "", fmt.Errorf("copy the build context: %w", err)
	}
	outDir := filepath.Join(root, "bin", "e2e")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", "", err
	}
	tmpDir, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmpDir)
	tmpBin := filepath.Join(tmpDir, "compactord")
	args := append([]string(nil), step.args...)
	for i := range args {
		if i > 0 && args[i-1] == "-o" {
			args[i] = tmpBin
		}
	}
	// The container's environment: the Dockerfile's own assignments, no
	// GOFLAGS from this machine, no toolchain or module downloads (the
	// module cache is filled by `make test`'s go mod download).
	env := envWith("GOFLAGS", "", "GOTOOLCHAIN", "local", "GOPROXY", "off", "GOWORK", "off")
	env = append(env, step.env...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ctxDir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", string(out), fmt.Errorf("go %s (in the copied context): %w", strings.Join(args, " "), err)
	}
	final := filepath.Join(outDir, "compactord")
	// Rename is atomic: a concurrent test run keeps the binary it started.
	if err := os.Rename(tmpBin, final); err != nil {
		return "", "", err
	}
	return final, string(out), nil
}

// TestDockerfile checks the image's shape and that its build step makes a
// static binary that runs.
func TestDockerfile(t *testing.T) {
	ins, err := parseDockerfile(string(readRepoFile(t, "Dockerfile")))
	if err != nil {
		t.Fatal(err)
	}
	st := stages(ins)
	if len(st) < 2 {
		t.Fatalf("want a multi-stage Dockerfile, got %d stage(s)", len(st))
	}
	build, final := st[0], st[len(st)-1]
	if build.name == "" {
		t.Errorf("the build stage has no name (FROM ... AS build)")
	}
	if !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("build stage FROM %s, want a golang image", build.from)
	}
	step := findGoBuild(t, build, map[string]string{"VERSION": "e2e"})
	if !contains(step.env, "CGO_ENABLED=0") {
		t.Errorf("go build runs with %v: want CGO_ENABLED=0 for a static binary", step.env)
	}
	if step.output == "" {
		t.Fatalf("go build has no -o")
	}
	if !contains(step.args, "./cmd/compactord") {
		t.Errorf("go build args %v do not build ./cmd/compactord", step.args)
	}

	// The runtime stage: distroless static or scratch, a non-root user, the
	// binary copied from the build stage and used as the entrypoint.
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("runtime stage FROM %s, want gcr.io/distroless/static* or scratch", final.from)
	}
	var user, copyDst, entry string
	for _, in := range final.instrs {
		switch in.cmd {
		case "USER":
			user = in.args
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from="+build.name && f[1] == step.output {
				copyDst = f[2]
			}
		case "ENTRYPOINT":
			var e []string
			if err := json.Unmarshal([]byte(in.args), &e); err != nil || len(e) == 0 {
				t.Errorf("ENTRYPOINT %s: want the exec (JSON) form", in.args)
			} else {
				entry = e[0]
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("runtime stage USER %q: want a non-root user such as 65532:65532", user)
	}
	if copyDst == "" {
		t.Errorf("runtime stage does not COPY --from=%s %s", build.name, step.output)
	} else if entry != copyDst {
		t.Errorf("ENTRYPOINT %q is not the copied binary %q", entry, copyDst)
	}

	// The build itself.
	bin := imageBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("open the built binary as ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has a PT_INTERP program header (a dynamic loader): not static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("read DT_NEEDED: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v: not static", libs)
	}
	if _, err := exec.LookPath("file"); err == nil {
		out, err := run(t, "", nil, "file", bin)
		if err != nil {
			t.Errorf("file %s: %v", bin, err)
		} else if !strings.Contains(out, "statically linked") {
			t.Errorf("file says %q, want statically linked", strings.TrimSpace(out))
		}
	}
	out, err := run(t, "", nil, bin, "version")
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version != "e2e" {
		t.Errorf("version printed %q, want {\"version\":\"e2e\"} (the Dockerfile's VERSION build arg)", out)
	}
}

// TestDockerignore checks the matcher on the rules the build relies on.
func TestDockerignore(t *testing.T) {
	ign, err := parseDockerignore(string(readRepoFile(t, ".dockerignore")))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		".git/HEAD":                      true,
		"tools/versitygw":                true,
		"bin/compactord":                 true,
		"internal/x/testdata/a.parquet":  true,
		"go.mod":                         false,
		"go.sum":                         false,
		"cmd/compactord/main.go":         false,
		"internal/cli/root.go":           false,
		"gen/compactordv1/records.pb.go": false,
	} {
		if got := ign.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
