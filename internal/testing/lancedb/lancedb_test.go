package lancedb

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAllTypesRoundTrip writes every supported column type, including the
// values JSON cannot hold natively, and reads them back exactly.
func TestAllTypesRoundTrip(t *testing.T) {
	schema := []Column{
		{Name: "id", Type: "int64"},
		{Name: "i", Type: "int32", Nullable: true},
		{Name: "s", Type: "utf8", Nullable: true},
		{Name: "f", Type: "float64", Nullable: true},
		{Name: "b", Type: "bool", Nullable: true},
		{Name: "ts", Type: "timestamp[us]", Nullable: true},
		{Name: "bin", Type: "binary", Nullable: true},
		{Name: "v", Type: "vector[3]", Nullable: true},
		{Name: "l", Type: "list<int32>", Nullable: true},
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	rows := []Row{
		{"id": int64(math.MaxInt64), "i": int32(-5), "s": "héllo", "f": 0.1, "b": true, "ts": ts,
			"bin": []byte{0, 1, 2, 255}, "v": []float32{1.5, 2.25, -3}, "l": []int32{1, 2, 3}},
		{"id": int64(9007199254740993), "i": nil, "s": nil, "f": math.NaN(), "b": false, "l": []int32{}},
		{"id": int64(math.MinInt64), "f": math.Inf(-1)},
	}
	res := MustRun(t, Program{URI: t.TempDir(), Steps: []Step{Create(schema, rows), ReadRows(ReadOpts{}), Schema()}})
	var got RowsResult
	if err := res.Decode(1, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 3 {
		t.Fatalf("read %d rows, want 3", len(got.Rows))
	}
	// Sorted by id: MinInt64, 2^53+1, MaxInt64.
	wantIDs := []int64{math.MinInt64, 9007199254740993, math.MaxInt64}
	for i, r := range got.Rows {
		if id, ok := r.Int("id"); !ok || id != wantIDs[i] {
			t.Errorf("row %d id = %v, want %d", i, r["id"], wantIDs[i])
		}
	}
	full := got.Rows[2]
	if v, _ := full.Int("i"); v != -5 {
		t.Errorf("i = %v", full["i"])
	}
	if full.Str("s") != "héllo" {
		t.Errorf("s = %q", full.Str("s"))
	}
	if f, _ := full.Float("f"); f != 0.1 {
		t.Errorf("f = %v", full["f"])
	}
	if full["b"] != true {
		t.Errorf("b = %v", full["b"])
	}
	if us, _ := full.Int("ts"); us != ts.UnixMicro() {
		t.Errorf("ts = %v, want %d", full["ts"], ts.UnixMicro())
	}
	if b := full.Bytes("bin"); string(b) != "\x00\x01\x02\xff" {
		t.Errorf("bin = %q", b)
	}
	if v, _ := json.Marshal(full["v"]); string(v) != "[1.5,2.25,-3]" {
		t.Errorf("v = %s", v)
	}
	if v, _ := json.Marshal(full["l"]); string(v) != "[1,2,3]" {
		t.Errorf("l = %s", v)
	}
	mid := got.Rows[1]
	if f, ok := mid.Float("f"); !ok || !math.IsNaN(f) {
		t.Errorf("f = %v, want NaN", mid["f"])
	}
	if mid["i"] != nil || mid["s"] != nil || mid["ts"] != nil || mid["v"] != nil {
		t.Errorf("nulls came back as %v", mid)
	}
	if v, _ := json.Marshal(mid["l"]); string(v) != "[]" {
		t.Errorf("empty list = %s", v)
	}
	if f, _ := got.Rows[0].Float("f"); !math.IsInf(f, -1) {
		t.Errorf("f = %v, want -Inf", got.Rows[0]["f"])
	}
	var sch struct{ Schema []Column }
	if err := res.Decode(2, &sch); err != nil {
		t.Fatal(err)
	}
	for i, c := range sch.Schema {
		if c != schema[i] {
			t.Errorf("schema column %d = %+v, want %+v", i, c, schema[i])
		}
	}
	t.Logf("node wall %v, program %d ms", res.Wall, res.Millis)
}

// TestStepErrors: a failing step is reported with its index and message,
// later steps are skipped, and ExpectError inverts the check.
func TestStepErrors(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(t, Program{URI: dir, Steps: []Step{
		Create(BasicSchema, BasicRows(0, 3)),
		LsmOp("flushLsm").ExpectError(),
		Delete("no_such_column = 1"),
		CurrentVersion(),
	}})
	se, ok := err.(*StepError)
	if !ok || se.Step != 2 || se.Op != "delete" || !strings.Contains(se.Message, "no_such_column") {
		t.Fatalf("err = %v, want a StepError for step 2 naming the column", err)
	}
	if !strings.Contains(res.Err(1), "not supported") {
		t.Errorf("flushLsm error = %q", res.Err(1))
	}
	if !res.Steps[3].Skipped {
		t.Errorf("step after the failure not skipped: %+v", res.Steps[3])
	}
	_, err = Run(t, Program{URI: dir, Steps: []Step{CurrentVersion().ExpectError()}})
	if se, ok := err.(*StepError); !ok || se.Step != 0 {
		t.Errorf("an expected error that did not happen gave %v", err)
	}
}

func readByID(t *testing.T, f *Fixture, o ReadOpts) map[int64]string {
	t.Helper()
	res := f.Run(t, ReadRows(o))
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPlainAndVersions(t *testing.T) {
	f := Plain(t, "")
	if d := DiffByID(readByID(t, f, ReadOpts{}), f.Want); d != "" {
		t.Errorf("latest rows differ:\n%s", d)
	}
	if f.Version != 3 {
		t.Errorf("version %d, want 3", f.Version)
	}
	res := f.Run(t, ListVersions(), ReadRows(ReadOpts{Version: 1}), ReadRows(ReadOpts{Version: 2}), CountRows(""), CountRows("id < 5"))
	vs, err := res.Versions(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Fatalf("%d versions, want 3", len(vs))
	}
	for i, v := range vs {
		if v.Version != uint64(i+1) || v.Timestamp <= 0 {
			t.Errorf("version entry %d = %+v", i, v)
		}
		if i > 0 && v.Timestamp < vs[i-1].Timestamp {
			t.Errorf("version %d is older than %d", v.Version, vs[i-1].Version)
		}
	}
	for step, n := range map[int]int{1: 10, 2: 20} {
		rows, err := res.Rows(step)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := RowsByID(rows)
		want := map[int64]string{}
		for id := range int64(n) {
			want[id] = f.Want[id]
		}
		if d := DiffByID(got, want); d != "" {
			t.Errorf("version %d rows differ:\n%s", step, d)
		}
	}
	if n, _ := res.Count(3); n != 30 {
		t.Errorf("countRows = %d, want 30", n)
	}
	if n, _ := res.Count(4); n != 5 {
		t.Errorf("countRows(id < 5) = %d, want 5", n)
	}
}

func TestDeletesFixture(t *testing.T) {
	f := Deletes(t, "")
	if d := DiffByID(readByID(t, f, ReadOpts{}), f.Want); d != "" {
		t.Errorf("rows differ:\n%s", d)
	}
	if f.Version != 5 {
		t.Errorf("version %d, want 5", f.Version)
	}
	dels, err := filepath.Glob(filepath.Join(f.Dir, "_deletions", "*"))
	if err != nil || len(dels) == 0 {
		t.Errorf("no deletion files in %s (%v)", f.Dir, err)
	}
	for _, p := range dels {
		if !strings.HasSuffix(p, ".arrow") {
			t.Errorf("deletion file %s: want .arrow below 5000 deleted rows", filepath.Base(p))
		}
	}
}

func TestIndexedFixture(t *testing.T) {
	f := Indexed(t, "")
	res := f.Run(t, ListIndices(), IndexStats("id_idx"), IndexStats("cat_idx"), IndexStats("nope"),
		DropIndex("cat_idx"), ListIndices())
	ix, err := res.Indices(0)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, i := range ix {
		types[i.Name] = i.IndexType
		if i.NumIndexedRows != 30 || i.NumUnindexedRows != 5 {
			t.Errorf("index %s covers %d rows, %d not, want 30 and 5", i.Name, i.NumIndexedRows, i.NumUnindexedRows)
		}
	}
	if !maps.Equal(types, map[string]string{"id_idx": "BTree", "cat_idx": "Bitmap"}) {
		t.Errorf("indexes %v", types)
	}
	for _, step := range []int{1, 2} {
		st, err := res.IndexStats(step)
		if err != nil || st == nil || st.NumIndexedRows != 30 || st.NumUnindexedRows != 5 {
			t.Errorf("stats (step %d) = %+v, %v", step, st, err)
		}
	}
	if st, err := res.IndexStats(3); err != nil || st != nil {
		t.Errorf("stats of a missing index = %+v, %v", st, err)
	}
	if ix, _ := res.Indices(5); len(ix) != 1 || ix[0].Name != "id_idx" {
		t.Errorf("after drop: %+v", ix)
	}
}

func TestTaggedFixture(t *testing.T) {
	f := Tagged(t, "")
	res := f.Run(t, Tags(), ReadRows(ReadOpts{Version: 1}))
	tags, err := res.Tags(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 || tags["v1"].Version != 1 || tags["v2"].Version != 2 {
		t.Errorf("tags = %+v", tags)
	}
	for _, name := range []string{"v1", "v2"} {
		if _, err := os.Stat(filepath.Join(f.Dir, "_refs", "tags", name+".json")); err != nil {
			t.Errorf("tag file: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "_refs", "tags", "gone.json")); !os.IsNotExist(err) {
		t.Errorf("deleted tag's file: %v", err)
	}
}

func TestMemWALFixture(t *testing.T) {
	for _, shards := range []int{1, 4} {
		f := MemWAL(t, "", shards, 3)
		if f.Version != 4 {
			t.Errorf("%d shards: base version %d after MemWAL writes, want 4", shards, f.Version)
		}
		if d := DiffByID(readByID(t, f, ReadOpts{LSM: Bool(true)}), f.Want); d != "" {
			t.Errorf("%d shards: LSM view differs:\n%s", shards, d)
		}
		base := model{}.put(BasicRows(0, 20))
		if d := DiffByID(readByID(t, f, ReadOpts{LSM: Bool(false)}), base); d != "" {
			t.Errorf("%d shards: base view differs:\n%s", shards, d)
		}
		shardDirs, _ := filepath.Glob(filepath.Join(f.Dir, "_mem_wal", "*"))
		gens, _ := filepath.Glob(filepath.Join(f.Dir, "_mem_wal", "*", "*_gen_*"))
		if len(shardDirs) != shards {
			t.Errorf("%d shards: %d shard directories", shards, len(shardDirs))
		}
		// Each generation writes ids 0..4 and 100g..100g+4: one
		// generation per bucket those keys fall in.
		wantGens := 0
		for g := int64(1); g <= 3; g++ {
			seen := map[int]bool{}
			for _, id := range append(idRange(0, 5), idRange(100*g, 100*g+5)...) {
				seen[Bucket(id, shards)] = true
			}
			wantGens += len(seen)
		}
		if len(gens) != wantGens {
			t.Errorf("%d shards: %d generation directories, want %d", shards, len(gens), wantGens)
		}
		res := f.Run(t, GetLsmWriteSpec(), MergeInsertDeleteBySource("id", BasicRows(0, 1), "id = 7").ExpectError())
		spec, err := res.LsmWriteSpec(0)
		if err != nil || spec == nil || spec.NumBuckets != map[int]int{1: 0, 4: 4}[shards] {
			t.Errorf("spec = %+v, %v", spec, err)
		}
		if !strings.Contains(res.Err(1), "only the upsert form") {
			t.Errorf("by-source delete through the MemWAL: %q", res.Err(1))
		}
	}
}

// TestWriterAcknowledgedVisible: a writer runs for 2 s on a plain table;
// every acknowledged operation is visible afterwards.
func TestWriterAcknowledgedVisible(t *testing.T) {
	f := Plain(t, "")
	w := StartWriter(t, WriterOpts{URI: f.URI, Table: f.Table, Duration: 2 * time.Second, KeyMin: 0, KeyMax: 59, Seed: 7, ID: "w1"})
	<-w.Done()
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	acked := Acknowledged(ops)
	if len(acked) < 5 {
		t.Fatalf("only %d acknowledged operations in 2 s: %+v", len(acked), ops)
	}
	kinds := map[string]int{}
	for _, op := range acked {
		kinds[op.Op]++
	}
	t.Logf("acknowledged %v, failed %d", kinds, len(Failed(ops)))
	want := Expected(f.Want, ops)
	if d := DiffByID(readByID(t, f, ReadOpts{}), want); d != "" {
		t.Errorf("acknowledged operations not visible:\n%s", d)
	}
}

// TestWriterLSM: on a 4-bucket MemWAL table, MemWAL merges mixed with base
// operations; after Stop (which closes the MemWAL writers) every
// acknowledged op is visible through the LSM view.
func TestWriterLSM(t *testing.T) {
	f := MemWAL(t, "", 4, 1)
	w := StartWriter(t, WriterOpts{URI: f.URI, Table: f.Table, Duration: 2 * time.Second, KeyMin: 10, KeyMax: 40, Seed: 3, ID: "l",
		Weights: map[string]int{"append": 1, "delete": 1, "merge": 1, "lsmMerge": 3}})
	if err := w.WaitOps(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, op := range Acknowledged(ops) {
		kinds[op.Op]++
	}
	t.Logf("acknowledged %v, failed %+v", kinds, Failed(ops))
	if kinds["lsmMerge"] == 0 {
		t.Fatalf("no MemWAL merges acknowledged: %+v", ops)
	}
	if d := DiffByID(readByID(t, f, ReadOpts{LSM: Bool(true)}), Expected(f.Want, ops)); d != "" {
		t.Errorf("acknowledged operations not visible through the LSM view:\n%s", d)
	}
}

// TestWriterMaintenance: a writer weighing in LanceDB's optimize and
// createIndex acknowledges both, its optimize prunes nothing (the default
// keeps every version a concurrent test still reads), the indexes it
// named exist afterwards, and its data operations are all visible.
func TestWriterMaintenance(t *testing.T) {
	f := Indexed(t, "")
	w := StartWriter(t, WriterOpts{URI: f.URI, Table: f.Table, Duration: 4 * time.Second, KeyMin: 100, KeyMax: 140, Seed: 11, ID: "m",
		Weights: map[string]int{"append": 2, "delete": 1, "optimize": 2, "createIndex": 2},
		Indexes: []IndexChoice{{Column: "id", Type: "btree", Name: "id_idx"}, {Column: "cat", Type: "btree", Name: "cat_btree"}}})
	<-w.Done()
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, op := range Maintenance(ops) {
		kinds[op.Op]++
		if op.Op == "optimize" && (op.PrunedBytes != 0 || op.PrunedVersions != 0) {
			t.Errorf("optimize pruned %d versions, %d bytes: %+v", op.PrunedVersions, op.PrunedBytes, op)
		}
		if op.Op == "createIndex" && (op.Name == "" || op.Version == 0) {
			t.Errorf("createIndex line without its index or version: %+v", op)
		}
	}
	t.Logf("maintenance %v, failed %+v", kinds, Failed(ops))
	if kinds["optimize"] == 0 || kinds["createIndex"] == 0 {
		t.Fatalf("no optimize or createIndex acknowledged: %+v", ops)
	}
	if d := DiffByID(readByID(t, f, ReadOpts{}), Expected(f.Want, ops)); d != "" {
		t.Errorf("acknowledged operations not visible:\n%s", d)
	}
	res := f.Run(t, ListIndices())
	ixs, err := res.Indices(0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ix := range ixs {
		names[ix.Name] = true
	}
	for _, op := range Maintenance(ops) {
		if op.Op == "createIndex" && !names[op.Name] {
			t.Errorf("index %s built by the writer is not listed: %+v", op.Name, ixs)
		}
	}
}

// TestWriterStopsOnStdinClose: a writer meant to run for a minute stops
// promptly when Stop closes its stdin, with its stop line.
func TestWriterStopsOnStdinClose(t *testing.T) {
	f := Plain(t, "")
	w := StartWriter(t, WriterOpts{URI: f.URI, Table: f.Table, Duration: time.Minute, KeyMin: 100, KeyMax: 120})
	if err := w.WaitOps(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if last := ops[len(ops)-1]; last.Op != "stop" {
		t.Errorf("last line %+v", last)
	}
	if d := DiffByID(readByID(t, f, ReadOpts{}), Expected(f.Want, ops)); d != "" {
		t.Errorf("acknowledged operations not visible:\n%s", d)
	}
}

// TestBucketMatchesLanceDB: a merge-insert of keys that Bucket puts in one
// bucket is accepted unsplit (LanceDB validates every row); two keys
// Bucket separates are refused.
func TestBucketMatchesLanceDB(t *testing.T) {
	if Bucket(1, 4) != 0 || Bucket(3, 4) != 3 || Bucket(4, 4) != 2 {
		t.Fatalf("Bucket(1,3,4 of 4) = %d %d %d, want 0 3 2 (seen from LanceDB)", Bucket(1, 4), Bucket(3, 4), Bucket(4, 4))
	}
	f := MemWAL(t, "", 8, 0)
	byBucket := map[int][]Row{}
	for id := int64(0); id < 64; id++ {
		b := Bucket(id, 8)
		byBucket[b] = append(byBucket[b], BasicRow(id, "x"))
	}
	var steps []Step
	for b := range 8 {
		steps = append(steps, MergeInsert("id", byBucket[b]).With("split", false).With("shard", "b"+strings.Repeat("x", b)), CloseLsmWriters())
	}
	steps = append(steps, MergeInsert("id", []Row{byBucket[0][0], byBucket[1][0]}).With("split", false).ExpectError())
	res := f.Run(t, steps...)
	if !strings.Contains(res.Err(len(steps)-1), "must target a single bucket") {
		t.Errorf("mixed buckets: %q", res.Err(len(steps)-1))
	}
}
