package lancewal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func lanceRows(rows []Row) []lancedb.Row {
	var out []lancedb.Row
	for _, r := range rows {
		out = append(out, lancedb.BasicRow(r["id"].(int64), r["s"].(string)))
	}
	return out
}

// waitFile polls for a file the oracle program creates.
func waitFile(t *testing.T, path string, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("the LanceDB program ended before signalling %s", filepath.Base(path))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 2 minutes", path)
		}
	}
}

// TestGoClaimFencesLanceDB: LanceDB's MemWAL writer has written an entry
// and stays open; the Go writer claims the shard (replaying that entry);
// LanceDB's next write through its writer fails, and the Go writer's flush
// carries LanceDB's acknowledged rows and its own, never the refused ones.
func TestGoClaimFencesLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 0)
	ctx := t.Context()
	dir := t.TempDir()
	ready, claimed := filepath.Join(dir, "ready"), filepath.Join(dir, "claimed")
	a, b := goRows(0, 3, "ldb-a-"), goRows(600, 603, "ldb-b-")
	prog := f.Program(
		lancedb.MergeInsert("id", lanceRows(a)),
		lancedb.Signal(ready),
		lancedb.WaitFor(claimed, 2*time.Minute),
		lancedb.MergeInsert("id", lanceRows(b)).ExpectError(),
		lancedb.CloseLsmWriters().ExpectError(),
	)
	prog.ContinueOnError = true
	type out struct {
		res *lancedb.Results
		err error
	}
	done := make(chan struct{})
	var o out
	go func() {
		defer close(done)
		o.res, o.err = lancedb.Run(t, prog)
	}()
	waitFile(t, ready, done)

	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, _ := tbl.ShardFor(ctx, int64(0))
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Buffered() != len(a) {
		t.Errorf("the claim replayed %d rows of LanceDB's WAL entry, want %d", w.Buffered(), len(a))
	}
	if err := os.WriteFile(claimed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-done
	if o.err != nil {
		t.Fatalf("LanceDB program: %v", o.err)
	}
	t.Logf("LanceDB's write after the claim: %s", o.res.Err(3))
	if !strings.Contains(strings.ToLower(o.res.Err(3)+o.res.Err(4)), "fenc") {
		t.Errorf("LanceDB's error does not say it was fenced: %q / %q", o.res.Err(3), o.res.Err(4))
	}
	c := goRows(700, 702, "go-c-")
	if err := w.Upsert(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for k, v := range f.Want {
		want[k] = v
	}
	putModel(want, a)
	putModel(want, c)
	if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
		t.Fatalf("LSM view:\n%s", d)
	}
}

// TestLanceDBClaimFencesGo: the Go writer has written an entry; LanceDB's
// writer claims the shard (replaying it) and flushes; the Go writer's next
// write, flush and close fail with ErrFenced, and LanceDB's LSM view holds
// the Go writer's acknowledged rows and LanceDB's, not the refused ones.
func TestLanceDBClaimFencesGo(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 0)
	ctx := t.Context()
	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, _ := tbl.ShardFor(ctx, int64(0))
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := goRows(0, 3, "go-a-")
	if err := w.Upsert(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := goRows(800, 803, "ldb-b-")
	f.Run(t, lancedb.MergeInsert("id", lanceRows(b)), lancedb.CloseLsmWriters())

	refused := goRows(900, 902, "go-refused-")
	if err := w.Upsert(ctx, refused); !errors.Is(err, ErrFenced) {
		t.Fatalf("Upsert after LanceDB's claim: %v, want ErrFenced", err)
	}
	if _, err := w.Flush(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Flush after LanceDB's claim: %v, want ErrFenced", err)
	}
	if err := w.Delete(ctx, []any{int64(1)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("Delete after LanceDB's claim: %v, want ErrFenced", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close of a fenced writer: %v", err)
	}
	want := map[int64]string{}
	for k, v := range f.Want {
		want[k] = v
	}
	putModel(want, a)
	putModel(want, b)
	if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
		t.Fatalf("LSM view:\n%s", d)
	}
}

// TestLanceDBReplaysGoWAL: the Go writer's WAL entries that no generation
// covers (it stopped without flushing) reach LanceDB's LSM view once a
// LanceDB writer claims the shard, replays them and flushes.
func TestLanceDBReplaysGoWAL(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 1)
	ctx := t.Context()
	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, _ := tbl.ShardFor(ctx, int64(0))
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for k, v := range f.Want {
		want[k] = v
	}
	// One flushed generation, then an unflushed tail of two entries.
	g1 := goRows(0, 2, "go-g1-")
	if err := w.Upsert(ctx, g1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tail := goRows(1000, 1003, "go-tail-")
	if err := w.Upsert(ctx, tail[:2]); err != nil {
		t.Fatal(err)
	}
	if err := w.Upsert(ctx, tail[2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, []any{int64(5)}); err != nil {
		t.Fatal(err)
	}
	w.Abandon()
	putModel(want, g1)
	putModel(want, tail)
	delete(want, 5)
	b := goRows(1100, 1101, "ldb-")
	f.Run(t, lancedb.MergeInsert("id", lanceRows(b)), lancedb.CloseLsmWriters())
	putModel(want, b)
	if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
		t.Fatalf("LSM view after LanceDB replayed the Go writer's WAL tail:\n%s", d)
	}
}
