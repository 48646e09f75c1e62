package lancedb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

// WriterOpts configure a random writer (StartWriter). The table must exist
// and have an int key column and a utf8 value column.
type WriterOpts struct {
	URI            string
	StorageOptions map[string]string
	Table          string // default "t"
	// Duration is how long the writer runs unless stopped; default 2s.
	Duration time.Duration
	// KeyMin..KeyMax (inclusive) is the writer's key range; writers may
	// share or partition keys.
	KeyMin, KeyMax int64
	// Key and Value name the key and value-tag columns (default id, s);
	// other columns get values derived from the key.
	Key, Value string
	// Seed makes the choice of operations repeatable.
	Seed uint32
	// ID prefixes the value tags the writer writes ("<ID>-<seq>").
	ID string
	// Weights of append, delete, merge (plain) and lsmMerge (through the
	// MemWAL; ignored without a spec); nil is {3, 1, 2, 2}. LanceDB's own
	// maintenance can be weighed in too: optimize (Table.optimize with its
	// defaults) and createIndex (one of Indexes, replace: true); both
	// default to 0. A maintenance call refused as a retryable conflict is
	// retried up to 3 times in a row, each refusal reported as a failed
	// op.
	Weights map[string]int
	// Indexes are what createIndex chooses from.
	Indexes []IndexChoice
	// Batch is how many keys an operation touches at most (default 3).
	Batch int
	// CloseEvery closes the MemWAL writers after this many lsmMerges
	// (default 4); Stop closes them too.
	CloseEvery int
}

// IndexChoice is an index the writer's createIndex may build: Type is
// btree, bitmap or label_list; an existing Name is replaced.
type IndexChoice struct {
	Column string `json:"column"`
	Type   string `json:"type"`
	Name   string `json:"name"`
}

// WriterOp is one line the writer printed: an operation LanceDB
// acknowledged, or (Failed) one it refused or gave up on.
type WriterOp struct {
	// Op is append, delete, merge, lsmMerge, closeLsmWriters, optimize,
	// createIndex, or start, stop, fatal.
	Op   string  `json:"op"`
	Keys []int64 `json:"keys"`
	// Tag is the value written into the value column.
	Tag string `json:"tag"`
	// Version is the table version LanceDB reported (0 for lsmMerge, which
	// commits none).
	Version uint64 `json:"version"`
	Shard   string `json:"shard"`
	TS      int64  `json:"ts"` // Unix milliseconds at acknowledgement
	Failed  bool   `json:"failed"`
	Error   string `json:"error"`
	Deleted int64  `json:"deleted"`
	// createIndex: the index built.
	Name      string `json:"name"`
	Column    string `json:"column"`
	IndexType string `json:"indexType"`
	// optimize: what its compaction rewrote and its prune removed.
	FragmentsRemoved int64 `json:"fragmentsRemoved"`
	FragmentsAdded   int64 `json:"fragmentsAdded"`
	PrunedVersions   int64 `json:"prunedVersions"`
	PrunedBytes      int64 `json:"prunedBytes"`
}

// Writer is a running random writer.
type Writer struct {
	t       testing.TB
	proc    *toolproc.Proc
	stdin   io.WriteCloser
	opsFile string
	once    sync.Once
	ops     []WriterOp
	err     error
}

// StopTimeout bounds how long Stop waits for the writer to finish its
// operation and close its MemWAL writers.
const StopTimeout = 60 * time.Second

// StartWriter starts a writer process; t.Cleanup stops it. It skips the
// test if the oracle is not installed.
func StartWriter(t testing.TB, o WriterOpts) *Writer {
	t.Helper()
	in := Require(t)
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	opsFile := filepath.Join(t.TempDir(), "ops.jsonl")
	if o.Seed == 0 {
		o.Seed = uint32(time.Now().UnixNano())
	}
	cfg := map[string]any{
		"uri": o.URI, "durationMs": o.Duration.Milliseconds(),
		"keyMin": o.KeyMin, "keyMax": o.KeyMax, "seed": o.Seed, "opsFile": opsFile,
	}
	for k, v := range map[string]string{"table": o.Table, "key": o.Key, "valueColumn": o.Value, "id": o.ID} {
		if v != "" {
			cfg[k] = v
		}
	}
	if o.Batch > 0 {
		cfg["batch"] = o.Batch
	}
	if o.CloseEvery > 0 {
		cfg["closeEvery"] = o.CloseEvery
	}
	if o.StorageOptions != nil {
		cfg["storageOptions"] = o.StorageOptions
	}
	if o.Weights != nil {
		cfg["weights"] = o.Weights
	}
	if o.Indexes != nil {
		cfg["indexes"] = o.Indexes
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("encode writer config: %v", err)
	}
	cmd := exec.Command(in.Node, in.Script, "writer", string(body))
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("writer stdin: %v", err)
	}
	p, err := toolproc.Start(cmd)
	if err != nil {
		t.Fatalf("start lancedb writer: %v", err)
	}
	w := &Writer{t: t, proc: p, stdin: stdin, opsFile: opsFile}
	t.Cleanup(func() { w.Stop() })
	return w
}

