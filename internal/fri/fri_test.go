package fri

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

func TestProtoRoundTrip(t *testing.T) {
	vs := chainAB(t)
	vs[1].Removed = bm32(4, 5)
	ix, err := FromProto(ToProto(vs))
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Versions) != len(vs) {
		t.Fatalf("%d versions, want %d", len(ix.Versions), len(vs))
	}
	for i, v := range ix.Versions {
		w := vs[i]
		if v.DatasetVersion != w.DatasetVersion || len(v.Groups) != len(w.Groups) {
			t.Fatalf("version %d: %+v, want %+v", i, v, w)
		}
		if (w.Removed == nil) != (v.Removed == nil) || (w.Removed != nil && !w.Removed.Equals(v.Removed)) {
			t.Errorf("version %d removed = %v, want %v", i, v.Removed, w.Removed)
		}
		for gi, g := range v.Groups {
			if !g.Changed.Equals(w.Groups[gi].Changed) {
				t.Errorf("version %d group %d: changed differs", i, gi)
			}
		}
	}
	// A version without removed fragments writes no field 4, so the bytes
	// are exactly what Lance itself would write.
	p := ToProto(vs)
	if p.Versions[0].RemovedFragments != nil || p.Versions[1].RemovedFragments == nil {
		t.Errorf("removed_fragments written where empty or missing where set")
	}
}

// Versions come back sorted by dataset_version, as Lance sorts them when
// it writes.
func TestFromProtoSortsVersions(t *testing.T) {
	p := ToProto(chainAB(t))
	p.Versions[0], p.Versions[2] = p.Versions[2], p.Versions[0]
	ix, err := FromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{10, 20, 30} {
		if ix.Versions[i].DatasetVersion != want {
			t.Errorf("version %d at %d, want %d", i, ix.Versions[i].DatasetVersion, want)
		}
	}
}

