// Package lancedb runs real LanceDB (0.39.0, from npm) as the test oracle
// for compactord's Lance code. LanceDB is never part of the product: tests
// use it to build tables compactord must read, and to read back what
// compactord wrote.
//
// The oracle is a Node script (node/oracle.mjs) that interprets a JSON
// program of steps (create, add, delete, mergeInsert through the MemWAL,
// createIndex, tags, optimize, read-backs, ...) and answers one JSON result
// per step. LanceDB is installed project-locally by `make tools` (the
// lancedb rule) into tools/lancedb, or found in $COMPACTORD_TOOLS/lancedb.
// Without node or the install, Require skips the test, except under CI=true,
// where it fails.
//
//	lancedb.Require(t)
//	dir := t.TempDir()
//	res, err := lancedb.Run(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
//		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
//		lancedb.Delete("id < 3"),
//		lancedb.ReadRows(lancedb.ReadOpts{}),
//	}})
//	rows, _ := res.Rows(2)
//
// Values cross JSON losslessly: Go int64/uint64 go as decimal strings,
// time.Time as microseconds, []byte as base64, NaN and infinities as
// strings; read-backs give int64 and timestamps as json.Number (see Row).
package lancedb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

// Version is the LanceDB version the harness pins (node/package.json).
const Version = "0.39.0"

// RunTimeout bounds one Run.
const RunTimeout = 5 * time.Minute

// ErrNotInstalled is returned (wrapped) by Find when node or the LanceDB
// install is missing.
var ErrNotInstalled = errors.New("lancedb oracle not installed")

// Install is what Find located.
type Install struct {
	Node        string // the node executable
	NodeModules string // tools/lancedb/node_modules
	Script      string // node/oracle.mjs
}

// Find locates node (on PATH), the LanceDB install ($COMPACTORD_TOOLS/lancedb,
// then <module root>/tools/lancedb) and the oracle script.
func Find() (Install, error) {
	var in Install
	node, err := exec.LookPath("node")
	if err != nil {
		return in, fmt.Errorf("%w: node is not on PATH", ErrNotInstalled)
	}
	in.Node = node
	var dirs []string
	if d := os.Getenv("COMPACTORD_TOOLS"); d != "" {
		dirs = append(dirs, filepath.Join(d, "lancedb"))
	}
	root, rootErr := toolproc.ModuleRoot()
	if rootErr == nil {
		dirs = append(dirs, filepath.Join(root, "tools", "lancedb"))
	}
	var tried []string
	for _, d := range dirs {
		nm := filepath.Join(d, "node_modules")
		if fileExists(filepath.Join(nm, "@lancedb", "lancedb", "package.json")) &&
			fileExists(filepath.Join(nm, "@lancedb", "lancedb-linux-x64-gnu", "package.json")) &&
			fileExists(filepath.Join(nm, "apache-arrow", "package.json")) {
			in.NodeModules = nm
			break
		}
		tried = append(tried, nm)
	}
	if in.NodeModules == "" {
		return in, fmt.Errorf("%w (looked at %s); install it from the module root with: make lancedb",
			ErrNotInstalled, strings.Join(tried, ", "))
	}
	in.Script = scriptPath("oracle.mjs")
	if !fileExists(in.Script) {
		return in, fmt.Errorf("%w: %s missing", ErrNotInstalled, in.Script)
	}
	return in, nil
}

// scriptPath is the path of a file in node/, next to this source file, or
// below the module root if the source path is unknown (-trimpath).
func scriptPath(name string) string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if p := filepath.Join(filepath.Dir(file), "node", name); fileExists(p) {
			return p
		}
	}
	root, _ := toolproc.ModuleRoot()
	return filepath.Join(root, "internal", "testing", "lancedb", "node", name)
}

