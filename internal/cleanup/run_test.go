package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func open(t *testing.T, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// snapshot is every file under dir with size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%d@%d", fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReadable fails unless every remaining version's referenced files
// exist: what LanceDB needs to open it.
func checkReadable(t *testing.T, b storage.Bucket, now time.Time) {
	t.Helper()
	ctx := context.Background()
	st, err := Load(ctx, b, 4, now)
	if err != nil {
		t.Fatalf("load after cleanup: %v", err)
	}
	have := map[string]bool{}
	idx := map[string]bool{}
	for _, dir := range []string{meta.DataDir, meta.DeletionsDir, meta.TransactionsDir, meta.IndicesDir} {
		_ = b.List(ctx, dir, func(a storage.Attrs) error {
			have[a.Key] = true
			if k, u := classify(a.Key); k == kindIndex {
				idx[u] = true
			}
			return nil
		})
	}
	for _, v := range st.Versions {
		for _, f := range v.Refs.Files {
			if !have[f] {
				t.Errorf("version %d references %s, which is gone", v.Version, f)
			}
		}
		for _, u := range v.Refs.Indices {
			if !idx[u] {
				t.Errorf("version %d references index dir %s, which is gone", v.Version, u)
			}
		}
	}
}

func latestTime(t *testing.T, b storage.Bucket) time.Time {
	t.Helper()
	f, _, err := meta.ReadLatest(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return f.Manifest.GetTimestamp().AsTime()
}

func TestCorpusDryRunChangesNothing(t *testing.T) {
	names, err := lancedb.CorpusNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, name)
			b := open(t, dir)
			now := latestTime(t, b).Add(time.Hour)
			before := snapshot(t, dir)
			res, err := Run(context.Background(), b, Config{Options: Options{RetainVersions: 1}, Concurrency: 4, DryRun: true}, now)
			if err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
				t.Fatalf("dry run changed the table")
			}
			// Every version and every collected file is in the plan, with a
			// reason.
			for _, v := range res.Plan.Versions {
				if v.Reason == "" {
					t.Errorf("version %d without a reason", v.Version)
				}
			}
			listed := map[string]bool{}
			for _, f := range res.Plan.Files {
				listed[f.Key] = true
				if f.Reason == "" {
					t.Errorf("%s without a reason", f.Key)
				}
			}
			for k := range before {
				collected := false
				for _, d := range Collected {
					collected = collected || len(k) >= len(d) && k[:len(d)] == d
				}
				_, _, isManifest := meta.ParseManifestKey(k)
				if collected && !isManifest && !listed[k] {
					t.Errorf("%s is missing from the plan", k)
				}
			}
			if name == "tagged" {
				for _, v := range res.Plan.Versions {
					if (v.Version == 1 || v.Version == 2) && (v.Delete || v.Reason != ReasonTagged) {
						t.Errorf("tagged version %d: delete=%v reason=%s", v.Version, v.Delete, v.Reason)
					}
				}
			}
		})
	}
}

// TestCrashAtEveryDelete fails the k-th delete of a cleanup, for every k,
// and checks that every version left still has all its files; a rerun
// then finishes.
func TestCrashAtEveryDelete(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"compacted", "indexed", "deletes_arrow"} {
		t.Run(name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, name)
			b := open(t, dir)
			now := latestTime(t, b).Add(time.Hour)
			cfg := Config{Options: Options{RetainVersions: 1}, Concurrency: 1}
			plan, err := Run(ctx, b, Config{Options: cfg.Options, Concurrency: 1, DryRun: true}, now)
			if err != nil {
				t.Fatal(err)
			}
			total := plan.Plan.DeleteVersions + plan.Plan.DeleteFiles
			if total < 3 {
				t.Fatalf("only %d deletions planned; the test needs a table with history", total)
			}
			for k := 1; k <= total; k++ {
				dir := lancedb.CorpusDir(t, name)
				fb := faults.NewFaulty(open(t, dir))
				fb.Add(faults.Fault{Ops: []storage.Op{storage.OpDelete}, Nth: k, Action: faults.Fail(nil)})
				_, err := Run(ctx, fb, cfg, now)
				if !errors.Is(err, faults.ErrInjected) {
					t.Fatalf("crash at delete %d: got %v", k, err)
				}
				fb.Clear()
				checkReadable(t, fb, now)
				res, err := Run(ctx, fb, cfg, now)
				if err != nil {
					t.Fatalf("rerun after crash at %d: %v", k, err)
				}
				checkReadable(t, fb, now)
				if res.Plan.Latest != plan.Plan.Latest {
					t.Fatalf("latest changed")
				}
			}
		})
	}
}

