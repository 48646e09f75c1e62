package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// scanIDs returns id -> cat of the live rows.
func scanIDs(t *testing.T, dir string) map[float64]any {
	t.Helper()
	r := run(t, "", "table", "scan", dir)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	out := map[float64]any{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		id := row["id"].(float64)
		if _, dup := out[id]; dup {
			t.Fatalf("key %v is live twice", id)
		}
		out[id] = row["cat"]
	}
	return out
}

// The whole MemWAL path through the command line: configure, write with
// upserts and tombstones, flush, inspect, merge (dry run, then for real).
func TestWALAndMergeCommands(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "10") // ids 0..9
	doc := mustRun(t, "", "wal", "configure", dir, "--shards", "s0,s1")
	if doc["version"].(float64) != 3 || fmt.Sprint(doc["shards"]) != "[s0 s1]" {
		t.Fatalf("configure: %v", doc)
	}

	in := `{"id": 1, "cat": "wal", "val": 1.5}
{"_op": "delete", "id": 2}

{"id": 100, "cat": "new"}
`
	doc = mustRun(t, in, "wal", "write", dir, "--shard", "s0", "--jsonl", "-")
	if doc["epoch"].(float64) != 1 || doc["wal_position"].(float64) != 2 || doc["records"].(float64) != 3 || doc["flushed"] != false {
		t.Fatalf("write: %v", doc)
	}
	// The second invocation replays the first's entries (nothing flushed).
	doc = mustRun(t, `{"id": 1, "cat": "wal2"}`, "wal", "write", dir, "--shard", "s0", "--jsonl", "-")
	if doc["epoch"].(float64) != 2 || doc["replayed_records"].(float64) != 3 {
		t.Fatalf("second write: %v", doc)
	}
	doc = mustRun(t, "", "wal", "flush", dir, "--shard", "s0")
	if doc["generation"].(float64) != 1 || doc["sstable_rows"].(float64) != 3 || doc["replayed_records"].(float64) != 4 {
		t.Fatalf("flush: %v", doc)
	}
	doc = mustRun(t, "", "wal", "write", dir, "--shard", "s1", "--rows", "3", "--start", "200", "--flush")
	if doc["generation"].(float64) != 1 || doc["flushed"] != true {
		t.Fatalf("write --flush: %v", doc)
	}
	// Nothing left to flush: no generation.
	doc = mustRun(t, "", "wal", "flush", dir, "--shard", "s1")
	if doc["flushed"] != false || doc["current_generation"].(float64) != 2 {
		t.Fatalf("empty flush: %v", doc)
	}

	ins := mustRun(t, "", "inspect", dir)
	mw := ins["mem_wal"].(map[string]any)
	shards := mw["shards"].([]any)
	s0 := shards[0].(map[string]any)
	if s0["id"] != "s0" || s0["current_generation"].(float64) != 2 || s0["compacted_sstables"].(float64) != 0 || len(s0["sstables"].([]any)) != 1 {
		t.Fatalf("inspect mem_wal before merge: %v", mw)
	}

	plan := mustRun(t, "", "merge", dir, "--dry-run")
	if plan["dry_run"] != true || len(plan["plan"].([]any)) != 2 || plan["version"].(float64) != 3 {
		t.Fatalf("dry run: %v", plan)
	}
	if v := mustRun(t, "", "inspect", dir)["version"].(float64); v != 3 {
		t.Fatalf("a dry run committed version %v", v)
	}
	doc = mustRun(t, "", "merge", dir)
	if doc["version"].(float64) != 5 || len(doc["merged"].([]any)) != 2 {
		t.Fatalf("merge: %v", doc)
	}
	got := scanIDs(t, dir)
	want := map[float64]any{0: nil, 1: "wal2", 3: nil, 4: nil, 5: nil, 6: nil, 7: nil, 8: nil, 9: nil, 100: "new", 200: nil, 201: nil, 202: nil}
	if len(got) != len(want) {
		t.Fatalf("scan: %v", got)
	}
	for id, cat := range want {
		if _, ok := got[id]; !ok {
			t.Fatalf("key %v missing: %v", id, got)
		}
		if cat != nil && got[id] != cat {
			t.Fatalf("key %v: cat %v, want %v", id, got[id], cat)
		}
	}
	ins = mustRun(t, "", "inspect", dir)
	for _, s := range ins["mem_wal"].(map[string]any)["shards"].([]any) {
		if s.(map[string]any)["compacted_sstables"].(float64) != 1 {
			t.Fatalf("inspect after merge: %v", ins["mem_wal"])
		}
	}
	// Nothing pending: a merge commits nothing.
	doc = mustRun(t, "", "merge", dir, "--shard", "s0")
	if doc["version"].(float64) != 5 || len(doc["merged"].([]any)) != 0 {
		t.Fatalf("idle merge: %v", doc)
	}
}

