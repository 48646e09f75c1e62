package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func lsmRows(t *testing.T, f *lancedb.Fixture, lsm bool) map[int64]string {
	t.Helper()
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(lsm)}))
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLanceMergeCLI: dry-run plans without writing, --shard merges one
// shard, --max-generations 1 lands one commit per generation with one JSON
// line each, and LanceDB's base view after reads its LSM view before.
func TestLanceMergeCLI(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 4, 3)
	if d := lancedb.DiffByID(lsmRows(t, f, true), f.Want); d != "" {
		t.Fatalf("LanceDB's LSM view before: %s", d)
	}
	files := snapshot(t, f.Dir)
	code, out, stderr := runCLI(t, "merge", f.Dir, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	plan := jsonLines(t, out)
	if len(plan) < 2 {
		t.Fatalf("dry run planned %d jobs for 4 shards: %s", len(plan), out)
	}
	pending := map[string]int{}
	for _, p := range plan {
		gens, _ := p["generations"].([]any)
		if p["dry_run"] != true || len(gens) == 0 || p["read_version"] != float64(f.Version) {
			t.Errorf("plan line %v", p)
		}
		pending[p["shard"].(string)] = len(gens)
	}
	if got := snapshot(t, f.Dir); strings.Join(got, "\n") != strings.Join(files, "\n") {
		t.Fatal("the dry run changed the table")
	}

	// One shard alone, one generation per commit.
	first := plan[0]["shard"].(string)
	code, out, stderr = runCLI(t, "merge", f.Dir, "--shard", first, "--max-generations", "1")
	if code != 0 {
		t.Fatalf("merge --shard: exit %d: %s", code, stderr)
	}
	landed := jsonLines(t, out)
	if len(landed) != pending[first] {
		t.Fatalf("merge --shard %s landed %d commits, want %d: %s", first, len(landed), pending[first], out)
	}
	version := float64(f.Version)
	for _, l := range landed {
		gens, _ := l["generations"].([]any)
		if l["shard"] != first || len(gens) != 1 || l["version"].(float64) <= version {
			t.Errorf("line %v (after version %v)", l, version)
		}
		version = l["version"].(float64)
	}
	_, out, _ = runCLI(t, "merge", f.Dir, "--dry-run")
	for _, p := range jsonLines(t, out) {
		if p["shard"] == first {
			t.Errorf("shard %s is still planned after its merge: %v", first, p)
		}
	}

	// The rest.
	code, out, stderr = runCLI(t, "merge", f.Dir)
	if code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	rest := jsonLines(t, out)
	inserted, superseded := 0.0, 0.0
	for _, l := range append(landed, rest...) {
		if l["skipped"] == true {
			t.Errorf("skip line %v", l)
			continue
		}
		inserted += l["inserted"].(float64)
		superseded += l["superseded"].(float64)
		for _, k := range []string{"version", "shard", "generations", "inserted", "superseded", "deleted"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %v has no %s", l, k)
			}
		}
	}
	// The base table had 20 rows; every landed row either is new or
	// supersedes one (per-generation commits supersede the rows earlier
	// commits of this run landed, too).
	if len(rest) != len(pending)-1 || 20+inserted-superseded != float64(len(f.Want)) {
		t.Errorf("landed %d more commits (want %d), inserted %v, superseded %v: %v rows, want %d", len(rest), len(pending)-1, inserted, superseded, 20+inserted-superseded, len(f.Want))
	}
	if d := lancedb.DiffByID(lsmRows(t, f, false), f.Want); d != "" {
		t.Errorf("LanceDB's base view after: %s", d)
	}
	code, out, stderr = runCLI(t, "merge", f.Dir)
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("a merge with nothing to do: exit %d, %q %s", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "merge", f.Dir, "--shard", "00000000-0000-0000-0000-000000000000"); code == 0 || !strings.Contains(stderr, "no shard") {
		t.Errorf("unknown shard: exit %d: %s", code, stderr)
	}
}

// A timestamp primary key with a btree on it: wal write, merge, index
// catch-up and index lookup all work (merge refused timestamp keys, so
// acknowledged MemWAL writes could never reach the base table).
func TestMergeTimestampKeyWithIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	mustRun(t, "", "table", "create", dir, "--schema", "ts:timestamp,v:int64", "--primary-key", "ts")
	mustRun(t, "", "table", "append", dir, "--rows", "5")
	mustRun(t, "", "index", "create", dir, "--name", "ts_idx", "--column", "ts", "--type", "btree")
	mustRun(t, "", "wal", "configure", dir, "--buckets", "1", "--maintain", "ts_idx")
	mustRun(t, `{"ts": 3, "v": -3}`+"\n"+`{"ts": 9, "v": -9}`+"\n", "wal", "write", dir, "--jsonl", "-", "--flush")
	if doc := mustRun(t, "", "merge", dir); doc["inserted"] != float64(2) || doc["superseded"] != float64(1) {
		t.Fatalf("merge: %v", doc)
	}
	mustRun(t, "", "index", "catchup", dir)
	for key, v := range map[string]float64{"3": -3, "9": -9} {
		code, out, stderr := runCLI(t, "index", "lookup", dir, "--name", "ts_idx", "--key", key)
		rows := jsonLines(t, out)
		if code != 0 || len(rows) != 1 || rows[0]["v"] != v {
			t.Fatalf("lookup %s: exit %d: %q %s", key, code, out, stderr)
		}
	}
	if n := len(jsonLines(t, run(t, "", "table", "scan", dir).stdout)); n != 6 {
		t.Fatalf("scan: %d rows, want 6", n)
	}
	if r := run(t, "", "verify", dir, "--deep"); r.code != 0 {
		t.Fatalf("verify --deep: %s%s", r.stdout, r.stderr)
	}
}

// merge --dry-run with nothing to merge prints one line saying so, and
// why, rather than nothing: on a table without a MemWAL, and once every
// flushed generation is merged.
func TestMergeDryRunWithoutWork(t *testing.T) {
	for _, c := range []struct {
		corpus, first, want string
	}{
		{"indexed", "", "nothing to merge: the table has no MemWAL"},
		{"memwal_1", "merge", "nothing to merge: no shard has flushed generations past its merged one"},
	} {
		dir := lancedb.CorpusDir(t, c.corpus)
		if c.first != "" {
			if code, _, stderr := runCLI(t, c.first, dir); code != 0 {
				t.Fatalf("%s: %s: exit %d: %s", c.corpus, c.first, code, stderr)
			}
		}
		code, out, stderr := runCLI(t, "merge", dir, "--dry-run")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.corpus, code, stderr)
		}
		lines := jsonLines(t, out)
		if len(lines) != 1 || lines[0]["jobs"] != 0.0 || lines[0]["dry_run"] != true || lines[0]["reason"] != c.want || lines[0]["read_version"] == nil {
			t.Errorf("%s: dry run without work printed %s, want one line: %s", c.corpus, out, c.want)
		}
	}
}
