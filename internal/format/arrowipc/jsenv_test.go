package arrowipc

import (
	"os"
	"os/exec"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// arrowJS is node and the node_modules of the project's LanceDB install,
// which holds apache-arrow (make tools; skipped without it, a failure under
// CI=true).
func arrowJS(t testing.TB) (node, modules string) {
	t.Helper()
	in := lancedb.Require(t)
	return in.Node, in.NodeModules
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
