package lancedb

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Column is one column of a schema. Type is one of int32, int64, float32,
// float64, bool, utf8, binary, large_utf8, large_binary, timestamp[us],
// vector[N] (fixed_size_list<float32, N>), list<int32>, dict<V> (an
// Arrow dictionary of V values with int32 keys, V one of the types here or
// int8, int16, uint8..uint64; dict<V,K> picks the key type K, int8..int64
// or uint8..uint64, e.g. dict<utf8,int8>, dict<float64,uint16>; rows give
// the values).
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Row is one row: column name to value. Going in, values may be Go ints,
// floats, strings, bools, []byte, time.Time (timestamp[us]), []float32,
// []int32, or nil. Coming out (Results.Rows), integers and timestamps are
// json.Number, binary is base64, vectors and lists are []any; use the
// accessors.
type Row map[string]any

// Int returns an integer or timestamp column's value (0, false if null).
func (r Row) Int(col string) (int64, bool) {
	switch v := r[col].(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case float64:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// Str returns a utf8 column's value ("" if null).
func (r Row) Str(col string) string {
	s, _ := r[col].(string)
	return s
}

// Float returns a float column's value (NaN and infinities included).
func (r Row) Float(col string) (float64, bool) {
	switch v := r[col].(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil
	}
	return 0, false
}

// Bytes returns a binary column's value (nil if null).
func (r Row) Bytes(col string) []byte {
	switch v := r[col].(type) {
	case string:
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil
		}
		return b
	case []byte:
		return v
	}
	return nil
}

// Step is one step of a program: an op and its arguments, as the oracle
// script reads them. Build steps with the constructors below.
type Step map[string]any

// ExpectError marks the step as expected to fail: Run does not report its
// failure as an error (the message is in Results.Err), but does report its
// success as one.
func (s Step) ExpectError() Step { s["expectError"] = true; return s }

// On makes the step use table instead of the program's default.
func (s Step) On(table string) Step { s["table"] = table; return s }

// With sets an extra argument of the step (see node/oracle.mjs).
func (s Step) With(key string, v any) Step { s[key] = jsonValue(v); return s }

func op(name string, kv ...any) Step {
	s := Step{"op": name}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != nil {
			s[kv[i].(string)] = kv[i+1]
		}
	}
	return s
}

// Create creates the table (mode "create": it must not exist) with an
// explicit schema and its first rows.
func Create(schema []Column, rows []Row) Step {
	return op("create", "schema", schema, "rows", encodeRows(rows))
}

// CreateVersion is Create with the table's data file version ("2.0",
// "2.1", "2.2").
func CreateVersion(schema []Column, rows []Row, version string) Step {
	return op("create", "schema", schema, "rows", encodeRows(rows), "storageVersion", version)
}

// Open forgets cached table handles and reopens the table.
func Open() Step { return op("open") }

// Add appends rows (a new fragment).
func Add(rows []Row) Step { return op("add", "rows", encodeRows(rows)) }

// Delete deletes the rows matching an SQL predicate (base table only: it
// does not touch MemWAL generations).
func Delete(where string) Step { return op("delete", "where", where) }

// Update sets columns to SQL expressions on the rows matching where.
func Update(where string, values map[string]string) Step {
	return op("update", "where", where, "values", values)
}

// MergeInsert upserts rows on key column on
// (whenMatchedUpdateAll().whenNotMatchedInsertAll()). On a table with an
// LSM write spec it goes through the MemWAL, split into one call per shard
// (each shard on its own table handle, whose writer stays open until
// CloseLsmWriters); otherwise it is a plain merge-insert commit.
func MergeInsert(on string, rows []Row) Step {
	return op("mergeInsert", "on", on, "rows", encodeRows(rows))
}

// PlainMergeInsert is MergeInsert forced onto the standard path
// (useLsm(false)) even on a table with an LSM spec.
func PlainMergeInsert(on string, rows []Row) Step {
	return MergeInsert(on, rows).With("lsm", false)
}