// packageDir is this package's source directory (for testdata).
func packageDir() string {
	return filepath.Dir(filepath.Dir(scriptPath("oracle.mjs")))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Require returns the install, or skips the test when it is missing (fails
// under CI=true).
func Require(t testing.TB) Install {
	t.Helper()
	in, err := Find()
	if err != nil {
		toolproc.SkipOrFail(t, fmt.Sprintf("lancedb oracle tests need node and LanceDB %s: %v", Version, err),
			fmt.Sprintf("skipping lancedb oracle test: %v", err))
	}
	return in
}

// Program is a list of steps run against one LanceDB connection.
type Program struct {
	// URI is the database: a local directory (tables are URI/<name>.lance)
	// or s3://bucket/prefix with StorageOptions.
	URI            string            `json:"uri"`
	StorageOptions map[string]string `json:"storageOptions,omitempty"`
	// Table is the table steps use unless they name one (Step.On);
	// default "t".
	Table string `json:"table,omitempty"`
	// ContinueOnError runs the remaining steps after a failed one;
	// otherwise they are reported Skipped.
	ContinueOnError bool `json:"continueOnError,omitempty"`
	// StaleHandles connects with LanceDB's default consistency (no
	// readConsistencyInterval): a table handle keeps the version it last
	// saw, so a later write of the program reads that version. Otherwise
	// every call sees the latest version.
	StaleHandles bool   `json:"staleHandles,omitempty"`
	Steps        []Step `json:"steps"`
}

// StepResult is the oracle's answer to one step.
type StepResult struct {
	Step   int             `json:"step"`
	Op     string          `json:"op"`
	Result json.RawMessage `json:"result,omitempty"`
	// Error is LanceDB's message when the step failed ("" if it succeeded).
	Error   string `json:"error,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
	// UnexpectedSuccess: the step was marked ExpectError but succeeded.
	UnexpectedSuccess bool `json:"unexpectedSuccess,omitempty"`
	Millis            int  `json:"ms,omitempty"`
}

// Results are the answers to a program, one per step, in order.
type Results struct {
	Steps  []StepResult `json:"results"`
	Millis int          `json:"ms"`
	Fatal  string       `json:"fatal,omitempty"`
	// Wall is the whole run, node's start included.
	Wall time.Duration `json:"-"`
}

// StepError is Run's error when a step failed that was not expected to (or
// an ExpectError step succeeded).
type StepError struct {
	Step    int
	Op      string
	Message string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("lancedb step %d (%s): %s", e.Step, e.Op, e.Message)
}

// Run runs program with LanceDB and returns its results. The error is a
// *StepError for the first step that failed unexpectedly (the results are
// returned too: earlier steps' answers and the failure's message), or a
// harness error (node did not start, crashed, or printed no result). It
// skips the test if the oracle is not installed (Require).
func Run(t testing.TB, program Program) (*Results, error) {
	t.Helper()
	in := Require(t)
	ctx := context.Background()
	if c, ok := t.(interface{ Context() context.Context }); ok {
		ctx = c.Context()
	}
	return in.Run(ctx, program)
}

// MustRun is Run that fails the test on any error.
func MustRun(t testing.TB, program Program) *Results {
	t.Helper()
	res, err := Run(t, program)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return res
}

// Run runs program with this install (see the package function Run).
func (in Install) Run(ctx context.Context, program Program) (*Results, error) {
	for i, s := range program.Steps {
		if s == nil || s["op"] == nil {
			return nil, fmt.Errorf("step %d has no op", i)
		}
	}
	body, err := json.Marshal(program)
	if err != nil {
		return nil, fmt.Errorf("encode program: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, in.Node, in.Script, "run")
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	var res Results
	dec := json.NewDecoder(&stdout)
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("lancedb oracle gave no result (%v, decode: %v); stderr:\n%s", runErr, err, tail(stderr.String()))
	}
	res.Wall = wall
	if res.Fatal != "" {
		return &res, fmt.Errorf("lancedb oracle: %s; stderr:\n%s", res.Fatal, tail(stderr.String()))
	}
	if runErr != nil {
		return &res, fmt.Errorf("lancedb oracle: %v; stderr:\n%s", runErr, tail(stderr.String()))
	}
	if len(res.Steps) != len(program.Steps) {
		return &res, fmt.Errorf("lancedb oracle answered %d of %d steps", len(res.Steps), len(program.Steps))
	}
	for i, r := range res.Steps {
		expect, _ := program.Steps[i]["expectError"].(bool)
		switch {
		case r.UnexpectedSuccess:
			return &res, &StepError{Step: i, Op: r.Op, Message: "succeeded, but an error was expected"}
		case r.Error != "" && !expect:
			return &res, &StepError{Step: i, Op: r.Op, Message: r.Error}
		}
	}
	return &res, nil
}

func tail(s string) string {
	const max = 8 << 10
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}

// step returns result i, or an error if there is none or it failed.
func (r *Results) step(i int) (StepResult, error) {
	if i < 0 || i >= len(r.Steps) {
		return StepResult{}, fmt.Errorf("no step %d (%d steps)", i, len(r.Steps))
	}
	s := r.Steps[i]
	switch {
	case s.Skipped:
		return s, fmt.Errorf("step %d (%s) was skipped", i, s.Op)
	case s.Error != "":
		return s, &StepError{Step: i, Op: s.Op, Message: s.Error}
	}
	return s, nil
}

// Err returns the error message step i failed with ("" if it did not).
func (r *Results) Err(i int) string {
	if i < 0 || i >= len(r.Steps) {
		return ""
	}
	return r.Steps[i].Error
}

// Decode decodes the result of step i into v, numbers as json.Number when
// v holds interfaces.
func (r *Results) Decode(i int, v any) error {
	s, err := r.step(i)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(s.Result))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("step %d (%s): decode %s: %w", i, s.Op, s.Result, err)
	}
	return nil
}

// Rows returns the rows a ReadRows step read.
func (r *Results) Rows(i int) ([]Row, error) {
	var out RowsResult
	err := r.Decode(i, &out)
	return out.Rows, err
}

// RowsResult is a ReadRows step's answer.
type RowsResult struct {
	Rows   []Row    `json:"rows"`
	Schema []Column `json:"schema"`
}

// Version returns the table version a step reported (create, add, delete,
// update, createIndex, optimize, setLsmWriteSpec, checkout, Version...).
// MemWAL merges report 0: they commit no table version.
func (r *Results) Version(i int) (uint64, error) {
	var out struct {
		Version uint64 `json:"version"`
	}
	err := r.Decode(i, &out)
	return out.Version, err
}

// Count returns a CountRows step's answer.
func (r *Results) Count(i int) (int64, error) {
	var out struct {
		Count int64 `json:"count"`
	}
	err := r.Decode(i, &out)
	return out.Count, err
}

// Plan returns an Explain step's plan.
func (r *Results) Plan(i int) (string, error) {
	var out struct {
		Plan string `json:"plan"`
	}
	err := r.Decode(i, &out)
	return out.Plan, err
}

// VersionInfo is one entry of ListVersions.
type VersionInfo struct {
	Version   uint64            `json:"version"`
	Timestamp int64             `json:"timestamp"` // Unix milliseconds
	Metadata  map[string]string `json:"metadata"`
}

// Versions returns a ListVersions step's answer.
func (r *Results) Versions(i int) ([]VersionInfo, error) {
	var out struct {
		Versions []VersionInfo `json:"versions"`
	}
	err := r.Decode(i, &out)
	return out.Versions, err
}

// IndexInfo is one entry of ListIndices.
type IndexInfo struct {
	Name             string   `json:"name"`
	IndexType        string   `json:"indexType"` // BTree, Bitmap, ...
	Columns          []string `json:"columns"`
	IndexUUID        string   `json:"indexUuid"`
	TypeURL          string   `json:"typeUrl"`
	NumIndexedRows   int64    `json:"numIndexedRows"`
	NumUnindexedRows int64    `json:"numUnindexedRows"`
	NumSegments      int64    `json:"numSegments"`
}

// Indices returns a ListIndices step's answer.
func (r *Results) Indices(i int) ([]IndexInfo, error) {
	var out struct {
		Indices []IndexInfo `json:"indices"`
	}
	err := r.Decode(i, &out)
	return out.Indices, err
}

// IndexStatistics is an IndexStats step's answer.
type IndexStatistics struct {
	NumIndexedRows   int64  `json:"numIndexedRows"`
	NumUnindexedRows int64  `json:"numUnindexedRows"`
	IndexType        string `json:"indexType"` // BTREE, BITMAP, ...
	NumIndices       int64  `json:"numIndices"`
}

// IndexStats returns an IndexStats step's answer; nil if LanceDB knows no
// index of that name.
func (r *Results) IndexStats(i int) (*IndexStatistics, error) {
	var out struct {
		Stats *IndexStatistics `json:"stats"`
	}
	err := r.Decode(i, &out)
	return out.Stats, err
}

// TagInfo is one tag of a Tags step.
type TagInfo struct {
	Version      uint64 `json:"version"`
	ManifestSize int64  `json:"manifestSize"`
}

// Tags returns a Tags step's answer.
func (r *Results) Tags(i int) (map[string]TagInfo, error) {
	var out struct {
		Tags map[string]TagInfo `json:"tags"`
	}
	err := r.Decode(i, &out)
	return out.Tags, err
}

// LsmWriteSpec is LanceDB's MemWAL write spec.
type LsmWriteSpec struct {
	SpecType             string            `json:"specType"` // bucket, identity, unsharded
	Column               string            `json:"column,omitempty"`
	NumBuckets           int               `json:"numBuckets,omitempty"`
	MaintainedIndexes    []string          `json:"maintainedIndexes"`
	WriterConfigDefaults map[string]string `json:"writerConfigDefaults,omitempty"`
}

// LsmWriteSpec returns a GetLsmWriteSpec step's answer; nil if the table
// has none.
func (r *Results) LsmWriteSpec(i int) (*LsmWriteSpec, error) {
	var out struct {
		Spec *LsmWriteSpec `json:"spec"`
	}
	err := r.Decode(i, &out)
	return out.Spec, err
}

// MergeResult is a MergeInsert step's answer. Through the MemWAL the
// counts are 0 and Version is 0 (nothing is committed to the table);
// Calls and Shards say how the rows were split, one call per shard.
type MergeResult struct {
	Version         uint64   `json:"version"`
	NumInsertedRows int64    `json:"numInsertedRows"`
	NumUpdatedRows  int64    `json:"numUpdatedRows"`
	NumDeletedRows  int64    `json:"numDeletedRows"`
	NumAttempts     int64    `json:"numAttempts"`
	NumRows         int64    `json:"numRows"`
	Calls           int      `json:"calls"`
	Shards          []string `json:"shards"`
}

// Merge returns a MergeInsert step's answer.
func (r *Results) Merge(i int) (MergeResult, error) {
	var out MergeResult
	err := r.Decode(i, &out)
	return out, err
}

// RunJSON runs a benchmark's own Node script (script: its path, e.g.
// testdata/bench_x.mjs) with args, LanceDB found as the oracle finds it
// and its logs quiet, and decodes the one JSON line it prints into v.
func (in Install) RunJSON(t testing.TB, script string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(in.Node, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	name := filepath.Base(script)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s %s: %q: %v", name, strings.Join(args, " "), out, err)
	}
}
