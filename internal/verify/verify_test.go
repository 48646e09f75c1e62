package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
	"github.com/compactord/compactord/internal/verify"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func healthy(t *testing.T) (*ops.Table, *pb.Manifest) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, _ := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	tb := ops.NewTable(b, c, nil, nil)
	s, _ := table.ParseSchema("id:int64,v:string", []string{"id"})
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := tb.Append(ctx, []table.Row{{int64(10 * i), "a"}, {int64(10*i + 1), "b"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Keys: []table.Row{{int64(1), nil}}}); err != nil {
		t.Fatal(err)
	}
	head, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return tb, head
}

// publish writes a hand-made next version (bypassing BuildManifest, as a
// buggy or foreign writer would).
func publish(t *testing.T, b storage.Bucket, m *pb.Manifest) {
	t.Helper()
	m.Version++
	m.ReadVersion = m.Version - 1
	data, _ := table.EncodeProto(m)
	if err := b.PutIfAbsent(context.Background(), table.ManifestKey(m.Version), data); err != nil {
		t.Fatal(err)
	}
}

// withMemWal publishes a version whose shard "s" is merged through
// compacted and, when trimmed > 0, a shard manifest trimmed through it.
func withMemWal(t *testing.T, b storage.Bucket, m *pb.Manifest, compacted, trimmed uint64) {
	t.Helper()
	m.Indices = []*pb.IndexMetadata{{Name: table.MemWalIndexName, Type: table.MemWalIndexName, Uuid: "m",
		Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{Shards: []string{"s"}, CompactedSstables: map[string]uint64{"s": compacted}}}}}
	publish(t, b, m)
	if trimmed == 0 {
		return
	}
	data, _ := table.EncodeProto(&pb.ShardManifest{ShardId: "s", Version: 1, TrimmedThroughGeneration: trimmed})
	if err := b.PutIfAbsent(context.Background(), memwal.ShardManifestKey("s", 1), data); err != nil {
		t.Fatal(err)
	}
}

func TestHealthyTableVerifies(t *testing.T) {
	tb, _ := healthy(t)
	rep, err := verify.Run(context.Background(), tb.Bucket, verify.Options{})
	if err != nil || !rep.OK() {
		t.Fatalf("%v %+v", err, rep)
	}
	if len(rep.Versions) != 5 || rep.Rows != 5 || rep.Files == 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestViolationsAreFound(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, b storage.Bucket, m *pb.Manifest)
		want   string
	}{
		{"missing data file", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			_ = b.Delete(context.Background(), m.Fragments[1].DataFile.Path)
		}, "but missing"},
		{"wrong recorded size", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			m.Fragments[1].DataFile.SizeBytes++
			publish(t, b, m)
		}, "records"},
		{"deletion beyond physical rows", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			df, _ := table.WriteDeletionFile(context.Background(), b, m.Fragments[2].Id, m.Version, roaring.BitmapOf(7))
			m.Fragments[2].DeletionFile = df
			publish(t, b, m)
		}, "deletes offset 7"},
		{"max_fragment_id goes down", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			m.Fragments = m.Fragments[:1]
			m.MaxFragmentId = proto.Uint32(0)
			publish(t, b, m)
		}, "max_fragment_id"},
		{"duplicate primary key", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			dup := proto.Clone(m.Fragments[1]).(*pb.Fragment)
			dup.Id = *m.MaxFragmentId + 1
			m.MaxFragmentId = proto.Uint32(dup.Id)
			m.Fragments = append(m.Fragments, dup)
			publish(t, b, m)
		}, "primary key"},
		{"index covers a fragment that never existed", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			bm, _ := roaring.BitmapOf(0, 99).ToBytes()
			m.Indices = append(m.Indices, &pb.IndexMetadata{Name: "ix", Uuid: "u", Type: "btree", FragmentBitmap: bm})
			publish(t, b, m)
		}, "never existed"},
		{"removed_fragments includes a live fragment", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			rm, _ := roaring.BitmapOf(m.Fragments[0].Id).ToBytes()
			m.Indices = append(m.Indices, &pb.IndexMetadata{Name: table.FragReuseIndexName, Type: table.FragReuseIndexName, Uuid: "f",
				Details: &pb.IndexMetadata_FragReuse{FragReuse: &pb.FragReuseIndexDetails{Versions: []*pb.FragReuseVersion{{DatasetVersion: m.Version, RemovedFragments: rm}}}}})
			publish(t, b, m)
		}, "includes live fragments"},
		{"catch-up above compacted", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			m.Indices = append(m.Indices, &pb.IndexMetadata{Name: table.MemWalIndexName, Type: table.MemWalIndexName, Uuid: "m",
				Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{Shards: []string{"s"}, CompactedSstables: map[string]uint64{"s": 2},
					IndexCatchup: map[string]*pb.ShardGenerations{table.MemWalIndexName: {Generations: map[string]uint64{"s": 3}}}}}})
			publish(t, b, m)
		}, "above compacted"},
		{"trimmed past the latest version's merge", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			withMemWal(t, b, m, 1, 3)
		}, "but the latest version"},
		{"trimmed past a tagged version's merge", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			withMemWal(t, b, m, 1, 0)
			if err := b.Put(context.Background(), table.TagsDir+"keep", []byte(fmt.Sprint(m.Version))); err != nil {
				t.Fatal(err)
			}
			withMemWal(t, b, m, 3, 3)
		}, "but tagged version"},
		{"corrupt manifest", func(t *testing.T, b storage.Bucket, m *pb.Manifest) {
			_ = b.Put(context.Background(), table.ManifestKey(2), []byte("garbage"))
		}, "does not parse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb, head := healthy(t)
			tc.break_(t, tb.Bucket, head)
			rep, err := verify.Run(context.Background(), tb.Bucket, verify.Options{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range rep.Violations {
				found = found || strings.Contains(v.Reason, tc.want)
			}
			if !found {
				t.Fatalf("no violation mentioning %q in %+v", tc.want, rep.Violations)
			}
		})
	}
}

// A logical index whose segments disagree on field or type (two creates of
// one name that both committed, before CreateIndex carried its names) is a
// violation; segments that agree are not.
func TestLogicalIndexSegmentsAgree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second *pb.IndexMetadata
		want   string
	}{
		{"agree", &pb.IndexMetadata{Name: "ix", Type: "btree", Uuid: "b", FieldIds: []int32{0}}, ""},
		{"other field", &pb.IndexMetadata{Name: "ix", Type: "btree", Uuid: "b", FieldIds: []int32{1}}, "over fields [1]"},
		{"other type", &pb.IndexMetadata{Name: "ix", Type: "bitmap", Uuid: "b", FieldIds: []int32{0}}, "a bitmap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, m := healthy(t)
			m.Indices = []*pb.IndexMetadata{{Name: "ix", Type: "btree", Uuid: "a", FieldIds: []int32{0}}, tc.second}
			publish(t, tb.Bucket, m)
			rep, err := verify.Run(context.Background(), tb.Bucket, verify.Options{Version: m.Version})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range rep.Violations {
				if strings.Contains(v.Object, "index ix") {
					got = append(got, v.Object+": "+v.Reason)
				}
			}
			if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)) {
				t.Fatalf("violations %q, want one mentioning %q", got, tc.want)
			}
		})
	}
}