// Merge processes racing on one file:// table: every generation is
// committed exactly once.
func TestRacingMergeProcesses(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "20")
	mustRun(t, "", "wal", "configure", dir, "--shards", "s0")
	for g := 0; g < 3; g++ {
		mustRun(t, "", "wal", "write", dir, "--shard", "s0", "--rows", "5", "--start", fmt.Sprint(g*7), "--seed", fmt.Sprint(g+2), "--flush")
	}
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "merge", dir)
		cmds[i].Env = append(os.Environ(), "COMPACTORD_CLI_CHILD=1")
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var throughs []float64
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, outs[i])
		}
		var doc map[string]any
		if err := json.Unmarshal(outs[i].Bytes(), &doc); err != nil {
			t.Fatalf("process %d output %q: %v", i, outs[i], err)
		}
		for _, r := range doc["merged"].([]any) {
			rm := r.(map[string]any)
			if rm["skipped"] != true {
				throughs = append(throughs, rm["through_generation"].(float64))
			}
		}
	}
	sort.Float64s(throughs)
	if len(throughs) == 0 || throughs[len(throughs)-1] != 3 {
		t.Fatalf("committed merges through %v", throughs)
	}
	for i := 1; i < len(throughs); i++ {
		if throughs[i] == throughs[i-1] {
			t.Fatalf("generation %v committed twice: %v", throughs[i], throughs)
		}
	}
	ins := mustRun(t, "", "inspect", dir)
	if s := ins["mem_wal"].(map[string]any)["shards"].([]any)[0].(map[string]any); s["compacted_sstables"].(float64) != 3 {
		t.Fatalf("compacted %v", s)
	}
	if got := scanIDs(t, dir); len(got) != 20 { // ids 0..19 upserted in place
		t.Fatalf("%d keys after the merges", len(got))
	}
}

