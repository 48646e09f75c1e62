package lancewal

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/tables"
)

// TestOpenWriterRefusesWhatItDoesNotModel: the writer claims nothing on a
// table whose metadata says more than it models (a newer Lance's writer
// flag or MemWAL details field, or a maintained index it cannot copy into a
// generation, which maintain_all_indexes makes of every index), and
// maintain_all_indexes over btree indexes only gives each generation their
// copies.
func TestOpenWriterRefusesWhatItDoesNotModel(t *testing.T) {
	bitmap := func(t *testing.T, f *meta.ManifestFile) {
		ix := proto.Clone(meta.FindIndex(f.Indices, "id_idx")[0]).(*pb.IndexMetadata)
		ix.Name = "cat_idx"
		ix.Uuid, _ = meta.NewUUID()
		ix.IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLBitmap}
		f.Indices = append(f.Indices, ix)
	}
	// vectorIndex adds a maintained vector index vec_idx of metric over
	// column col.
	vectorIndex := func(metric ipb.VectorMetricType, col string) func(t *testing.T, f *meta.ManifestFile) {
		return func(t *testing.T, f *meta.ManifestFile) {
			ix := proto.Clone(meta.FindIndex(f.Indices, "id_idx")[0]).(*pb.IndexMetadata)
			ix.Name = "vec_idx"
			ix.Uuid, _ = meta.NewUUID()
			for _, fl := range f.Manifest.GetFields() {
				if fl.GetName() == col {
					ix.Fields = []int32{fl.GetId()}
				}
			}
			d, err := anypb.New(&ipb.VectorIndexDetails{MetricType: metric})
			if err != nil {
				t.Fatal(err)
			}
			d.TypeUrl = vector.TypeURLDetails
			ix.IndexDetails = d
			f.Indices = append(f.Indices, ix)
			tables.EditMemWal(t, f, func(d *pb.MemWalIndexDetails) { d.MaintainedIndexes = append(d.MaintainedIndexes, "vec_idx") })
		}
	}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, f *meta.ManifestFile)
		want string // "" opens
	}{
		{"unknown writer flag", func(t *testing.T, f *meta.ManifestFile) { f.Manifest.WriterFeatureFlags |= 1 << 40 }, "flag"},
		{"unknown MemWAL details field", func(t *testing.T, f *meta.ManifestFile) {
			tables.EditMemWal(t, f, func(d *pb.MemWalIndexDetails) {
				d.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
			})
		}, "does not know"},
		{"maintained bitmap", func(t *testing.T, f *meta.ManifestFile) {
			bitmap(t, f)
			tables.EditMemWal(t, f, func(d *pb.MemWalIndexDetails) { d.MaintainedIndexes = append(d.MaintainedIndexes, "cat_idx") })
		}, `"cat_idx" is a bitmap index`},
		{"maintain all over a bitmap", func(t *testing.T, f *meta.ManifestFile) {
			bitmap(t, f)
			tables.EditMemWal(t, f, func(d *pb.MemWalIndexDetails) { d.MaintainedIndexes, d.MaintainAllIndexes = nil, proto.Bool(true) })
		}, `"cat_idx" is a bitmap index`},
		{"maintained vector index of a scalar column", vectorIndex(ipb.VectorMetricType_L2, "f"), `column "f" of type double, not a float32 vector`},
		{"maintained hamming vector index", vectorIndex(ipb.VectorMetricType_Hamming, "f"), `distance type "hamming"`},
		{"maintain all over a btree", func(t *testing.T, f *meta.ManifestFile) {
			tables.EditMemWal(t, f, func(d *pb.MemWalIndexDetails) { d.MaintainedIndexes, d.MaintainAllIndexes = nil, proto.Bool(true) })
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, _ := corpusTable(t, "memwal_1")
			tables.RewriteLatest(t, tbl.b, func(f *meta.ManifestFile) { tc.edit(t, f) })
			shard, err := tbl.ShardFor(t.Context(), int64(1))
			if err != nil {
				t.Fatal(err)
			}
			before := walCount(t, tbl, shard)
			w, err := tbl.OpenWriter(t.Context(), shard, WriterOptions{})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("OpenWriter: %v, want one line with %q", err, tc.want)
				}
				if strings.HasPrefix(tc.name, "unknown") && !errors.Is(err, meta.ErrUnsupportedFeature) {
					t.Errorf("%v is not ErrUnsupportedFeature", err)
				}
				if after := walCount(t, tbl, shard); after != before {
					t.Errorf("a refused writer changed the shard: %d WAL entries, were %d", after, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Upsert(t.Context(), []Row{{"id": int64(1), "s": "x", "cat": int32(1), "f": 1.5}}); err != nil {
				t.Fatal(err)
			}
			g, err := w.Flush(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			gb := storage.Sub(tbl.b, memwal.GenerationDir(shard, g.Path))
			gf, _, err := meta.ReadLatest(t.Context(), gb)
			if err != nil {
				t.Fatal(err)
			}
			if len(meta.FindIndex(gf.Indices, "id_idx")) != 1 {
				t.Fatalf("generation %d carries indexes %v, want id_idx", g.Generation, gf.Indices)
			}
		})
	}
}
