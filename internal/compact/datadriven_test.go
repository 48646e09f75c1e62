package compact

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A minimal runner for Pebble-style data-driven test files:
//
//	# comment
//	<command> [key=value ...]
//	<input lines>
//	----
//	<expected output>
//	<blank line>
//
// With -rewrite the expected outputs are replaced by the actual ones.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven tests")

type testCase struct {
	pos    string
	cmd    string
	args   map[string]string
	input  string
	output string
	// line span of the output block, for rewriting
	outStart, outEnd int
}

func (c *testCase) arg(k string) (string, bool) { v, ok := c.args[k]; return v, ok }

func runDataDriven(t *testing.T, path string, fn func(t *testing.T, c *testCase) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cases []*testCase
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := &testCase{pos: fmt.Sprintf("%s:%d", path, i+1), args: map[string]string{}}
		fields := strings.Fields(l)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args[k] = v
		}
		i++
		var in []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "----" {
			in = append(in, lines[i])
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s: missing ----", c.pos)
		}
		i++
		c.input = strings.Join(in, "\n")
		c.outStart = i
		var out []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			out = append(out, lines[i])
			i++
		}
		c.outEnd = i
		c.output = strings.Join(out, "\n")
		cases = append(cases, c)
	}
	var rewritten []string
	last := 0
	for _, c := range cases {
		got := strings.TrimRight(fn(t, c), "\n")
		if *rewrite {
			rewritten = append(rewritten, lines[last:c.outStart]...)
			if got != "" {
				rewritten = append(rewritten, strings.Split(got, "\n")...)
			}
			last = c.outEnd
			continue
		}
		if got != c.output {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, c.cmd, got, c.output)
		}
	}
	if *rewrite {
		rewritten = append(rewritten, lines[last:]...)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		_, _ = w.WriteString(strings.Join(rewritten, "\n"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