// Bad input for the MemWAL commands: one clear line, non-zero exit, and
// nothing deleted. Input errors are caught before the shard is claimed,
// so they change nothing at all.
func TestWALBadInput(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "table", "append", dir, "--rows", "5")
	plain := filepath.Join(t.TempDir(), "plain")
	copyDir(t, dir, plain)
	mustRun(t, "", "wal", "configure", dir, "--shards", "s0")
	mustRun(t, `{"id": 1, "cat": "a"}`, "wal", "write", dir, "--shard", "s0", "--jsonl", "-")

	for _, tc := range []struct {
		name, stdin, expect string
		args                []string
	}{
		{"malformed JSON line", "{\"id\": 1}\n{\"id\": 2,", "line 2", []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-"}},
		{"row without the primary key", `{"cat": "x"}`, `line 1: missing primary-key field "id"`, []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-"}},
		{"tombstone without the primary key", `{"_op": "delete"}`, `missing primary-key field "id"`, []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-"}},
		{"bad op", `{"_op": "merge", "id": 1}`, `"_op" must be "upsert" or "delete"`, []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-"}},
		{"empty input", "\n\n", "no records", []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-"}},
		{"unconfigured shard", `{"id": 1}`, `shard "s9" is not configured`, []string{"wal", "write", dir, "--shard", "s9", "--jsonl", "-"}},
		{"no MemWAL", `{"id": 1}`, "no MemWAL configured", []string{"wal", "write", plain, "--shard", "s0", "--jsonl", "-"}},
		{"merge without MemWAL", "", "no MemWAL configured", []string{"merge", plain}},
		{"bad shard name", "", "shard name", []string{"wal", "configure", dir, "--shards", "../x"}},
		{"maintained index missing", "", `maintained index "nope" does not exist`, []string{"wal", "configure", dir, "--shards", "s0", "--maintain", "nope"}},
		{"dropping a shard with unflushed records", "", `cannot drop shard "s0"`, []string{"wal", "configure", dir, "--shards", "s1"}},
		{"both inputs", "", "exactly one of --jsonl or --rows", []string{"wal", "write", dir, "--shard", "s0", "--jsonl", "-", "--rows", "3"}},
		{"more generated rows than a command holds", "", "--rows 9223372036854775807 is more than", []string{"wal", "write", dir, "--shard", "s0", "--rows", "9223372036854775807"}},
		{"generated keys past the int64 limit", "", "past the largest key", []string{"wal", "write", dir, "--shard", "s0", "--rows", "10", "--start", "9223372036854775800"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dir
			for _, a := range tc.args {
				if a == plain {
					d = plain
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

// A WAL entry with a bad checksum: the next claim stops replay with an
// error naming the entry, applies nothing, writes no WAL entry and deletes
// nothing (the claim itself publishes a shard-manifest version).
func TestWALCorruptEntry(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "wal", "configure", dir, "--shards", "s0")
	mustRun(t, `{"id": 1, "cat": "a"}`, "wal", "write", dir, "--shard", "s0", "--jsonl", "-")
	p := filepath.Join(dir, filepath.FromSlash(memwal.WALKey("s0", 2)))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-6] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	walDir := filepath.Join(dir, filepath.FromSlash(memwal.WALDir("s0")))
	before := snapshot(t, walDir)
	all := snapshot(t, dir)
	for _, args := range [][]string{{"wal", "flush", dir, "--shard", "s0"}, {"wal", "write", dir, "--shard", "s0", "--rows", "1"}} {
		r := run(t, "", args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, "checksum mismatch") || !strings.Contains(line, "WAL position 2") {
			t.Fatalf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	if after := snapshot(t, walDir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the WAL changed:\n%v\n%v", before, after)
	}
	after := strings.Join(snapshot(t, dir), "\n")
	for _, f := range all {
		if !strings.Contains(after, f) {
			t.Fatalf("%s was changed or deleted", f)
		}
	}
}

// wal write --flush whose flush is fenced after the write landed: the
// output still reports the write, stderr says the records are written and
// only the flush failed, and the exit status is ExitWrittenNotFlushed; the
// next writer replays the records.
func TestWALWriteFlushFencedAfterWrite(t *testing.T) {
	dir := newTable(t)
	mustRun(t, "", "wal", "configure", dir, "--shards", "s0")
	walWriteBeforeFlush = func(ctx context.Context, tb *ops.Table, shard string) {
		head, err := table.ReadLatest(ctx, tb.Bucket)
		if err != nil {
			t.Error(err)
			return
		}
		w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: head.Schema}, tb.Bucket)
		if err == nil {
			_, err = w.Claim(ctx)
		}
		if err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { walWriteBeforeFlush = nil })
	r := run(t, "", "wal", "write", dir, "--shard", "s0", "--rows", "3", "--flush")
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code != ExitWrittenNotFlushed || strings.Contains(line, "\n") || !strings.Contains(line, "written at WAL position 2") || !strings.Contains(line, "the flush failed") || !strings.Contains(line, "fenced") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	if doc["wal_position"].(float64) != 2 || doc["flushed"] != false || !strings.Contains(doc["flush_error"].(string), "fenced") {
		t.Fatalf("output %v", doc)
	}
	walWriteBeforeFlush = nil
	doc = mustRun(t, "", "wal", "flush", dir, "--shard", "s0")
	if doc["sstable_rows"].(float64) != 3 {
		t.Fatalf("the next flush: %v", doc)
	}
}

// verify --deep reads the MemWAL data the base table does not hold yet:
// a damaged unflushed WAL entry, a missing middle one and a damaged
// unmerged SSTable are violations (each leaves later writes, flushes or
// merges failing).
func TestVerifyDeepReadsUnmergedMemWAL(t *testing.T) {
	flip := func(t *testing.T, p string) {
		t.Helper()
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0xff
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		expect string
	}{
		{"intact", func(t *testing.T, dir string) {}, ""},
		{"flipped byte in an unflushed WAL entry", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, filepath.FromSlash(memwal.WALKey("s0", 4))))
		}, "checksum mismatch"},
		{"missing middle WAL entry", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(memwal.WALKey("s0", 4)))); err != nil {
				t.Fatal(err)
			}
		}, "WAL entries 4..4 above the replay cursor 2 are missing"},
		{"flipped byte in an unmerged SSTable", func(t *testing.T, dir string) {
			ssts, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(memwal.SSTableDir("s0")), "*.parquet"))
			if len(ssts) != 1 {
				t.Fatalf("sstables %v", ssts)
			}
			flip(t, ssts[0])
		}, "unmerged generation 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newTable(t)
			mustRun(t, "", "wal", "configure", dir, "--shards", "s0")
			// Generation 1 (WAL 2) is flushed, not merged; WAL 3..5 (a
			// claim marker and two entries) are unflushed.
			mustRun(t, "", "wal", "write", dir, "--shard", "s0", "--rows", "20", "--flush")
			mustRun(t, "", "wal", "write", dir, "--shard", "s0", "--rows", "2", "--start", "100")
			mustRun(t, `{"id": 7, "cat": "x"}`, "wal", "write", dir, "--shard", "s0", "--jsonl", "-")
			tc.damage(t, dir)
			r := run(t, "", "verify", dir, "--deep")
			if tc.expect == "" {
				if r.code != 0 {
					t.Fatalf("intact table: exit %d: %s%s", r.code, r.stdout, r.stderr)
				}
				return
			}
			if r.code == 0 || !strings.Contains(r.stdout, tc.expect) {
				t.Fatalf("exit %d, stdout %q: want a violation mentioning %q", r.code, r.stdout, tc.expect)
			}
		})
	}
}
