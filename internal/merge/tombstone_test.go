package merge

import (
	"bytes"
	"context"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// plantTombstones rewrites the newest generation of the table's only shard
// so that the rows of keys are tombstones, as a MemWAL writer records a
// delete. LanceDB 0.39's OSS writer refuses deletes through the MemWAL, so
// the generation is edited in place (a test of the reading side only).
func plantTombstones(t *testing.T, ctx context.Context, b storage.Bucket, keys ...int64) {
	t.Helper()
	ids, err := memwal.ListShards(ctx, b)
	if err != nil || len(ids) != 1 {
		t.Fatalf("shards %v, %v", ids, err)
	}
	st, err := memwal.ReadShard(ctx, b, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	ssts := st.Manifest.GetSstables()
	gen := ssts[len(ssts)-1]
	gb := storage.Sub(b, memwal.GenerationDir(ids[0], gen.GetPath()))
	gm, n, err := meta.ReadLatest(ctx, gb)
	if err != nil {
		t.Fatal(err)
	}
	frag := gm.Manifest.GetFragments()[0]
	lf, _, done, err := openFragment(ctx, gb, "", frag)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := lf.ReadAll(nil)
	done()
	if err != nil {
		t.Fatal(err)
	}
	id, tomb := batch.Column("id"), batch.Column(TombstoneColumn)
	tomb.Values = append([]byte(nil), tomb.Values...)
	planted := 0
	for i := 0; i < batch.NumRows; i++ {
		for _, k := range keys {
			if id.Int64s()[i] == k {
				tomb.Values[i>>3] |= 1 << (i & 7)
				planted++
			}
		}
	}
	if planted != len(keys) {
		t.Fatalf("planted %d of %d tombstones (keys not in generation %d)", planted, len(keys), gen.GetGeneration())
	}
	var buf bytes.Buffer
	w, err := file.NewWriter(&buf, gm.Manifest.GetFields(), file.WriterOptions{Version: lf.Version()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	df := frag.GetFiles()[0]
	if err := gb.Put(ctx, meta.DataKey(df.GetPath()), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	df.FileSizeBytes = uint64(buf.Len())
	df.Fields, df.ColumnIndices = w.DataFileFields()
	raw, err := meta.EncodeManifestFile(gm)
	if err != nil {
		t.Fatal(err)
	}
	if err := gb.Put(ctx, meta.ManifestKey(n, gm.Manifest.GetVersion()), raw); err != nil {
		t.Fatal(err)
	}
}

// TestMergeTombstones: a generation's tombstones delete their keys from the
// base table: LanceDB's LSM view hides them before the merge, and its base
// view after the merge equals that view (a key upserted by an older
// generation and a key only ever in the MemWAL alike).
func TestMergeTombstones(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 2)
	h := openHandle(t, f.Dir)
	ctx := t.Context()
	// Generation 2 upserted ids 0..4 and inserted 200..204: tombstone a base
	// key it also upserted (3) and a key only the MemWAL holds (201).
	plantTombstones(t, ctx, h.Bucket, 3, 201)
	want := map[int64]string{}
	for k, v := range f.Want {
		if k != 3 && k != 201 {
			want[k] = v
		}
	}
	before := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
	if d := lancedb.DiffByID(rowsOf(t, before, 0), want); d != "" {
		t.Fatalf("LanceDB's LSM view with the tombstones: %s", d)
	}
	results := mergeAll(t, h)
	deleted := 0
	for _, r := range results {
		deleted += r.Deleted
	}
	if deleted != 2 {
		t.Errorf("the merge counted %d tombstoned keys, want 2", deleted)
	}
	after := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
	if d := lancedb.DiffByID(rowsOf(t, after, 0), want); d != "" {
		t.Errorf("LanceDB's base view after merging the tombstones: %s", d)
	}
	if d := lancedb.DiffByID(rowsOf(t, after, 1), want); d != "" {
		t.Errorf("LanceDB's LSM view after merging the tombstones: %s", d)
	}
}
