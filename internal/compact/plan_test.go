package compact

import (
	"fmt"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// frag is a fragment of physical rows with deleted rows.
type frag struct{ id, rows, deleted uint64 }

func manifestOf(frags []frag, indexes map[string][]uint32) *meta.ManifestFile {
	m := &pb.Manifest{Version: 7}
	for _, f := range frags {
		df := &pb.DataFragment{Id: f.id, PhysicalRows: f.rows, Files: []*pb.DataFile{{Path: fmt.Sprintf("%d.lance", f.id)}}}
		if f.deleted > 0 {
			df.DeletionFile = &pb.DeletionFile{NumDeletedRows: f.deleted}
		}
		m.Fragments = append(m.Fragments, df)
	}
	out := &meta.ManifestFile{Manifest: m}
	for name, ids := range indexes {
		u, _ := meta.NewUUID()
		out.Indices = append(out.Indices, &pb.IndexMetadata{Uuid: u, Name: name, FragmentBitmap: meta.EncodeBitmap(roaring.BitmapOf(ids...)),
			IndexDetails: &anypb.Any{TypeUrl: meta.TypeURLBTree}})
	}
	return out
}

// deferredOptions are the defaults with the remap deferred to the FRI.
func deferredOptions() Options {
	o := DefaultOptions()
	o.DeferRemap = true
	return o
}

// groupsOf renders a plan as "0,1 2" (groups by space, ids by comma).
func groupsOf(p *Plan) string {
	var gs []string
	for _, g := range p.Groups {
		var ids []string
		for _, f := range g.Old() {
			ids = append(ids, fmt.Sprint(f.GetId()))
		}
		gs = append(gs, strings.Join(ids, ","))
	}
	return strings.Join(gs, " ")
}

func TestPlanCompaction(t *testing.T) {
	small := func(id uint64) frag { return frag{id, 100, 0} }
	big := func(id uint64) frag { return frag{id, 1000, 0} }
	o := DefaultOptions()
	o.TargetRowsPerFragment = 1000
	cases := []struct {
		name    string
		frags   []frag
		indexes map[string][]uint32
		reuse   []ReuseGroup
		opts    func(*Options)
		want    string
	}{
		{name: "empty", want: ""},
		{name: "one small fragment has no neighbour", frags: []frag{small(0)}, want: ""},
		{name: "small neighbours merge", frags: []frag{small(0), small(1), small(2)}, want: "0,1,2"},
		{name: "a big fragment splits runs", frags: []frag{small(0), small(1), big(2), small(3), small(4)}, want: "0,1 3,4"},
		{name: "a lone small fragment between big ones stays", frags: []frag{big(0), small(1), big(2)}, want: ""},
		{name: "deletions above the threshold rewrite a fragment alone", frags: []frag{big(0), {1, 1000, 101}, big(2)}, want: "1"},
		{name: "deletions at the threshold do not", frags: []frag{big(0), {1, 1000, 100}, big(2)}, want: ""},
		{name: "materialize off ignores deletions", frags: []frag{big(0), {1, 1000, 500}, big(2)},
			opts: func(o *Options) { o.MaterializeDeletions = false }, want: ""},
		{name: "deleted big fragment joins small neighbours", frags: []frag{{0, 1000, 500}, small(1)}, want: "0,1"},
		{name: "split for size", frags: []frag{{0, 600, 0}, {1, 600, 0}, {2, 600, 0}, {3, 600, 0}, {4, 100, 0}}, want: "0,1 2,3,4"},
		{name: "the remainder joins the last group", frags: []frag{{0, 900, 0}, {1, 900, 0}, {2, 200, 0}}, want: "0,1,2"},
		{name: "split uses live rows", frags: []frag{{0, 500, 0}, {1, 990, 890}, {2, 500, 0}, {3, 950, 0}}, want: "0,1,2,3"},
		{name: "index sets split bins", frags: []frag{small(0), small(1), small(2), small(3)},
			indexes: map[string][]uint32{"a": {0, 1}}, want: "0,1 2,3"},
		{name: "two indexes, the same coverage", frags: []frag{small(0), small(1), small(2)},
			indexes: map[string][]uint32{"a": {0, 1, 2}, "b": {0, 1}}, want: "0,1"},
		{name: "system indexes do not count", frags: []frag{small(0), small(1)},
			indexes: map[string][]uint32{meta.FragReuseIndexName: {0}}, want: "0,1"},
		{name: "bitmaps read through the FRI", frags: []frag{small(5), small(6), small(7)},
			indexes: map[string][]uint32{"a": {0, 1, 6}}, reuse: []ReuseGroup{{Old: []uint64{0, 1}, New: []uint64{5}}}, want: "5,6"},
		{name: "only the chosen fragments", frags: []frag{small(0), small(1), small(2), small(3)},
			opts: func(o *Options) { o.Fragments = []uint64{1, 2} }, want: "1,2"},
		{name: "manifest order, ids ascending in a group", frags: []frag{small(9), small(3), small(4)}, want: "3,4,9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oo := o
			if tc.opts != nil {
				tc.opts(&oo)
			}
			p, err := PlanCompaction(manifestOf(tc.frags, tc.indexes), tc.reuse, oo)
			if err != nil {
				t.Fatal(err)
			}
			if got := groupsOf(p); got != tc.want {
				t.Errorf("groups %q, want %q", got, tc.want)
			}
			if p.ReadVersion != 7 {
				t.Errorf("read version %d", p.ReadVersion)
			}
		})
	}
}

