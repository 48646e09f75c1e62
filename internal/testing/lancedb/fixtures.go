package lancedb

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
)

// Fixture is a table LanceDB built for a test.
type Fixture struct {
	// URI is the database directory; the table is Table in it, stored at
	// Dir (URI/<Table>.lance).
	URI, Table, Dir string
	// Want is the key (id) to value tag (s) the table should read as
	// (through the LSM view when it has a spec), computed from what the
	// fixture wrote, not read back.
	Want map[int64]string
	// Versions is the table's version after the fixture (the base
	// table's: MemWAL generations commit none).
	Version uint64
	// Steps are the steps that built it; Results their answers.
	Steps   []Step
	Results *Results
}

// Program returns a program on the fixture's table with steps.
func (f *Fixture) Program(steps ...Step) Program {
	return Program{URI: f.URI, Table: f.Table, Steps: steps}
}

// Run runs steps on the fixture's table; any step failure fails the test.
func (f *Fixture) Run(t testing.TB, steps ...Step) *Results {
	t.Helper()
	return MustRun(t, f.Program(steps...))
}

// build runs steps on a new table "t" in dir (t.TempDir() if "").
func build(t testing.TB, dir string, want map[int64]string, steps []Step) *Fixture {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	f := &Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance"), Want: want, Steps: steps}
	steps = append(slices.Clone(steps), CurrentVersion())
	f.Results = MustRun(t, f.Program(steps...))
	v, err := f.Results.Version(len(steps) - 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Version = v
	return f
}

type model map[int64]string

func (m model) put(rows []Row) model {
	for _, r := range rows {
		id, _ := r.Int("id")
		m[id] = r.Str("s")
	}
	return m
}

func (m model) del(ids ...int64) model {
	for _, id := range ids {
		delete(m, id)
	}
	return m
}

func idRange(lo, hi int64) []int64 {
	var ids []int64
	for i := lo; i < hi; i++ {
		ids = append(ids, i)
	}
	return ids
}

// PlainSteps: rows 0..9 created (version 1), 10..19 and 20..29 appended
// (versions 2, 3): three fragments of BasicSchema.
func PlainSteps() ([]Step, map[int64]string) {
	a, b, c := BasicRows(0, 10), BasicRows(10, 20), BasicRows(20, 30)
	return []Step{Create(BasicSchema, a), Add(b), Add(c)}, model{}.put(a).put(b).put(c)
}

// Plain builds PlainSteps in dir ("" for a temporary directory).
func Plain(t testing.TB, dir string) *Fixture {
	t.Helper()
	steps, want := PlainSteps()
	return build(t, dir, want, steps)
}

// DeletesSteps: Plain, then fragment 1 (ids 10..19) deleted entirely
// (version 4) and ids 3 and 25 deleted (version 5): deletion files on
// fragments 0 and 2, fragment 1 fully deleted.
func DeletesSteps() ([]Step, map[int64]string) {
	steps, want := PlainSteps()
	steps = append(steps, Delete("id >= 10 AND id < 20"), Delete("id = 3 OR id = 25"))
	model(want).del(idRange(10, 20)...).del(3, 25)
	return steps, want
}

// Deletes builds DeletesSteps.
func Deletes(t testing.TB, dir string) *Fixture {
	t.Helper()
	steps, want := DeletesSteps()
	return build(t, dir, want, steps)
}

// IndexedSteps: Plain, a btree index id_idx on id (version 4) and a bitmap
// index cat_idx on cat (version 5), then rows 30..34 appended (version 6),
// which no index covers yet.
func IndexedSteps() ([]Step, map[int64]string) {
	steps, want := PlainSteps()
	more := BasicRows(30, 35)
	steps = append(steps, CreateIndex("id", "btree", "id_idx"), CreateIndex("cat", "bitmap", "cat_idx"), Add(more))
	model(want).put(more)
	return steps, want
}

// Indexed builds IndexedSteps.
func Indexed(t testing.TB, dir string) *Fixture {
	t.Helper()
	steps, want := IndexedSteps()
	return build(t, dir, want, steps)
}

// TaggedSteps: Plain with tags v1 → 1 and v2 → 2, and a tag "gone"
// created and deleted (tags commit no version).
func TaggedSteps() ([]Step, map[int64]string) {
	steps, want := PlainSteps()
	steps = append(steps, TagCreate("v1", 1), TagCreate("v2", 2), TagCreate("gone", 3), TagDelete("gone"))
	return steps, want
}

// Tagged builds TaggedSteps.
func Tagged(t testing.TB, dir string) *Fixture {
	t.Helper()
	steps, want := TaggedSteps()
	return build(t, dir, want, steps)
}

// MemWALSteps: rows 0..19 (version 1), a btree id_idx (2), the primary key
// id (3) and an LSM spec (4: unsharded for shards == 1, else bucket on id
// with that many buckets, maintaining id_idx); then per generation g =
// 1..generations a MemWAL merge-insert that updates ids 0..4 and inserts
// 100g..100g+4 (tags "g<g>-"), and CloseLsmWriters, which flushes one
// generation per shard written. The base table stays at version 4.
func MemWALSteps(shards, generations int) ([]Step, map[int64]string) {
	base := BasicRows(0, 20)
	spec := LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"id_idx"}}
	if shards > 1 {
		spec = LsmWriteSpec{SpecType: "bucket", Column: "id", NumBuckets: shards, MaintainedIndexes: []string{"id_idx"}}
	}
	steps := []Step{Create(BasicSchema, base), CreateIndex("id", "btree", "id_idx"), SetPrimaryKey("id"), SetLsmWriteSpec(spec)}
	want := model{}.put(base)
	for g := 1; g <= generations; g++ {
		tag := fmt.Sprintf("g%d-", g)
		rows := append(TaggedRows(0, 5, tag), TaggedRows(int64(100*g), int64(100*g+5), tag)...)
		steps = append(steps, MergeInsert("id", rows), CloseLsmWriters())
		want.put(rows)
	}
	return steps, want
}

// MemWAL builds MemWALSteps.
func MemWAL(t testing.TB, dir string, shards, generations int) *Fixture {
	t.Helper()
	steps, want := MemWALSteps(shards, generations)
	return build(t, dir, want, steps)
}

// RowsByID turns read-back rows into id → s, failing on duplicate ids.
func RowsByID(rows []Row) (map[int64]string, error) {
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		id, ok := r.Int("id")
		if !ok {
			return nil, fmt.Errorf("row without an integer id: %v", r)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("id %d read twice", id)
		}
		out[id] = r.Str("s")
	}
	return out, nil
}

// DiffByID describes how got differs from want ("" if equal).
func DiffByID(got, want map[int64]string) string {
	var d string
	for _, id := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[id]
		switch {
		case !ok:
			d += fmt.Sprintf("id %d missing (want %q)\n", id, want[id])
		case g != want[id]:
			d += fmt.Sprintf("id %d = %q, want %q\n", id, g, want[id])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[id]; !ok {
			d += fmt.Sprintf("id %d = %q unexpected\n", id, got[id])
		}
	}
	return d
}
