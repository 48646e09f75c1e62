package arrowipc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// arrowJS finds node and a node_modules directory holding apache-arrow: the
// project's tools/lancedb (make tools), $COMPACTORD_TOOLS/lancedb, then the
// scratch install /tmp/ldbtry. Missing, the test is skipped, except under
// CI=true, where make tools is expected to have installed it.
func arrowJS(t testing.TB) (node, modules string) {
	t.Helper()
	var cands []string
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				cands = append(cands, filepath.Join(d, "tools", "lancedb", "node_modules"))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if ct := os.Getenv("COMPACTORD_TOOLS"); ct != "" {
		cands = append(cands, filepath.Join(ct, "lancedb", "node_modules"))
	}
	cands = append(cands, "/tmp/ldbtry/node_modules")
	node, err := exec.LookPath("node")
	for _, c := range cands {
		if _, e := os.Stat(filepath.Join(c, "apache-arrow", "package.json")); e == nil && err == nil {
			return node, c
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("node or apache-arrow missing (looked in %v); run make tools", cands)
	}
	t.Skipf("node or apache-arrow missing (looked in %v); run make tools", cands)
	return "", ""
}

func runArrowJS(t testing.TB, args ...string) []byte {
	t.Helper()
	node, modules := arrowJS(t)
	cmd := exec.Command(node, append([]string{"testdata/arrowjs.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "ARROW_JS_MODULES="+modules)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("node arrowjs.mjs %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("node arrowjs.mjs %v: %v", args, err)
	}
	return out
}