// Ops returns the lines the writer has printed so far.
func (w *Writer) Ops() ([]WriterOp, error) {
	data, err := os.ReadFile(w.opsFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseOps(data)
}

func parseOps(data []byte) ([]WriterOp, error) {
	var ops []WriterOp
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// A line is written whole by one synchronous append; a torn last
		// line can only come from a killed writer.
		if !json.Valid(line) {
			break
		}
		var op WriterOp
		if err := json.Unmarshal(line, &op); err != nil {
			return ops, fmt.Errorf("writer line %q: %w", line, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// WaitOps polls until the writer has acknowledged at least n operations
// (append, delete, merge or lsmMerge) or ctx ends, or the writer exits.
func (w *Writer) WaitOps(ctx context.Context, n int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ops, err := w.Ops()
		if err != nil {
			return err
		}
		if len(Acknowledged(ops)) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("writer acknowledged %d of %d operations: %w", len(Acknowledged(ops)), n, ctx.Err())
		case <-w.proc.Exited():
			return fmt.Errorf("writer exited (%v) after %d of %d operations; output:\n%s", w.proc.Err(), len(Acknowledged(ops)), n, w.proc.Output())
		case <-tick.C:
		}
	}
}

// Done is closed when the writer has exited (its Duration passed, or Stop).
func (w *Writer) Done() <-chan struct{} { return w.proc.Exited() }

// Stop asks the writer to stop (closes its stdin; it finishes the current
// operation, closes its MemWAL writers and exits), waits for it, and
// returns every line it printed. An error means it did not exit cleanly or
// reported a fatal error.
func (w *Writer) Stop() ([]WriterOp, error) {
	w.once.Do(func() {
		_ = w.stdin.Close()
		t := time.NewTimer(StopTimeout)
		defer t.Stop()
		select {
		case <-w.proc.Exited():
		case <-t.C:
			w.proc.Stop(toolproc.StopGrace)
			w.err = fmt.Errorf("writer did not stop within %v; output:\n%s", StopTimeout, w.proc.Output())
		}
		ops, err := w.Ops()
		w.ops = ops
		if w.err == nil && err != nil {
			w.err = err
		}
		if w.err == nil && w.proc.Err() != nil {
			w.err = fmt.Errorf("writer exited: %v; output:\n%s", w.proc.Err(), tail(w.proc.Output()))
		}
		for _, op := range ops {
			if w.err == nil && op.Op == "fatal" {
				w.err = fmt.Errorf("writer: %s", op.Error)
			}
		}
		if w.err == nil && (len(ops) == 0 || ops[len(ops)-1].Op != "stop") {
			w.err = fmt.Errorf("writer ended without its stop line; output:\n%s", tail(w.proc.Output()))
		}
	})
	return w.ops, w.err
}

// Acknowledged returns the data operations LanceDB acknowledged (append,
// delete, merge, lsmMerge), in order.
func Acknowledged(ops []WriterOp) []WriterOp {
	var out []WriterOp
	for _, op := range ops {
		if op.Failed {
			continue
		}
		switch op.Op {
		case "append", "delete", "merge", "lsmMerge":
			out = append(out, op)
		}
	}
	return out
}

// Maintenance returns LanceDB's acknowledged maintenance operations
// (optimize, createIndex), in order. Acknowledged leaves them out: they
// change no row.
func Maintenance(ops []WriterOp) []WriterOp {
	var out []WriterOp
	for _, op := range ops {
		if !op.Failed && (op.Op == "optimize" || op.Op == "createIndex") {
			out = append(out, op)
		}
	}
	return out
}

// Failed returns the operations that failed.
func Failed(ops []WriterOp) []WriterOp {
	var out []WriterOp
	for _, op := range ops {
		if op.Failed {
			out = append(out, op)
		}
	}
	return out
}

// Expected replays one writer's acknowledged operations on its own keys:
// the value tag each key should hold afterwards ("" keys are absent). It
// is exact for a writer that owns its key range, on a table without MemWAL
// generations or with lsmMerge as the only update path; prior holds the
// tags before the writer started. On an LSM table a generation row wins
// over any later base change to the same key (a LanceDB 0.39 behaviour),
// so a key written by lsmMerge keeps that value through later deletes and
// plain merges: Expected models that.
func Expected(prior map[int64]string, ops []WriterOp) map[int64]string {
	want := make(map[int64]string, len(prior))
	for k, v := range prior {
		want[k] = v
	}
	lsm := map[int64]string{}
	for _, op := range Acknowledged(ops) {
		for _, k := range op.Keys {
			switch op.Op {
			case "append", "merge":
				want[k] = op.Tag
			case "delete":
				delete(want, k)
			case "lsmMerge":
				lsm[k] = op.Tag
			}
		}
	}
	for k, v := range lsm {
		want[k] = v
	}
	return want
}