type readback map[uint64]map[int64]string

// readVersions reads every version in vs with LanceDB.
func readVersions(t *testing.T, uri, table string, vs []uint64) readback {
	t.Helper()
	var steps []lancedb.Step
	for _, v := range vs {
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Version: v, LSM: lancedb.Bool(false)}))
	}
	res := lancedb.MustRun(t, lancedb.Program{URI: uri, Table: table, Steps: steps})
	out := readback{}
	for i, v := range vs {
		rows, err := res.Rows(i)
		if err != nil {
			t.Fatal(err)
		}
		m, err := lancedb.RowsByID(rows)
		if err != nil {
			t.Fatal(err)
		}
		out[v] = m
	}
	return out
}

func lanceVersions(t *testing.T, uri, table string) []uint64 {
	t.Helper()
	res := lancedb.MustRun(t, lancedb.Program{URI: uri, Table: table, Steps: []lancedb.Step{lancedb.ListVersions()}})
	vi, err := res.Versions(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, v := range vi {
		out = append(out, v.Version)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestLanceDBReadsRetainedVersions builds a table with LanceDB (appends,
// deletes, an index, an update, a tag on an old version), cleans it up,
// and reads every retained version back row for row.
func TestLanceDBReadsRetainedVersions(t *testing.T) {
	lancedb.Require(t)
	ctx := context.Background()
	uri := t.TempDir()
	steps := []lancedb.Step{
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)), // v1
		lancedb.Add(lancedb.BasicRows(10, 20)),                        // v2
		lancedb.Delete("id >= 3 AND id < 6"),                          // v3
		lancedb.CreateIndex("id", "btree", "id_idx"),                  // v4
		lancedb.Add(lancedb.BasicRows(20, 30)),                        // v5
		lancedb.Update("id = 12", map[string]string{"s": "'upd'"}),    // v6
		lancedb.Delete("id = 25"),                                     // v7
		lancedb.TagCreate("keep", 3),
	}
	lancedb.MustRun(t, lancedb.Program{URI: uri, Table: "t", Steps: steps})
	dir := filepath.Join(uri, "t.lance")
	all := lanceVersions(t, uri, "t")
	before := readVersions(t, uri, "t", all)
	latest := all[len(all)-1]

	// Orphans: one young, one older than the min age.
	for name, age := range map[string]time.Duration{"young": time.Hour, "old": 8 * 24 * time.Hour} {
		p := filepath.Join(dir, "data", "orphan-"+name+".lance")
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(-age)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	b := open(t, dir)
	now := time.Now()
	snap := snapshot(t, dir)
	cfg := Config{Options: Options{RetainVersions: 2, MinAge: DefaultMinAge}, Concurrency: 4}
	dry, err := Run(ctx, b, Config{Options: cfg.Options, Concurrency: 4, DryRun: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, snapshot(t, dir)) {
		t.Fatal("dry run changed the table")
	}
	start := time.Now()
	res, err := Run(ctx, b, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup: %d versions, %d files, %d bytes in %s (dry run planned %d+%d)",
		res.DeletedVersions, res.DeletedFiles, res.BytesReclaimed, time.Since(start), dry.Plan.DeleteVersions, dry.Plan.DeleteFiles)
	want := []uint64{3, latest - 1, latest}
	got := lanceVersions(t, uri, "t")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LanceDB lists versions %v after cleanup, want %v", got, want)
	}
	after := readVersions(t, uri, "t", got)
	for _, v := range got {
		if d := lancedb.DiffByID(after[v], before[v]); d != "" {
			t.Errorf("version %d reads differently after cleanup: %s", v, d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "orphan-young.lance")); err != nil {
		t.Errorf("young unreferenced file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "orphan-old.lance")); !os.IsNotExist(err) {
		t.Errorf("old unreferenced file survived: %v", err)
	}
	if res.DeletedVersions != len(all)-3 || res.DeletedFiles == 0 {
		t.Errorf("deleted %d versions, %d files", res.DeletedVersions, res.DeletedFiles)
	}
	// LanceDB's own view: the tag still checks out, and a new write works.
	r := lancedb.MustRun(t, lancedb.Program{URI: uri, Table: "t", Steps: []lancedb.Step{
		lancedb.CheckoutTag("keep"), lancedb.CountRows(""), lancedb.CheckoutLatest(),
		lancedb.Add(lancedb.BasicRows(100, 101)), lancedb.CountRows(""),
	}})
	if n, _ := r.Count(1); n != int64(len(before[3])) {
		t.Errorf("tag keep counts %d rows, want %d", n, len(before[3]))
	}
	if n, _ := r.Count(4); n != int64(len(before[latest])+1) {
		t.Errorf("after an append LanceDB counts %d, want %d", n, len(before[latest])+1)
	}
}

// orderBucket records the manifests deleted, and how many deletes of
// manifests were in flight at once.
type orderBucket struct {
	storage.Bucket
	mu                sync.Mutex
	deleted           []uint64
	inFlight, maxSeen int
}

func (o *orderBucket) Delete(ctx context.Context, key string) error {
	v, _, ok := meta.ParseManifestKey(key)
	if !ok {
		return o.Bucket.Delete(ctx, key)
	}
	o.mu.Lock()
	o.inFlight++
	o.maxSeen = max(o.maxSeen, o.inFlight)
	o.mu.Unlock()
	err := o.Bucket.Delete(ctx, key)
	o.mu.Lock()
	o.inFlight--
	o.deleted = append(o.deleted, v)
	o.mu.Unlock()
	return err
}

// TestVersionsDeletedOldestFirst: a cleanup with a high concurrency still
// deletes manifests one at a time, oldest first, so that a version still
// there always has every newer version there too (meta.Latest's probe
// from a stale hint stops at the head, never below it).
func TestVersionsDeletedOldestFirst(t *testing.T) {
	dir := lancedb.CorpusDir(t, "compacted")
	ob := &orderBucket{Bucket: open(t, dir)}
	now := latestTime(t, ob).Add(time.Hour)
	res, err := Run(context.Background(), ob, Config{Options: Options{RetainVersions: 1}, Concurrency: 8}, now)
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedVersions < 2 || len(ob.deleted) != res.DeletedVersions {
		t.Fatalf("deleted %d versions (%v); the test needs at least 2", res.DeletedVersions, ob.deleted)
	}
	if ob.maxSeen != 1 || !sort.SliceIsSorted(ob.deleted, func(i, j int) bool { return ob.deleted[i] < ob.deleted[j] }) {
		t.Errorf("manifests deleted in order %v with up to %d at once; want oldest first, one at a time", ob.deleted, ob.maxSeen)
	}
}

// TestUnmodelledPrefixKept: Lance 13 keeps fragment-reuse row maps as files
// under _fri/<map_id>/, a prefix cleanup does not model. However old and
// unreferenced they look, a cleanup that deletes versions and files keeps
// them, and its dry run names each with reason unmodelled_prefix.
func TestUnmodelledPrefixKept(t *testing.T) {
	ctx := context.Background()
	dir := lancedb.CorpusDir(t, "compacted")
	b := open(t, dir)
	old := time.Now().Add(-365 * 24 * time.Hour)
	fri := []string{"_fri/7d1c2a4e/rowmap", "_fri/7d1c2a4e/stable_partition.lance"}
	for _, k := range fri {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("row map"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	now := latestTime(t, b).Add(365 * 24 * time.Hour)
	cfg := Config{Options: Options{RetainVersions: 1}, Concurrency: 4, DryRun: true}
	res, err := Run(ctx, b, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileDecision{}
	for _, f := range res.Plan.Files {
		got[f.Key] = f
	}
	for _, k := range fri {
		if f, ok := got[k]; !ok || f.Delete || f.Reason != ReasonUnmodelled {
			t.Errorf("%s in the dry-run plan: %+v (present %v), want kept as %s", k, f, ok, ReasonUnmodelled)
		}
	}
	cfg.DryRun = false
	if res, err = Run(ctx, b, cfg, now); err != nil {
		t.Fatal(err)
	}
	if res.DeletedVersions == 0 && res.DeletedFiles == 0 {
		t.Fatal("the cleanup deleted nothing: the test proves nothing")
	}
	after := snapshot(t, dir)
	for _, k := range fri {
		if _, ok := after[k]; !ok {
			t.Errorf("cleanup deleted %s", k)
		}
	}
}

// TestExecuteRefusesUnmodelledKey: a plan that deletes a key outside the
// collected prefixes stops before its first delete.
func TestExecuteRefusesUnmodelledKey(t *testing.T) {
	ctx := context.Background()
	dir := lancedb.CorpusDir(t, "compacted")
	b := open(t, dir)
	st, err := Load(ctx, b, 4, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "_fri/1/rowmap", []byte("x")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	plan := PlanCleanup(st, Options{RetainVersions: 1}, time.Now().Add(365*24*time.Hour))
	plan.Files = append(plan.Files, FileDecision{Key: "_fri/1/rowmap", Delete: true, Reason: ReasonUnrefOld})
	if err := Execute(ctx, b, st, plan, 4, &Result{}); err == nil {
		t.Fatal("a plan deleting _fri/1/rowmap executed")
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatal("the refused plan changed the table")
	}
}
