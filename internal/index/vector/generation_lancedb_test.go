package vector

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	lancepb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestGenerationCopyMatchesLanceDB: for a vector index of every type
// LanceDB builds (IVF_PQ, IVF_FLAT, IVF_HNSW_SQ, IVF_HNSW_PQ, IVF_RQ)
// maintained by a MemWAL, with each distance type, the copy LanceDB's
// flush writes into a generation (a null vector among its rows) is the
// copy BuildGenerationCopy builds over the generation's vectors: the same
// index type, distance, zero centroid, schemas and metadata, SQ bounds,
// codes and row ids byte for byte, and HNSW parameters and level-0 node
// count (the graphs' edges may differ: LanceDB builds them concurrently).
func TestGenerationCopyMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	for _, typ := range []string{"ivf_pq", "ivf_flat", "ivf_hnsw_sq", "ivf_hnsw_pq", "ivf_rq"} {
		for _, dist := range GenerationDistances {
			t.Run(typ+"_"+dist, func(t *testing.T) {
				dir := t.TempDir()
				f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
				opts := map[string]any{"numPartitions": 2, "distanceType": dist}
				if typ == "ivf_pq" || typ == "ivf_hnsw_pq" {
					opts["numSubVectors"] = 4
				}
				rows := append(lancedb.VectorRows(10, 20, "g"), lancedb.VectorRows(1000, 1200, "g")...)
				rows[3]["vec"] = nil
				f.Run(t,
					lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 300, "v")),
					lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
					lancedb.SetPrimaryKey("id"),
					lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"vec_idx"}}),
					lancedb.MergeInsert("id", rows), lancedb.CloseLsmWriters())
				gens, _ := filepath.Glob(f.Dir + "/_mem_wal/*/*_gen_1")
				if len(gens) != 1 {
					t.Fatalf("generation directories %v", gens)
				}
				gb, err := storage.Open(ctx, "file://"+gens[0])
				if err != nil {
					t.Fatal(err)
				}
				defer gb.Close()
				mf, _, err := meta.ReadLatest(ctx, gb)
				if err != nil {
					t.Fatal(err)
				}
				segs := meta.FindIndex(mf.Indices, "vec_idx")
				if len(segs) != 1 {
					t.Fatalf("the generation has %d vec_idx segments", len(segs))
				}
				ix := segs[0]
				if ix.GetIndexDetails().GetTypeUrl() != TypeURLDetails || len(ix.GetIndexDetails().GetValue()) != 0 || ix.GetIndexVersion() != 1 || ix.GetDatasetVersion() != 1 {
					t.Errorf("LanceDB's copy's metadata: details %s (%d bytes), index version %d, dataset version %d", ix.GetIndexDetails().GetTypeUrl(), len(ix.GetIndexDetails().GetValue()), ix.GetIndexVersion(), ix.GetDatasetVersion())
				}
				idir := filepath.Join(gens[0], "_indices", meta.UUIDString(ix.GetUuid()))
				theirX, err := ReadSubIndex(openLocal(t, filepath.Join(idir, IndexFile)))
				if err != nil {
					t.Fatal(err)
				}
				theirS, err := ReadStorage(openLocal(t, filepath.Join(idir, StorageFile)))
				if err != nil {
					t.Fatal(err)
				}
				var field = mf.Manifest.GetFields()[0]
				for _, fl := range mf.Manifest.GetFields() {
					if fl.GetId() == ix.GetFields()[0] {
						field = fl
					}
				}
				v, err := CollectVectors(ctx, gb, mf.Manifest.GetVersion(), field, roaring.BitmapOf(0))
				if err != nil {
					t.Fatal(err)
				}
				if len(v.Addrs) != len(rows)-1 {
					t.Fatalf("the generation has %d non-null vectors, want %d", len(v.Addrs), len(rows)-1)
				}
				ourX, ourS, err := BuildGenerationCopy(v, dist)
				if err != nil {
					t.Fatal(err)
				}
				ourX, ourS = roundTrip(t, ourX, ourS)

				if ourX.Type != theirX.Type || ourX.Distance != theirX.Distance || !proto.Equal(ourX.IVF.GetCentroidsTensor(), theirX.IVF.GetCentroidsTensor()) {
					t.Errorf("sub-index %s %s %v, LanceDB's %s %s %v", ourX.Type, ourX.Distance, ourX.IVF.GetCentroidsTensor(), theirX.Type, theirX.Distance, theirX.IVF.GetCentroidsTensor())
				}
				if !fieldsEqual(ourX, theirX) {
					t.Errorf("sub-index schema %v, LanceDB's %v", ourX.Fields, theirX.Fields)
				}
				oh, th := ourX.HNSW[0], theirX.HNSW[0]
				if oh.Params != th.Params || oh.LevelOffsets[1] != th.LevelOffsets[1] || len(oh.LevelOffsets) != len(th.LevelOffsets) {
					t.Errorf("HNSW %+v, LanceDB's %+v", oh, th)
				}
				if !slices.Equal(keys(ourX.Metadata), keys(theirX.Metadata)) {
					t.Errorf("sub-index metadata keys %v, LanceDB's %v", keys(ourX.Metadata), keys(theirX.Metadata))
				}
				if *ourS.SQ != *theirS.SQ || !slices.Equal(ourS.RowIDs, theirS.RowIDs) ||
					!bytes.Equal(ourS.Columns[0].Children[0].Values, theirS.Columns[0].Children[0].Values) {
					t.Errorf("storage SQ %+v, %d rows; LanceDB's %+v, %d rows (or their codes differ)", *ourS.SQ, len(ourS.RowIDs), *theirS.SQ, len(theirS.RowIDs))
				}
				if len(ourS.Metadata) != len(theirS.Metadata) {
					t.Errorf("storage metadata %q, LanceDB's %q", ourS.Metadata, theirS.Metadata)
				}
				for k, want := range theirS.Metadata {
					if !bytes.Equal(ourS.Metadata[k], want) {
						t.Errorf("storage metadata %s = %s, LanceDB's %s", k, ourS.Metadata[k], want)
					}
				}
				for i := range theirS.Fields {
					if !proto.Equal(ourS.Fields[i], theirS.Fields[i]) {
						t.Errorf("storage field %d %v, LanceDB's %v", i, ourS.Fields[i], theirS.Fields[i])
					}
				}
			})
		}
	}
}

func fieldsEqual(a, b *SubIndex) bool {
	return slices.EqualFunc(a.Fields, b.Fields, func(x, y *lancepb.Field) bool { return proto.Equal(x, y) })
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