// MergeInsertDeleteBySource is a plain merge-insert that also deletes the
// target rows not matched by the source and matching where ("" for all).
// LanceDB refuses it through the MemWAL.
func MergeInsertDeleteBySource(on string, rows []Row, where string) Step {
	return MergeInsert(on, rows).With("deleteNotMatchedBySource", where)
}

// CloseLsmWriters closes the table's MemWAL shard writers (on every handle
// the program opened for it), flushing each shard's memtable into a new
// generation. This is the only way the OSS build makes a generation.
func CloseLsmWriters() Step { return op("closeLsmWriters") }

// CreateIndex builds an index: typ is btree, bitmap or label_list, or (small,
// two partitions, for tests of row ids) ivf_flat, ivf_pq, ivf_hnsw_sq or fts.
func CreateIndex(column, typ, name string) Step {
	return op("createIndex", "column", column, "type", typ, "name", name)
}

// DropIndex drops an index by name.
func DropIndex(name string) Step { return op("dropIndex", "name", name) }

// OptimizeOpts are Optimize's options.
type OptimizeOpts struct {
	// CleanupNow prunes every version older than the call
	// (cleanupOlderThan = now); otherwise LanceDB's 7-day default.
	CleanupNow       bool
	DeleteUnverified bool
}

// Optimize runs table.optimize(): compaction, version pruning, index
// optimization.
func Optimize(o OptimizeOpts) Step {
	s := op("optimize")
	if o.CleanupNow {
		s["cleanupNow"] = true
	}
	if o.DeleteUnverified {
		s["deleteUnverified"] = true
	}
	return s
}

// TagCreate tags a version.
func TagCreate(tag string, version uint64) Step {
	return op("tagCreate", "tag", tag, "version", version)
}

// TagDelete deletes a tag.
func TagDelete(tag string) Step { return op("tagDelete", "tag", tag) }

// Tags lists the tags (Results.Tags).
func Tags() Step { return op("tags") }

// SetPrimaryKey sets the unenforced primary key (needed by an LSM spec).
func SetPrimaryKey(columns ...string) Step { return op("setPrimaryKey", "columns", columns) }

// SetLsmWriteSpec installs a MemWAL write spec. MaintainedIndexes nil
// means LanceDB's default (all indexes); use []string{} for none.
func SetLsmWriteSpec(spec LsmWriteSpec) Step { return op("setLsmWriteSpec", "spec", spec) }

// GetLsmWriteSpec reads the spec (Results.LsmWriteSpec).
func GetLsmWriteSpec() Step { return op("getLsmWriteSpec") }

// LsmOp calls flushLsm, compactLsm or checkpointLsm (all refused by the
// OSS build: "not supported on this table type").
func LsmOp(name string) Step { return op(name) }

// Checkout puts the table handle into time-travel mode at version.
func Checkout(version uint64) Step { return op("checkout", "version", version) }

// CheckoutTag checks out a tagged version.
func CheckoutTag(tag string) Step { return op("checkout", "tag", tag) }

// CheckoutLatest leaves time-travel mode.
func CheckoutLatest() Step { return op("checkoutLatest") }

// ReadOpts select what ReadRows reads.
type ReadOpts struct {
	// Version reads that version (a separate handle); 0 the latest.
	Version uint64
	// LSM: nil is LanceDB's default (the LSM view when the table has a
	// spec), true forces it, false reads the base table only.
	LSM *bool
	// Where filters with an SQL predicate; Columns projects.
	Where   string
	Columns []string
	// SortBy sorts the rows (default: by id if there is such a column).
	SortBy []string
	// WithRowID adds _rowid (the row address: fragment<<32 | offset).
	WithRowID bool
}

// Bool returns a pointer to b (for ReadOpts.LSM).
func Bool(b bool) *bool { return &b }