func TestFromProtoRejectsCorruptBytes(t *testing.T) {
	for name, mutate := range map[string]func(p *pb.FragmentReuseIndexDetails_InlineContent){
		"garbage changed_row_addrs": func(p *pb.FragmentReuseIndexDetails_InlineContent) {
			p.Versions[0].Groups[0].ChangedRowAddrs = []byte("not a roaring bitmap")
		},
		"truncated changed_row_addrs": func(p *pb.FragmentReuseIndexDetails_InlineContent) {
			b := p.Versions[0].Groups[0].ChangedRowAddrs
			p.Versions[0].Groups[0].ChangedRowAddrs = b[:len(b)-3]
		},
		"huge bucket count": func(p *pb.FragmentReuseIndexDetails_InlineContent) {
			b := append([]byte{}, p.Versions[0].Groups[0].ChangedRowAddrs...)
			copy(b, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
			p.Versions[0].Groups[0].ChangedRowAddrs = b
		},
		"garbage removed_fragments": func(p *pb.FragmentReuseIndexDetails_InlineContent) {
			p.Versions[0].RemovedFragments = []byte{1, 2, 3}
		},
		"nil group": func(p *pb.FragmentReuseIndexDetails_InlineContent) {
			p.Versions[0].Groups = append(p.Versions[0].Groups, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := ToProto(chainAB(t))
			mutate(p)
			if _, err := FromProto(p); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestAppendVersionInlineAndLoad(t *testing.T) {
	ctx := context.Background()
	b := mem(t)
	vs := chainAB(t)
	now := time.UnixMilli(1_700_000_000_123)
	m1, keys, err := AppendVersion(ctx, b, nil, nil, vs[0], now)
	if err != nil || len(keys) != 0 {
		t.Fatalf("AppendVersion: %v, keys %v", err, keys)
	}
	if m1.GetName() != meta.FragReuseIndexName || m1.GetDatasetVersion() != 10 || m1.GetCreatedAt() != 1_700_000_000_123 || m1.GetIndexVersion() != 0 {
		t.Errorf("metadata %v", m1)
	}
	if bm, _, _ := meta.FragmentBitmap(m1); !bm.Equals(bm32(10)) {
		t.Errorf("bitmap = %v, want the new fragments [10]", bm.ToArray())
	}
	if len(m1.GetFields()) != 0 || m1.GetIndexDetails().GetTypeUrl() != meta.TypeURLFragReuse {
		t.Errorf("fields %v, type %q", m1.GetFields(), m1.GetIndexDetails().GetTypeUrl())
	}
	prev, err := Load(ctx, b, manifestFile(11, nil, m1, seg("id_idx", 3, 1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	m1.IndexVersion = proto.Int32(3)
	m2, _, err := AppendVersion(ctx, b, prev, m1, vs[1], now)
	if err != nil {
		t.Fatal(err)
	}
	if meta.UUIDString(m2.GetUuid()) == meta.UUIDString(m1.GetUuid()) {
		t.Error("the new FRI kept the old uuid (LanceDB caches indexes by uuid)")
	}
	if m2.GetIndexVersion() != 3 {
		t.Errorf("index_version %d, want the previous 3", m2.GetIndexVersion())
	}
	// An FRI of an index_version compactord does not implement (Lance 13
	// writes 1, with transitions this reader does not decode) is refused
	// on load, before its content is trusted.
	if _, err := Load(ctx, b, manifestFile(21, nil, m2)); !errors.Is(err, meta.ErrUnsupportedFeature) {
		t.Fatalf("Load of an index_version 3 FRI: %v, want ErrUnsupportedFeature", err)
	}
	m2.IndexVersion = proto.Int32(0)
	got, err := Load(ctx, b, manifestFile(21, nil, m2))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Versions) != 2 || got.Versions[1].DatasetVersion != 20 {
		t.Fatalf("loaded %d versions", len(got.Versions))
	}
	if a, ok := got.Remapper(0)(addr(1, 1)); !ok || a != addr(20, 0) {
		t.Errorf("loaded chain remaps 1:1 to %#x,%v", a, ok)
	}
	// A version before the newest is refused.
	if _, _, err := AppendVersion(ctx, b, got, m2, vs[0], now); err == nil {
		t.Error("a version older than the newest was appended")
	}
	// No FRI: nil, nil.
	if ix, err := Load(ctx, b, manifestFile(3, nil, seg("id_idx", 3, 1))); ix != nil || err != nil {
		t.Errorf("Load without FRI = %v, %v", ix, err)
	}
	// Two FRIs is not a table Lance writes.
	if _, err := Load(ctx, b, manifestFile(21, nil, m1, m2)); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Errorf("two FRIs: %v", err)
	}
}

// Above 200 KiB Lance moves the details to _indices/{uuid}/details.binpb;
// Load reads them back from there.
func TestAppendVersionExternal(t *testing.T) {
	ctx := context.Background()
	b := mem(t)
	var groups []Group
	for i := uint64(0); i < 3000; i++ {
		// Every other row deleted makes each group's bitmap large.
		var del []uint32
		for off := uint32(0); off < 64; off += 2 {
			del = append(del, off)
		}
		groups = append(groups, grp(t, []OldFragment{old(i, 64, del...)}, nf(10000+i, 32)))
	}
	v := Version{DatasetVersion: 7, Groups: groups}
	m, keys, err := AppendVersion(ctx, b, nil, nil, v, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := &pb.FragmentReuseIndexDetails{}
	if err := proto.Unmarshal(m.GetIndexDetails().GetValue(), d); err != nil {
		t.Fatal(err)
	}
	ext := d.GetExternal()
	if ext == nil || ext.GetPath() != DetailsFileName || ext.GetOffset() != 0 || ext.GetSize() <= MaxInlineBytes {
		t.Fatalf("details %v, want external above %d bytes", d, MaxInlineBytes)
	}
	wantKey := meta.IndexDir(meta.UUIDString(m.GetUuid())) + DetailsFileName
	if len(keys) != 1 || keys[0] != wantKey {
		t.Fatalf("keys %v, want [%s]", keys, wantKey)
	}
	ix, err := Load(ctx, b, manifestFile(8, nil, m))
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := ix.Remapper(0)(addr(2999, 63)); !ok || a != addr(12999, 31) {
		t.Errorf("external chain remaps 2999:63 to %#x,%v", a, ok)
	}
}
