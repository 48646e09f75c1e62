package cleanup

import (
	"reflect"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

var t0 = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)

func ver(v uint64, age time.Duration, files ...string) Version {
	r := Refs{}
	for _, f := range files {
		if len(f) > 4 && f[:4] == "idx:" {
			r.Indices = append(r.Indices, f[4:])
		} else {
			r.Files = append(r.Files, f)
		}
	}
	return Version{Version: v, Key: meta.ManifestKey(meta.NamingV2, v), Bytes: 100, Timestamp: t0.Add(-age), Refs: r}
}

func obj(key string, age time.Duration) storage.Attrs {
	return storage.Attrs{Key: key, Size: 10, ModTime: t0.Add(-age)}
}

func TestPlanVersions(t *testing.T) {
	h := time.Hour
	five := []Version{ver(1, 50*h), ver(2, 40*h), ver(3, 30*h), ver(4, 20*h), ver(5, 10*h)}
	cases := []struct {
		name string
		vs   []Version
		tags map[uint64][]string
		wm   inflight.Watermark
		o    Options
		want map[uint64]string
	}{
		{"older-than 0 is exact: all but the latest go", five, nil, inflight.Watermark{}, Options{RetainVersions: 1},
			map[uint64]string{1: ReasonOld, 2: ReasonOld, 3: ReasonOld, 4: ReasonOld, 5: ReasonLatest}},
		{"retain count", five, nil, inflight.Watermark{}, Options{RetainVersions: 3},
			map[uint64]string{1: ReasonOld, 2: ReasonOld, 3: ReasonRetainedCount, 4: ReasonRetainedCount, 5: ReasonLatest}},
		{"younger than", five, nil, inflight.Watermark{}, Options{RetainVersions: 1, OlderThan: 35 * h},
			map[uint64]string{1: ReasonOld, 2: ReasonOld, 3: ReasonYoungerThan, 4: ReasonYoungerThan, 5: ReasonLatest}},
		{"exact boundary: committed at the cutoff is kept", five, nil, inflight.Watermark{}, Options{RetainVersions: 1, OlderThan: 40 * h},
			map[uint64]string{1: ReasonOld, 2: ReasonYoungerThan, 3: ReasonYoungerThan, 4: ReasonYoungerThan, 5: ReasonLatest}},
		{"tagged old version kept", five, map[uint64][]string{2: {"keep"}, 5: {"head"}}, inflight.Watermark{}, Options{RetainVersions: 1},
			map[uint64]string{1: ReasonOld, 2: ReasonTagged, 3: ReasonOld, 4: ReasonOld, 5: ReasonLatest}},
		{"in-flight read version", five, nil, inflight.Watermark{ReadVersion: 3, Started: t0}, Options{RetainVersions: 1},
			map[uint64]string{1: ReasonOld, 2: ReasonOld, 3: ReasonInFlight, 4: ReasonInFlight, 5: ReasonLatest}},
		{"latest is kept even when old and alone", []Version{ver(7, 1000*h)}, nil, inflight.Watermark{}, Options{RetainVersions: 1},
			map[uint64]string{7: ReasonLatest}},
		{"no timestamp keeps", []Version{{Version: 1, Key: "k1"}, ver(2, h)}, nil, inflight.Watermark{}, Options{RetainVersions: 1},
			map[uint64]string{1: ReasonNoTimestamp, 2: ReasonLatest}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PlanCleanup(State{Versions: c.vs, Tags: c.tags, Watermark: c.wm}, c.o, t0)
			got := map[uint64]string{}
			for _, d := range p.Versions {
				got[d.Version] = d.Reason
				if d.Delete != (d.Reason == ReasonOld) {
					t.Errorf("version %d: delete=%v with reason %s", d.Version, d.Delete, d.Reason)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestPlanFiles(t *testing.T) {
	h := time.Hour
	day := 24 * h
	vs := []Version{
		ver(1, 30*day, "data/a.lance", "_transactions/0-a.txn", "idx:u1"),
		ver(2, 20*day, "data/a.lance", "data/b.lance", "_deletions/0-1-7.arrow", "_transactions/1-b.txn", "idx:u1", "idx:u2"),
		ver(3, 10*day, "data/b.lance", "data/c.lance", "_transactions/2-c.txn", "idx:u2"),
	}
	objs := []storage.Attrs{
		obj("data/a.lance", 30*day),           // only v1, v2 (deleted)
		obj("data/b.lance", 20*day),           // v3 keeps
		obj("data/c.lance", 10*day),           // v3 keeps
		obj("_deletions/0-1-7.arrow", 20*day), // only v2
		obj("_transactions/0-a.txn", 30*day),  // only v1
		obj("_transactions/2-c.txn", 10*day),  // v3
		obj("_indices/u1/page_data.lance", 30*day),
		obj("_indices/u2/page_data.lance", 20*day),
		obj("data/orphan-old.lance", 8*day),     // unreferenced, older than min age
		obj("data/orphan-young.lance", 6*day),   // unreferenced, younger
		obj("_indices/u9/x.lance", 8*day),       // unreferenced index dir
		obj("data/late.lance", h),               // only deleted... see below
		obj("data/notes.txt", 100*day),          // not a Lance file
		obj("_indices/stray", 100*day),          // not in a uuid dir
		obj("_versions/.tmp_x", 8*day),          // stale temp manifest
		obj("_versions/.tmp_y", h),              // young temp manifest
		obj(meta.HintKey, 100*day),              // never
		obj("_versions/d123.manifest", 100*day), // detached
		obj("_transactions/9-z.txn", 100*day),   // referenced by the detached one
	}
	// data/late.lance: referenced only by v1 but modified after the oldest
	// kept version (v3) and younger than min age.
	vs[0].Refs.Files = append(vs[0].Refs.Files, "data/late.lance")
	st := State{Versions: vs, Objects: objs, Detached: []Version{{Key: "_versions/d123.manifest", Refs: Refs{Files: []string{"_transactions/9-z.txn"}}}}}
	p := PlanCleanup(st, Options{RetainVersions: 1, MinAge: 7 * day}, t0)
	want := map[string]string{
		"data/a.lance":                ReasonReferencedOnlyDeleted,
		"data/b.lance":                ReasonReferencedByKept,
		"data/c.lance":                ReasonReferencedByKept,
		"_deletions/0-1-7.arrow":      ReasonReferencedOnlyDeleted,
		"_transactions/0-a.txn":       ReasonReferencedOnlyDeleted,
		"_transactions/2-c.txn":       ReasonReferencedByKept,
		"_indices/u1/page_data.lance": ReasonReferencedOnlyDeleted,
		"_indices/u2/page_data.lance": ReasonReferencedByKept,
		"data/orphan-old.lance":       ReasonUnrefOld,
		"data/orphan-young.lance":     ReasonUnrefYoung,
		"_indices/u9/x.lance":         ReasonUnrefOld,
		"data/late.lance":             ReasonNewerThanOldestKept,
		"data/notes.txt":              ReasonNotCollected,
		"_indices/stray":              ReasonNotCollected,
		"_versions/.tmp_x":            ReasonUnrefOld,
		"_versions/.tmp_y":            ReasonUnrefYoung,
		meta.HintKey:                  ReasonVersionHint,
		"_versions/d123.manifest":     ReasonDetachedManifest,
		"_transactions/9-z.txn":       ReasonReferencedByDetached,
	}
	got := map[string]string{}
	for _, f := range p.Files {
		got[f.Key] = f.Reason
		if f.Delete != (f.Reason == ReasonReferencedOnlyDeleted || f.Reason == ReasonUnrefOld) {
			t.Errorf("%s: delete=%v with reason %s", f.Key, f.Delete, f.Reason)
		}
	}
	if !reflect.DeepEqual(got, want) {
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: got %q, want %q", k, got[k], w)
			}
		}
	}
	if len(p.Files) != len(objs) {
		t.Errorf("plan lists %d files, want every one of %d", len(p.Files), len(objs))
	}
	// min-age 0 deletes young unreferenced files, but never referenced ones.
	p = PlanCleanup(st, Options{RetainVersions: 1}, t0)
	for _, f := range p.Files {
		if f.Key == "data/orphan-young.lance" && !f.Delete {
			t.Errorf("min-age 0: %s kept (%s)", f.Key, f.Reason)
		}
		if f.Key == "data/late.lance" && !f.Delete {
			t.Errorf("min-age 0: %s kept (%s)", f.Key, f.Reason)
		}
		if f.Key == "data/b.lance" && f.Delete {
			t.Errorf("min-age 0: referenced %s deleted", f.Key)
		}
	}
	// An in-flight job protects unreferenced files written since it started.
	st.Watermark = inflight.Watermark{Started: t0.Add(-9 * day), ReadVersion: 3}
	p = PlanCleanup(st, Options{RetainVersions: 1, MinAge: 7 * day}, t0)
	for _, f := range p.Files {
		if f.Key == "data/orphan-old.lance" && f.Reason != ReasonUnrefInFlight {
			t.Errorf("with an in-flight job: %s reason %s", f.Key, f.Reason)
		}
	}
}