// ReadRows reads rows (Results.Rows).
func ReadRows(o ReadOpts) Step {
	s := op("rows")
	if o.Version != 0 {
		s["version"] = o.Version
	}
	if o.LSM != nil {
		s["lsm"] = *o.LSM
	}
	if o.Where != "" {
		s["where"] = o.Where
	}
	if o.Columns != nil {
		s["columns"] = o.Columns
	}
	if o.SortBy != nil {
		s["sortBy"] = o.SortBy
	}
	if o.WithRowID {
		s["withRowId"] = true
	}
	return s
}

// CountRows counts the rows (base table only, even with a spec) matching
// where ("" for all).
func CountRows(where string) Step {
	s := op("countRows")
	if where != "" {
		s["where"] = where
	}
	return s
}

// Explain is LanceDB's (verbose) plan of a query filtered by where
// (Results.Plan): it names the scalar index a filter uses.
func Explain(where string) Step { return op("explain", "where", where) }

// CurrentVersion reads the table's version (Results.Version).
func CurrentVersion() Step { return op("version") }

// ListVersions lists the versions (Results.Versions).
func ListVersions() Step { return op("listVersions") }

// ListIndices lists the indexes (Results.Indices).
func ListIndices() Step { return op("listIndices") }

// IndexStats reads an index's statistics (Results.IndexStats).
func IndexStats(name string) Step { return op("indexStats", "name", name) }

// Schema reads the table's schema.
func Schema() Step { return op("schema") }

// encodeRows turns rows into JSON-safe values.
func encodeRows(rows []Row) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		m := make(map[string]any, len(r))
		for k, v := range r {
			m[k] = jsonValue(v)
		}
		out[i] = m
	}
	return out
}

// jsonValue maps a Go value to one JSON carries exactly: 64-bit integers as
// decimal strings, times as Unix microseconds (strings), non-finite floats
// as "NaN"/"Infinity"/"-Infinity". []byte stays (encoding/json writes it as
// base64).
func jsonValue(v any) any {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case int:
		return strconv.Itoa(x)
	case json.Number:
		return string(x)
	case time.Time:
		return strconv.FormatInt(x.UnixMicro(), 10)
	case float64:
		return floatValue(x)
	case float32:
		return floatValue(float64(x))
	case []float32:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = floatValue(float64(f))
		}
		return out
	case []float64:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = floatValue(f)
		}
		return out
	case []int64:
		out := make([]any, len(x))
		for i, n := range x {
			out[i] = strconv.FormatInt(n, 10)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

func floatValue(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// BasicSchema is the fixtures' schema: id int64 (not null, the key), s utf8
// (a value tag), cat int32 (low cardinality, for bitmap indexes), f float64.
var BasicSchema = []Column{
	{Name: "id", Type: "int64"},
	{Name: "s", Type: "utf8", Nullable: true},
	{Name: "cat", Type: "int32", Nullable: true},
	{Name: "f", Type: "float64", Nullable: true},
}

// BasicRow is the fixtures' row for key id with value tag s.
func BasicRow(id int64, s string) Row {
	return Row{"id": id, "s": s, "cat": int32(id % 4), "f": float64(id) / 2}
}

// BasicRows returns rows lo..hi-1 tagged "v".
func BasicRows(lo, hi int64) []Row { return TaggedRows(lo, hi, "v") }

// TaggedRows returns rows lo..hi-1 with s = tag+id.
func TaggedRows(lo, hi int64, tag string) []Row {
	rows := make([]Row, 0, hi-lo)
	for id := lo; id < hi; id++ {
		rows = append(rows, BasicRow(id, fmt.Sprintf("%s%d", tag, id)))
	}
	return rows
}

// OpNames lists the ops of steps (for logs and READMEs).
func OpNames(s []Step) []string {
	var out []string
	for _, st := range s {
		out = append(out, st["op"].(string))
	}
	return out
}

// Signal creates the file at path (a Go test waits for it to do its part
// between two steps of a running program).
func Signal(path string) Step { return op("signal", "path", path) }

// WaitFor waits (up to timeout) until the file at path exists: the Go test
// signals that its part is done.
func WaitFor(path string, timeout time.Duration) Step {
	return op("waitFor", "path", path, "timeoutMs", timeout.Milliseconds())
}