func TestPlanSkipsAndErrors(t *testing.T) {
	o := DefaultOptions()
	mf := manifestOf([]frag{{0, 10, 0}, {1, 10, 0}, {2, 10, 0}}, nil)
	mf.Manifest.Fragments[1].Files = append(mf.Manifest.Fragments[1].Files, &pb.DataFile{Path: "x.lance"})
	p, err := PlanCompaction(mf, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if groupsOf(p) != "" || len(p.Skips) != 1 || p.Skips[0].Fragment != 1 {
		t.Fatalf("plan %q skips %+v: want fragment 1 skipped, which leaves 0 and 2 apart", groupsOf(p), p.Skips)
	}
	bad := manifestOf([]frag{{0, 10, 11}}, nil)
	if _, err := PlanCompaction(bad, nil, o); err == nil {
		t.Error("more deleted than physical rows: no error")
	}
	o.TargetRowsPerFragment = 0
	if _, err := PlanCompaction(mf, nil, o); err == nil {
		t.Error("target 0: no error")
	}
}

func TestWorkers(t *testing.T) {
	frag := func(size uint64, deleted bool) Candidate {
		f := &pb.DataFragment{Files: []*pb.DataFile{{FileSizeBytes: size}}}
		if deleted {
			f.DeletionFile = &pb.DeletionFile{NumDeletedRows: 1}
		}
		return Candidate{Fragment: f}
	}
	plan := func(gs ...[]Candidate) *Plan {
		p := &Plan{}
		for _, g := range gs {
			p.Groups = append(p.Groups, Group{Candidates: g})
		}
		return p
	}
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		p    *Plan
		par  int
		want int
	}{
		{"small rewrite runs one group at a time", plan([]Candidate{frag(80*mib, true)}, []Candidate{frag(72*mib, true)}), 4, 1},
		{"one worker per BytesPerWorker", plan([]Candidate{frag(300*mib, true)}, []Candidate{frag(300*mib, true)}, []Candidate{frag(10*mib, true)}), 8, 3},
		{"capped by par", plan([]Candidate{frag(4096*mib, true)}, []Candidate{frag(4096*mib, true)}), 2, 2},
		{"copies do not count", plan([]Candidate{frag(1024*mib, false), frag(10*mib, true)}, []Candidate{frag(1024*mib, false)}), 4, 1},
		{"copy only: all of par", plan([]Candidate{frag(10*mib, false)}, []Candidate{frag(10*mib, false)}), 4, 4},
		{"unknown size: all of par", plan([]Candidate{frag(0, true)}, []Candidate{frag(10*mib, true)}), 3, 3},
	} {
		if got := workers(c.p, c.par); got != c.want {
			t.Errorf("%s: workers = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestPlanLeavesOutUnremappableIndexes: a fragment covered by an index
// compactord cannot remap (vector, a kind it does not know) is left out with its reason in both remap modes, and the
// fragments next to it still compact; an index of such a kind without a
// fragment bitmap covers every fragment.
func TestPlanLeavesOutUnremappableIndexes(t *testing.T) {
	frags := []frag{{0, 100, 50}, {1, 100, 0}, {2, 100, 0}, {3, 100, 0}, {4, 100, 50}}
	for _, kind := range []struct{ url, name string }{
		{"/lance.index.pb.VectorIndexDetails", "vector"},
		{"", "unknown"},
	} {
		for _, deferred := range []bool{false, true} {
			o := DefaultOptions()
			o.TargetRowsPerFragment = 1000
			o.DeferRemap = deferred
			mf := manifestOf(frags, map[string][]uint32{"id_idx": {0, 1, 2, 3, 4}})
			u, _ := meta.NewUUID()
			vec := &pb.IndexMetadata{Uuid: u, Name: "vec_idx", FragmentBitmap: meta.EncodeBitmap(roaring.BitmapOf(0, 1))}
			if kind.url != "" {
				vec.IndexDetails = &anypb.Any{TypeUrl: kind.url}
			}
			mf.Indices = append(mf.Indices, vec)
			p, err := PlanCompaction(mf, nil, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := groupsOf(p); got != "2,3,4" {
				t.Errorf("%s, deferred %v: groups %q, want 2,3,4", kind.name, deferred, got)
			}
			if len(p.Skips) != 2 || p.Skips[0].Fragment != 0 || p.Skips[1].Fragment != 1 {
				t.Fatalf("%s, deferred %v: skips %+v, want fragments 0 and 1", kind.name, deferred, p.Skips)
			}
			for _, s := range p.Skips {
				if s.Code != SkipIndex || !strings.Contains(s.Reason, `"vec_idx"`) || !strings.Contains(s.Reason, kind.name) {
					t.Errorf("%s: skip %+v: want class %s naming vec_idx and its kind", kind.name, s, SkipIndex)
				}
			}
			if c := p.SkipCounts(); c[SkipIndex] != 2 || c[SkipFiles] != 0 || len(c) != len(SkipCodes) {
				t.Errorf("skip counts %v", c)
			}
		}
	}
	// Without a bitmap, a vector index covers every fragment.
	mf := manifestOf(frags, nil)
	u, _ := meta.NewUUID()
	mf.Indices = append(mf.Indices, &pb.IndexMetadata{Uuid: u, Name: "vec_idx", IndexDetails: &anypb.Any{TypeUrl: "/lance.index.pb.VectorIndexDetails"}})
	mf.Manifest.MaxFragmentId = proto.Uint32(4)
	p, err := PlanCompaction(mf, nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if groupsOf(p) != "" || len(p.Skips) != 5 {
		t.Errorf("bitmap-less vector index: groups %q, skips %+v; want none, and all five candidates skipped", groupsOf(p), p.Skips)
	}
	// A btree without a bitmap cannot be remapped inline; deferred, the
	// FRI covers it.
	mf.Indices[0].IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLBTree}
	if p, err = PlanCompaction(mf, nil, DefaultOptions()); err != nil || groupsOf(p) != "" || len(p.Skips) != 5 ||
		!strings.Contains(p.Skips[0].Reason, "no fragment bitmap") {
		t.Errorf("bitmap-less btree, inline: groups %q, skips %+v (%v); want all five skipped", groupsOf(p), p.Skips, err)
	}
	if p, err = PlanCompaction(mf, nil, deferredOptions()); err != nil || groupsOf(p) != "0,1,2,3,4" || len(p.Skips) != 0 {
		t.Errorf("bitmap-less btree, deferred: groups %q, skips %+v (%v); want one group", groupsOf(p), p.Skips, err)
	}
}

// TestPlanLeavesOutUnreadableFullText: a full-text segment compactord
// remaps is left alone, with the reason, when PlanLatest found its
// format unreadable (Options.Unremappable); without such a reason its
// fragments compact.
func TestPlanLeavesOutUnreadableFullText(t *testing.T) {
	frags := []frag{{0, 100, 50}, {1, 100, 0}, {2, 100, 0}}
	for _, reason := range []string{"", "metadata.lance: with_position is set (100% unsupported)"} {
		o := DefaultOptions()
		o.TargetRowsPerFragment = 1000
		mf := manifestOf(frags, nil)
		u, id := meta.NewUUID()
		mf.Indices = append(mf.Indices, &pb.IndexMetadata{Uuid: u, Name: "doc_idx", FragmentBitmap: meta.EncodeBitmap(roaring.BitmapOf(0, 1, 2)),
			IndexDetails: &anypb.Any{TypeUrl: "/lance.table.InvertedIndexDetails"}})
		o.Unremappable = map[string]string{}
		if reason != "" {
			o.Unremappable[id] = reason
		}
		p, err := PlanCompaction(mf, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case reason == "" && (groupsOf(p) != "0,1,2" || len(p.Skips) != 0):
			t.Errorf("readable: groups %q, skips %+v; want 0,1,2 and none", groupsOf(p), p.Skips)
		case reason != "" && (groupsOf(p) != "" || len(p.Skips) != 3 || !strings.Contains(p.Skips[0].Reason, reason) || p.Skips[0].Code != SkipIndex):
			t.Errorf("unreadable: groups %q, skips %+v; want none, all three skipped with %q", groupsOf(p), p.Skips, reason)
		}
	}
}
