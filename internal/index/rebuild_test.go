package index

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestRebuildMemWAL: on a MemWAL table whose merged rows id_idx does not
// cover, Rebuild replaces the index by one segment over every live row,
// the commit records index_catchup = the merged generation per shard, the
// content check passes and LanceDB answers from the index alone.
func TestRebuildMemWAL(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 2, 2)
	h := openHandle(t, f.Dir)
	if out, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %v, %+v", err, out)
	}
	before := mustRead(t, h)
	old := meta.FindIndex(before.Indices, "id_idx")
	res, err := Rebuild(t.Context(), h, "id_idx", RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != len(f.Want) || len(res.Removed) != len(old) || res.Version != before.Manifest.GetVersion()+1 || res.Kind != KindBTree {
		t.Fatalf("rebuild: %+v (want %d rows, %d segments removed)", res, len(f.Want), len(old))
	}
	head := mustRead(t, h)
	segs := meta.FindIndex(head.Indices, "id_idx")
	if len(segs) != 1 || meta.UUIDString(segs[0].GetUuid()) != res.Segment || segs[0].GetDatasetVersion() != res.ReadVersion {
		t.Fatalf("segments after rebuild: %v", segs)
	}
	d, err := memwal.Details(memwal.Index(head.Indices))
	if err != nil {
		t.Fatal(err)
	}
	compacted, caught := memwal.Compacted(d), memwal.Catchup(d)["id_idx"]
	if len(compacted) == 0 {
		t.Fatal("no merged generations recorded")
	}
	for shard, g := range compacted {
		if caught[shard] != g {
			t.Errorf("shard %s: index_catchup %d, merged generation %d", shard, caught[shard], g)
		}
	}
	cs, err := CheckContent(t.Context(), h.Bucket, head, []string{"id_idx"})
	if err != nil || len(cs) != 1 || !cs[0].Checked || len(cs[0].Problems) != 0 {
		t.Fatalf("content after rebuild: %+v, %v", cs, err)
	}
	out := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false), Where: "id >= 0"}))
	if st := stats(t, out, 0); st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(len(f.Want)) {
		t.Errorf("LanceDB after rebuild: %+v (want %d indexed, 0 unindexed)", st, len(f.Want))
	}
	if got := idsOf(t, out, 1); len(got) != len(f.Want) {
		t.Errorf("LanceDB answers id >= 0 with %d rows, want %d", len(got), len(f.Want))
	}
}

// TestRebuildRefuses: an unknown index and a full-text index whose
// tokenizer compactord does not reproduce are refused in one line,
// committing nothing.
func TestRebuildRefuses(t *testing.T) {
	lancedb.Require(t)
	lf := labelFixture(t)
	tf := otherLanguageFixture(t)
	for _, c := range []struct {
		dir, name, want string
	}{
		{lf.Dir, "nope", `no index "nope"`},
		{tf.Dir, "doc_idx", `doc_idx: language "Turkish": stemming is not reproduced by compactord`},
	} {
		h := openHandle(t, c.dir)
		v := mustRead(t, h).Manifest.GetVersion()
		_, err := Rebuild(t.Context(), h, c.name, RebuildOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("rebuild %s: %v, want %q", c.name, err, c.want)
		}
		// The daemon tells a refused tokenizer from a failure.
		if left := errors.Is(err, ErrLeftToLanceDB); left != (c.name == "doc_idx") {
			t.Errorf("rebuild %s: errors.Is(ErrLeftToLanceDB) = %v", c.name, left)
		}
		if got := mustRead(t, h).Manifest.GetVersion(); got != v {
			t.Errorf("rebuild %s committed version %d", c.name, got)
		}
	}
}

// TestRebuildMissingSegmentFile: rebuild reads the data, not the old
// segments, so it repairs an index whose segment file is gone.
func TestRebuildMissingSegmentFile(t *testing.T) {
	lancedb.Require(t)
	f, deleted := ghostFixture(t)
	h := openHandle(t, f.Dir)
	seg := meta.FindIndex(mustRead(t, h).Indices, "id_idx")[0]
	if err := os.Remove(filepath.Join(f.Dir, meta.IndexDir(meta.UUIDString(seg.GetUuid())), BTreeDataFile)); err != nil {
		t.Fatal(err)
	}
	if ps := checkAll(t, h)["id_idx"].Problems; len(ps) != 1 {
		t.Fatalf("before rebuild: %q", ps)
	}
	res, err := Rebuild(t.Context(), h, "id_idx", RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 40-len(deleted) {
		t.Errorf("rebuilt %d rows, want %d", res.Rows, 40-len(deleted))
	}
	if c := checkAll(t, h)["id_idx"]; !c.Checked || len(c.Problems) != 0 || c.Masked != 0 {
		t.Errorf("after rebuild: %+v", c)
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 0"}))
	if got := idsOf(t, out, 0); len(got) != 40-len(deleted) {
		t.Errorf("LanceDB answers id >= 0 with %d rows, want %d", len(got), 40-len(deleted))
	}
}

// TestRebuildVectorIndexes: rebuilding LanceDB's IVF_FLAT, IVF_HNSW_SQ and
// IVF_PQ indexes (null vectors, deleted rows, rows appended unindexed)
// re-encodes every live non-null vector with the index's centroids and
// quantizer into one segment: the content check finds exactly those rows,
// none masked, LanceDB counts no unindexed row, and its search finds each
// probed row's own vector first.
func TestRebuildVectorIndexes(t *testing.T) {
	lancedb.Require(t)
	f := rowIDFixture(t)
	h := openHandle(t, f.Dir)
	// live counts the live non-null vectors; LanceDB's stats count every
	// live row of the covered fragments, null vectors included.
	var live, rows uint64
	for i := 0; i < 500; i++ {
		if i >= 400 || i%9 != 0 {
			rows++
			if i%17 != 0 {
				live++
			}
		}
	}
	for _, name := range []string{"v_idx", "h_idx", "p_idx"} {
		res, err := Rebuild(t.Context(), h, name, RebuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != int(live) || len(res.Removed) != 1 {
			t.Fatalf("rebuild %s: %+v; want %d rows replacing one segment", name, res, live)
		}
	}
	got := checkAll(t, h)
	for _, name := range []string{"v_idx", "h_idx", "p_idx"} {
		if c := got[name]; !c.Checked || len(c.Problems) != 0 || c.Entries != live || c.Masked != 0 {
			t.Errorf("%s after rebuild: %+v, want %d entries, none masked", name, c, live)
		}
	}
	steps := []lancedb.Step{lancedb.Open()}
	for _, name := range []string{"v_idx", "h_idx", "p_idx"} {
		steps = append(steps, lancedb.IndexStats(name))
	}
	probes := []int64{1, 250, 401, 499}
	for _, id := range probes {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: []float32{float32(id), 1, 2, float32(id % 3)}, Column: "v", Limit: 1, Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	for i, name := range []string{"v_idx", "h_idx", "p_idx"} {
		st, err := out.IndexStats(1 + i)
		if err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(rows) || st.NumIndices != 1 {
			t.Errorf("%s: LanceDB's index stats %+v (%v), want %d indexed in one segment", name, st, err, rows)
		}
	}
	for i, id := range probes {
		rows, err := out.Rows(4 + i)
		if err != nil || len(rows) != 1 {
			t.Fatalf("search for row %d: %v %v", id, rows, err)
		}
		if got, _ := rows[0].Int("id"); got != id {
			t.Errorf("search for row %d's vector found row %d first", id, got)
		}
	}
}
