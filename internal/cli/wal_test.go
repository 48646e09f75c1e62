package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/compactord/compactord/lancewal"
)

// The Lance CLI end to end, as the README's tour runs it: create, append
// generated rows, an index, a two-bucket MemWAL written through the Go
// writer (wal write, flushed; a second write left in the WAL and flushed by
// wal flush, which replays it), merge, catch-up, verify --deep, and a scan
// that sees every key once with the newest values.
func TestWALCommandsOnLance(t *testing.T) {
	dir := newTable(t)
	if doc := mustRun(t, "", "table", "append", dir, "--rows", "100"); doc["rows"] != float64(100) || doc["operation"] != "append" {
		t.Fatalf("append --rows: %v", doc)
	}
	mustRun(t, "", "index", "create", dir, "--name", "id_idx", "--column", "id", "--type", "btree")
	cfg := mustRun(t, "", "wal", "configure", dir, "--buckets", "2", "--maintain", "id_idx")
	shards, _ := cfg["shards"].([]any)
	if len(shards) != 2 || cfg["sharding"] != "bucket" {
		t.Fatalf("wal configure: %v", cfg)
	}
	w := mustRun(t, "", "wal", "write", dir, "--rows", "50", "--start", "90", "--flush")
	if w["rows"] != float64(50) {
		t.Fatalf("wal write: %v", w)
	}
	// Unflushed: durable in the WAL, flushed by the shard's next owner.
	mustRun(t, `{"id": 500, "cat": "late", "val": 1}`+"\n", "wal", "write", dir, "--jsonl", "-")
	for _, s := range shards {
		mustRun(t, "", "wal", "flush", dir, "--shard", s.(string))
	}
	r := run(t, "", "merge", dir)
	if r.code != 0 {
		t.Fatalf("merge: %s", r.stderr)
	}
	merged := 0
	for _, l := range jsonLines(t, r.stdout) {
		if g, ok := l["generations"].([]any); ok {
			merged += len(g)
		}
	}
	if merged < 3 {
		t.Fatalf("merged %d generations, want at least 3:\n%s", merged, r.stdout)
	}
	mustRun(t, "", "index", "catchup", dir)
	if r := run(t, "", "verify", dir, "--deep"); r.code != 0 {
		t.Fatalf("verify --deep: %s%s", r.stdout, r.stderr)
	}
	rows := jsonLines(t, run(t, "", "table", "scan", dir).stdout)
	seen := map[float64]int{}
	for _, row := range rows {
		seen[row["id"].(float64)]++
	}
	if len(rows) != 141 || len(seen) != 141 || seen[500] != 1 {
		t.Fatalf("scan: %d rows, %d keys (want 141: 0..139 and 500)", len(rows), len(seen))
	}
}

// Bad input to the wal commands: one line, a non-zero exit.
func TestWALBadInputOnLance(t *testing.T) {
	dir := newTable(t)
	for _, c := range []struct {
		args   []string
		stdin  string
		expect string
	}{
		{[]string{"wal", "write", dir, "--rows", "3"}, "", "no MemWAL configuration"},
		{[]string{"wal", "configure", dir, "--buckets", "-1"}, "", "must not be negative"},
		{[]string{"wal", "flush", dir, "--shard", "nope"}, "", "no MemWAL configuration"},
	} {
		r := run(t, c.stdin, c.args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, c.expect) {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", c.args, r.code, r.stderr, c.expect)
		}
	}
	mustRun(t, "", "wal", "configure", dir)
	for _, c := range []struct {
		args   []string
		stdin  string
		expect string
	}{
		{[]string{"wal", "flush", dir, "--shard", "nope"}, "", "is not a shard"},
		{[]string{"wal", "write", dir, "--jsonl", "-"}, `{"cat": "no key"}`, "no primary key"},
		{[]string{"wal", "write", dir, "--jsonl", "-"}, `{"id": 1, "_op": "merge"}`, "want upsert or delete"},
		{[]string{"wal", "write", dir, "--rows", "9223372036854775807"}, "", "--rows 9223372036854775807 is more than"},
		{[]string{"wal", "write", dir, "--rows", "10", "--start", "9223372036854775800"}, "", "past the largest key"},
	} {
		r := run(t, c.stdin, c.args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, c.expect) {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", c.args, r.code, r.stderr, c.expect)
		}
	}
}

// wal write --flush whose flush is fenced after the write landed: the
// output still reports the write with the flush error, stderr says in one
// line that the entries are written and only the flush failed, the exit
// status is ExitWrittenNotFlushed, and the shard's next owner replays the
// entries.
func TestWALWriteFlushFencedAfterWrite(t *testing.T) {
	dir := newTable(t)
	cfg := mustRun(t, "", "wal", "configure", dir, "--buckets", "1")
	shard := cfg["shards"].([]any)[0].(string)
	walWriteBeforeFlush = func(ctx context.Context, tb *lancewal.Table, s string) {
		// A newer owner claims the shard: the writer's flush is fenced.
		w, err := tb.OpenWriter(ctx, s, lancewal.WriterOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		w.Abandon()
	}
	t.Cleanup(func() { walWriteBeforeFlush = nil })
	r := run(t, "", "wal", "write", dir, "--rows", "3", "--flush")
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code != ExitWrittenNotFlushed || strings.Contains(line, "\n") || !strings.Contains(line, "3 upserts and 0 deletes are written to its WAL") ||
		!strings.Contains(line, "the flush failed") || !strings.Contains(strings.ToLower(line), "fenced") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	sh := doc["shards"].([]any)[0].(map[string]any)
	if sh["upserts"] != float64(3) || sh["flushed"] != false || !strings.Contains(strings.ToLower(sh["flush_error"].(string)), "fenced") {
		t.Fatalf("output %v", doc)
	}
	walWriteBeforeFlush = nil
	if fl := mustRun(t, "", "wal", "flush", dir, "--shard", shard); fl["rows"] != float64(3) || fl["flushed"] != true {
		t.Fatalf("the next owner's flush: %v", fl)
	}
}

// A MemWAL configuration that exists is kept: a configure cannot drop a
// shard a writer may be writing to (its acknowledged entries would never
// be merged), so there is no drop to race.
func TestWALConfigureKeepsLiveShards(t *testing.T) {
	dir := newTable(t)
	first := mustRun(t, "", "wal", "configure", dir, "--buckets", "2")
	again := mustRun(t, "", "wal", "configure", dir, "--buckets", "1")
	a, b := first["shards"].([]any), again["shards"].([]any)
	if len(a) != 2 || len(b) != 2 || a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("first %v, second %v: the live shards changed", first, again)
	}
	mustRun(t, "", "wal", "write", dir, "--rows", "20", "--flush")
	r := run(t, "", "merge", dir)
	if r.code != 0 {
		t.Fatalf("merge: %s", r.stderr)
	}
	if n := len(jsonLines(t, run(t, "", "table", "scan", dir).stdout)); n != 20 {
		t.Fatalf("scan: %d rows after merging both shards, want 20", n)
	}
}
