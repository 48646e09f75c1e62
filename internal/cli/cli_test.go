package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/stores"
)

// The test binary doubles as the compactord binary: with COMPACTORD_CLI_CHILD
// set it runs the command line, so multi-process tests need no build step.
func TestMain(m *testing.M) {
	if os.Getenv("COMPACTORD_CLI_CHILD") == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	stores.Main(m)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runAt(t, clock.Real(), stdin, args...)
}

// runJSON runs the command line, fails the test unless it exits 0, and
// decodes its standard output's one JSON document into v.
func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	r := run(t, "", args...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), v); err != nil {
		t.Fatalf("%v: output %q: %v", args, r.stdout, err)
	}
}

// runDoc is runJSON into a generic document.
func runDoc(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var m map[string]any
	runJSON(t, &m, args...)
	return m
}

// runAt runs the command line on the clock clk.
func runAt(t *testing.T, clk clock.Clock, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainAt(context.Background(), clk, args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// shiftedClock is the wall clock moved by d (a year on, cleanup finds
// every version old enough).
type shiftedClock struct {
	clock.Clock
	d time.Duration
}

func (c shiftedClock) Now() time.Time { return c.Clock.Now().Add(c.d) }

func yearOn() clock.Clock { return shiftedClock{clock.Real(), 365 * 24 * time.Hour} }

func mustRun(t *testing.T, stdin string, args ...string) map[string]any {
	t.Helper()
	r := run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("compactord %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(strings.Split(r.stdout, "\n")[0])), &doc); err != nil {
		t.Fatalf("output %q is not JSON: %v", r.stdout, err)
	}
	return doc
}

func newTable(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t")
	mustRun(t, "", "table", "create", dir, "--schema", "id:int64,cat:string,val:float64", "--primary-key", "id")
	return dir
}

// snapshot lists every file under dir with its size, to prove bad input
// deletes nothing.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			out = append(out, fmt.Sprintf("%s:%d", p, info.Size()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// Bad input: one line on stderr, a non-zero exit, no panic, no file deleted.
func TestBadInput(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10")
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		stdin  string
		args   []string
		expect string
	}{
		{name: "JSON not matching the schema", stdin: `{"id": "seven"}`, args: []string{"table", "append", dir, "--jsonl", "-"}, expect: "line 1"},
		{name: "malformed JSON line", stdin: "{\"id\": 1}\n{\"id\": 2,", args: []string{"table", "append", dir, "--jsonl", "-"}, expect: "line 2"},
		{name: "unknown field", stdin: `{"id": 1, "colour": "red"}`, args: []string{"table", "append", dir, "--jsonl", "-"}, expect: "unknown column"},
		{name: "unknown URL scheme", args: []string{"table", "scan", "ftp://somewhere/t"}, expect: "unsupported URL scheme"},
		{name: "unknown flag", args: []string{"table", "scan", dir, "--colour"}, expect: "unknown flag"},
		{name: "delete predicate on an unknown column", args: []string{"table", "delete", dir, "--where", "colour = 'red'"}, expect: `no field "colour"`},
		{name: "delete predicate without an operator", args: []string{"table", "delete", dir, "--where", "id 5"}, expect: "want <field> <op> <literal>"},
		{name: "delete predicate with an unquoted string", args: []string{"table", "delete", dir, "--where", "cat = red"}, expect: "cannot read literal red (quote strings)"},
		{name: "delete predicate literal of the wrong type", args: []string{"table", "delete", dir, "--where", "id = 'seven'"}, expect: "is not a 64-bit integer"},
		{name: "delete by keys", args: []string{"table", "delete", dir, "--keys", "1,2"}, expect: "use --where"},
		{name: "more generated rows than a command holds", args: []string{"table", "append", dir, "--rows", "9223372036854775807"}, expect: "--rows 9223372036854775807 is more than"},
		{name: "negative rows", args: []string{"table", "append", dir, "--rows", "-3"}, expect: "--rows must be positive"},
		{name: "generated keys past the int64 limit", args: []string{"table", "append", dir, "--rows", "10", "--start", "9223372036854775800"}, expect: "past the largest key"},
		{name: "no table", args: []string{"table", "scan", filepath.Join(t.TempDir(), "none")}, expect: "no Lance dataset"},
		{name: "bad schema", args: []string{"table", "create", filepath.Join(t.TempDir(), "x"), "--schema", "id:uint8", "--primary-key", "id"}, expect: "unknown type"},
		{name: "truncated manifest", setup: func(t *testing.T, dir string) {
			p := filepath.Join(dir, meta.ManifestKey(meta.NamingV2, 2))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, args: []string{"table", "scan", dir}, expect: "corrupt Lance metadata"},
		{name: "garbage manifest", setup: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, meta.ManifestKey(meta.NamingV2, 2)), []byte("not a manifest at all"), 0o644)
		}, args: []string{"inspect", dir}, expect: "corrupt Lance metadata"},
		{name: "table of the retired private format", setup: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, meta.ManifestKey(meta.NamingV2, 2)), []byte("CMPD\x01framed-protobuf-and-crc"), 0o644)
		}, args: []string{"compact", dir}, expect: "retired private format"},
		{name: "missing data file", setup: func(t *testing.T, dir string) {
			m, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
			os.Remove(m[0])
		}, args: []string{"table", "scan", dir}, expect: "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := dir
			if tc.setup != nil {
				d = filepath.Join(t.TempDir(), "t")
				copyDir(t, dir, d)
				tc.setup(t, d)
				for i, a := range tc.args {
					if a == dir {
						tc.args[i] = d
					}
				}
			}
			before := snapshot(t, d)
			r := run(t, tc.stdin, tc.args...)
			if r.code == 0 {
				t.Fatalf("exit 0; stdout %q", r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, "compactord: ") || !strings.Contains(line, tc.expect) {
				t.Fatalf("stderr %q: want one line mentioning %q", r.stderr, tc.expect)
			}
			if after := snapshot(t, d); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// jsonLines parses stdout or stderr as JSON lines; every line must be one.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
