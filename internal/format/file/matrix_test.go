package file

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceDBMatrix has LanceDB 0.39 write the whole matrix of gen.mjs
// (every type, nullable or not, default and forced encodings, 2.0/2.1/2.2,
// small and multi-page columns) and compares each file with LanceDB's own
// read. It needs node and tools/lancedb (skipped without them, failed
// under CI=true); -short skips it.
func TestLanceDBMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the LanceDB matrix takes about a minute")
	}
	in := lancedb.Require(t)
	dir := t.TempDir()
	cmd := exec.Command(in.Node, filepath.Join("testdata", "gen.mjs"), dir, "matrix")
	cmd.Env = append(cmd.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gen.mjs: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "FAIL") {
		t.Fatalf("gen.mjs:\n%s", out)
	}
	pairs := oracleFiles(t, dir)
	if len(pairs) < 20 {
		t.Fatalf("gen.mjs made %d files:\n%s", len(pairs), out)
	}
	for _, p := range pairs {
		t.Run(filepath.Base(p[0]), func(t *testing.T) { compareWithOracle(t, p[0], p[1]) })
	}
}
