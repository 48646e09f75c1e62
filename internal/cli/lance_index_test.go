package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testutil/lancedb"
)

// TestLanceIndexCatchupCLI: index catchup on LanceDB's indexed table adds
// a delta to the named index only, then to the other; a second run commits
// nothing; an unknown index name fails without committing.
func TestLanceIndexCatchupCLI(t *testing.T) {
	dir := lancedb.CorpusDir(t, "indexed")
	type out struct {
		Version   uint64
		Committed bool
		Indices   []struct {
			Name      string
			Fragments []uint32
			Rows      int
			Rebuilt   bool
		}
	}
	catchup := func(args ...string) out {
		t.Helper()
		r := run(t, "", append([]string{"index", "catchup", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("index catchup %v: exit %d: %s", args, r.code, r.stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &o); err != nil {
			t.Fatalf("output %q: %v", r.stdout, err)
		}
		return o
	}
	if r := run(t, "", "index", "catchup", dir, "--indices", "nope"); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("unknown index: exit %d: %s", r.code, r.stderr)
	}
	o := catchup("--indices", "id_idx")
	if !o.Committed || o.Version != 7 || len(o.Indices) != 1 || o.Indices[0].Name != "id_idx" || o.Indices[0].Rows != 5 || o.Indices[0].Fragments[0] != 3 {
		t.Fatalf("first catch-up: %+v", o)
	}
	o = catchup("--rebuild")
	if !o.Committed || o.Version != 8 || len(o.Indices) != 1 || o.Indices[0].Name != "cat_idx" || o.Indices[0].Rows != 35 || !o.Indices[0].Rebuilt {
		t.Fatalf("second catch-up: %+v", o)
	}
	if o = catchup(); o.Committed || len(o.Indices) != 0 {
		t.Fatalf("third catch-up: %+v", o)
	}
}
