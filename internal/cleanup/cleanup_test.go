package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRetained(t *testing.T) {
	versions := []uint64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	ts := map[uint64]time.Time{}
	for _, v := range versions {
		ts[v] = t0.Add(time.Duration(v) * time.Hour)
	}
	now := t0.Add(10 * time.Hour)
	cases := []struct {
		name string
		env  cleanup.Env
		want []uint64
	}{
		{"count only", cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 3}}, []uint64{10, 9, 8}},
		{"latest always", cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 1}}, []uint64{10}},
		{"age keeps younger", cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 1, OlderThan: 150 * time.Minute}}, []uint64{10, 9, 8}},
		{"tagged kept", cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 2}, Tagged: map[uint64]string{3: "release"}}, []uint64{10, 9, 3}},
		{"in-flight read version keeps what follows it", cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 1}, Watermark: inflight.Watermark{ReadVersion: 7, Started: t0}}, []uint64{10, 9, 8, 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each manifest object was written when its version committed.
			tc.env.ModTimes = ts
			keep := cleanup.Retained(versions, ts, tc.env)
			var got []uint64
			for _, v := range versions {
				if keep[v] {
					got = append(got, v)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// INVARIANT: no version younger than table.VersionFloor is deleted, whatever
// the policy. Age is the later of the manifest object's modification time
// and the commit time; an unknown modification time keeps the version.
func TestRetainedKeepsVersionsYoungerThanTheFloor(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	old := now.Add(-table.VersionFloor - time.Second)
	young := now.Add(-table.VersionFloor + time.Second)
	versions := []uint64{6, 5, 4, 3, 2, 1}
	ts := map[uint64]time.Time{
		5: now.Add(-20 * time.Hour), // a job that started long ago committed just now
		4: young,                    // the store's clock lags: the commit time is younger
		3: old,                      // modification time unknown
		2: old,
		1: old,
	}
	mod := map[uint64]time.Time{6: now, 5: young, 4: old, 2: old, 1: old}
	env := cleanup.Env{Now: now, Policy: cleanup.Policy{RetainVersions: 1}, ModTimes: mod, Tagged: map[uint64]string{1: "release"}}
	keep := cleanup.Retained(versions, ts, env)
	var got []uint64
	for _, v := range versions {
		if keep[v] {
			got = append(got, v)
		}
	}
	if want := []uint64{6, 5, 4, 3, 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kept %v, want %v: only version 2 is older than the floor by both clocks and untagged", got, want)
	}
	// Once the floor has passed by every clock, the policy alone decides.
	env.Now = now.Add(table.VersionFloor)
	env.ModTimes[3] = old
	keep = cleanup.Retained(versions, ts, env)
	if len(keep) != 2 || !keep[6] || !keep[1] {
		t.Fatalf("kept %v, want the latest and the tagged version", keep)
	}
}

func TestDecide(t *testing.T) {
	kept := []*pb.Manifest{{
		Version:         5,
		TransactionPath: "_transactions/4-a.txn",
		Fragments:       []*pb.Fragment{{Id: 1, DataFile: &pb.DataFile{Path: "data/live.parquet"}, DeletionFile: &pb.DeletionFile{Path: "_deletions/1-4-x.bin"}}},
		Indices:         []*pb.IndexMetadata{{Name: "ix", Uuid: "u1"}},
	}}
	old, young := t0.Add(-2*time.Hour), t0.Add(-time.Minute)
	objs := []storage.Attrs{
		{Key: "data/live.parquet", ModTime: old, Size: 10},
		{Key: "data/dead.parquet", ModTime: old, Size: 20},
		{Key: "data/fresh.parquet", ModTime: young, Size: 30},
		{Key: "data/during-job.parquet", ModTime: t0.Add(-50 * time.Minute), Size: 40},
		{Key: "_deletions/1-4-x.bin", ModTime: old},
		{Key: "_indices/u1/part-0.parquet", ModTime: old},
		{Key: "_indices/u0/part-0.parquet", ModTime: old, Size: 5},
		{Key: "_indices/u10/part-0.parquet", ModTime: old, Size: 6}, // prefix of u1? no: "u1/" vs "u10/"
		{Key: "_transactions/4-a.txn", ModTime: old},
		{Key: "_transactions/3-b.txn", ModTime: old, Size: 1},
	}
	env := cleanup.Env{Now: t0, Policy: cleanup.Policy{RetainVersions: 1, MinAge: 30 * time.Minute},
		Watermark: inflight.Watermark{Started: t0.Add(-55 * time.Minute), ReadVersion: 5, Live: 1}}
	p := cleanup.Decide([]uint64{5, 4}, map[uint64]string{5: cleanup.KeepLatest}, kept, objs, env)
	var got []string
	for _, a := range p.DeleteFiles {
		got = append(got, a.Key)
	}
	want := []string{"_indices/u0/part-0.parquet", "_indices/u10/part-0.parquet", "_transactions/3-b.txn", "data/dead.parquet"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delete %v\nwant   %v", got, want)
	}
	if p.Bytes != 32 || p.KeptYoung != 2 || len(p.DeleteVersions) != 1 || p.DeleteVersions[0].Key != table.ManifestKey(4) {
		t.Fatalf("plan %+v", p)
	}
}

type fixture struct {
	tb     *ops.Table
	faulty *storage.Faulty
}

func build(t *testing.T, url string, appends int) *fixture {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	f := storage.NewFaulty(b)
	// With transaction files, as tables written before they became
	// optional have them: cleanup collects them too.
	c, err := commit.NewCommitter(commit.Config{TransactionFiles: true}, f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb := ops.NewTable(f, c, nil, nil)
	s, _ := table.ParseSchema("id:int64,v:string", []string{"id"})
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < appends; i++ {
		rows := []table.Row{{int64(2 * i), "a"}, {int64(2*i + 1), "b"}}
		if _, err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
		p, _ := ops.ParsePredicate(s, fmt.Sprintf("id = %d", 2*i+1))
		if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Predicate: p}); err != nil {
			t.Fatal(err)
		}
	}
	// Fragment 0 fully deleted: its data file is referenced only by old versions.
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Fragment: ptr(uint32(0))}); err != nil {
		t.Fatal(err)
	}
	return &fixture{tb: tb, faulty: f}
}

func ptr[T any](v T) *T { return &v }

// checkRetained scans every retained version; a missing referenced file
// fails the scan.
func checkRetained(t *testing.T, b storage.Bucket) []uint64 {
	t.Helper()
	ctx := context.Background()
	vs, err := table.ListVersions(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	tb := ops.NewTable(b, c, nil, nil)
	for _, v := range vs {
		if _, err := tb.Scan(ctx, v, func(table.Row) error { return nil }, nil); err != nil {
			t.Fatalf("retained version %d no longer reads: %v", v, err)
		}
	}
	return vs
}

func listAll(t *testing.T, b storage.Bucket) map[string]bool {
	out := map[string]bool{}
	for _, d := range cleanup.Collected {
		if err := b.List(context.Background(), d, func(a storage.Attrs) error { out[a.Key] = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRunDeletesOutsideRetention(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		fx := build(t, url, 5)
		ctx := context.Background()
		later := time.Now().Add(48 * time.Hour)
		dry, err := cleanup.Run(ctx, fx.tb.Bucket, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 3}, Concurrency: 4, DryRun: true}, later)
		if err != nil {
			t.Fatal(err)
		}
		before := listAll(t, fx.tb.Bucket)
		if vs := checkRetained(t, fx.tb.Bucket); len(vs) != 12 || len(dry.Plan.DeleteVersions) != 9 || len(dry.Plan.DeleteFiles) == 0 {
			t.Fatalf("dry run changed something or planned nothing: %d versions, plan %+v", len(vs), dry.Plan)
		}
		res, err := cleanup.Run(ctx, fx.tb.Bucket, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 3}, Concurrency: 4}, later)
		if err != nil {
			t.Fatal(err)
		}
		if vs := checkRetained(t, fx.tb.Bucket); len(vs) != 3 || vs[0] != 12 {
			t.Fatalf("versions left %v", vs)
		}
		after := listAll(t, fx.tb.Bucket)
		if res.DeletedFiles != len(dry.Plan.DeleteFiles) || len(before)-len(after) != res.DeletedFiles || res.BytesReclaimed != dry.Plan.Bytes || res.BytesReclaimed == 0 {
			t.Fatalf("deleted %d (planned %d), %d→%d files, %d bytes", res.DeletedFiles, len(dry.Plan.DeleteFiles), len(before), len(after), res.BytesReclaimed)
		}
		// A second run has nothing left to do.
		again, err := cleanup.Run(ctx, fx.tb.Bucket, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 3}, Concurrency: 4}, later)
		if err != nil || len(again.Plan.DeleteFiles)+len(again.Plan.DeleteVersions) != 0 {
			t.Fatalf("second run: %v %+v", err, again.Plan)
		}
	})
}

// INVARIANT (the commit protocol's fast path rests on it): cleanup never
// deletes a version younger than table.VersionFloor, however aggressive the
// policy, and judges age by the manifest object's modification time, not
// only by the commit time (a transaction's timestamp, which can be old).
func TestRunKeepsVersionsYoungerThanTheFloor(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		fx := build(t, url, 3)
		ctx := context.Background()
		// A commit whose transaction was created long ago (a long job).
		head, err := table.ReadLatest(ctx, fx.tb.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		frags, files, err := fx.tb.WriteFragments(ctx, head.Schema, []table.Row{{int64(100), "x"}})
		if err != nil {
			t.Fatal(err)
		}
		txn := fx.tb.NewTxn(head.Version)
		txn.TimestampMicros = time.Now().Add(-48 * time.Hour).UnixMicro()
		txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
		if _, err := fx.tb.CommitOrClean(ctx, txn, files); err != nil {
			t.Fatal(err)
		}
		before := checkRetained(t, fx.tb.Bucket)
		files0 := listAll(t, fx.tb.Bucket)
		cfg := cleanup.Config{Policy: cleanup.Policy{RetainVersions: 1}, Concurrency: 2}
		// A minute short of the floor for the newest manifests: nothing
		// goes, not even the version whose commit time is two days old.
		res, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, time.Now().Add(table.VersionFloor-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if res.DeletedVersion != 0 || len(res.Plan.DeleteVersions) != 0 {
			t.Fatalf("deleted %d versions younger than the floor: %+v", res.DeletedVersion, res.Plan.DeleteVersions)
		}
		if vs := checkRetained(t, fx.tb.Bucket); fmt.Sprint(vs) != fmt.Sprint(before) {
			t.Fatalf("versions %v, want %v", vs, before)
		}
		after := listAll(t, fx.tb.Bucket)
		for k := range files0 {
			if !after[k] {
				t.Fatalf("file %s of a version younger than the floor was deleted", k)
			}
		}
		// Past the floor the policy applies.
		if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, time.Now().Add(table.VersionFloor+time.Minute)); err != nil {
			t.Fatal(err)
		}
		if vs := checkRetained(t, fx.tb.Bucket); len(vs) != 1 || vs[0] != before[0] {
			t.Fatalf("versions %v after the floor, want only %d", vs, before[0])
		}
	})
}

// A crash in the middle of cleanup leaves a table whose retained versions all
// read; rerunning finishes the job.
func TestCrashMidCleanupThenRerun(t *testing.T) {
	for _, nth := range []int{1, 4, 11, 15} {
		t.Run(fmt.Sprint("fail delete ", nth), func(t *testing.T) {
			fx := build(t, "mem://", 5)
			ctx := context.Background()
			later := time.Now().Add(48 * time.Hour)
			fx.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpDelete}, Nth: nth, Action: storage.Fail(errors.New("process killed"))})
			cfg := cleanup.Config{Policy: cleanup.Policy{RetainVersions: 2}, Concurrency: 1}
			if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, later); err == nil || !strings.Contains(err.Error(), "process killed") {
				t.Fatalf("got %v", err)
			}
			checkRetained(t, fx.tb.Bucket)
			fx.faulty.Clear()
			if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, later); err != nil {
				t.Fatal(err)
			}
			if vs := checkRetained(t, fx.tb.Bucket); len(vs) != 2 {
				t.Fatalf("versions %v", vs)
			}
			again, _ := cleanup.Run(ctx, fx.tb.Bucket, cfg, later)
			if len(again.Plan.DeleteFiles) != 0 {
				t.Fatalf("rerun left %d files", len(again.Plan.DeleteFiles))
			}
		})
	}
}

// A compaction's output files, written but not committed, survive a cleanup with min-age 0 because the job published its start; once
// committed they are referenced.
func TestCleanupRacingUncommittedJob(t *testing.T) {
	fx := build(t, "mem://", 2)
	ctx := context.Background()
	head, _ := table.ReadLatest(ctx, fx.tb.Bucket)
	release, err := inflight.Register(ctx, fx.tb.Bucket, "compact", head.Version, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	frags, files, err := fx.tb.WriteFragments(ctx, head.Schema, []table.Row{{int64(100), "x"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cleanup.Config{Policy: cleanup.Policy{RetainVersions: 1}, Concurrency: 2}
	if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.tb.Bucket.Attributes(ctx, files[0]); err != nil {
		t.Fatalf("uncommitted output of an in-flight job was deleted: %v", err)
	}
	txn := fx.tb.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
	if _, err := fx.tb.CommitOrClean(ctx, txn, files); err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.tb.Bucket.Attributes(ctx, files[0]); err != nil {
		t.Fatalf("committed output was deleted: %v", err)
	}
	checkRetained(t, fx.tb.Bucket)
	// Without a marker and past min-age, a crashed job's file is collected.
	_, orphan, _ := fx.tb.WriteFragments(ctx, head.Schema, []table.Row{{int64(200), "y"}})
	if _, err := cleanup.Run(ctx, fx.tb.Bucket, cfg, time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.tb.Bucket.Attributes(ctx, orphan[0]); !storage.IsNotFound(err) {
		t.Fatalf("orphan of a crashed job survived: %v", err)
	}
}

type countingBucket struct {
	storage.Bucket
	cur, peak atomic.Int64
	mu        sync.Mutex
}

func (c *countingBucket) Delete(ctx context.Context, key string) error {
	n := c.cur.Add(1)
	c.mu.Lock()
	if n > c.peak.Load() {
		c.peak.Store(n)
	}
	c.mu.Unlock()
	defer c.cur.Add(-1)
	return c.Bucket.Delete(ctx, key)
}

// Deleting thousands of files uses bounded parallelism and reports bytes.
func TestManyFilesBoundedParallelism(t *testing.T) {
	fx := build(t, "mem://", 1)
	ctx := context.Background()
	var total int64
	for i := 0; i < 3000; i++ {
		data := []byte(strings.Repeat("x", i%7+1))
		total += int64(len(data))
		if err := fx.tb.Bucket.Put(ctx, fmt.Sprintf("data/orphan-%05d.parquet", i), data); err != nil {
			t.Fatal(err)
		}
	}
	cb := &countingBucket{Bucket: fx.tb.Bucket}
	res, err := cleanup.Run(ctx, cb, cleanup.Config{Policy: cleanup.Policy{RetainVersions: 100}, Concurrency: 8}, time.Now().Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedFiles < 3000 || res.BytesReclaimed < total {
		t.Fatalf("deleted %d files, %d bytes; want ≥3000, ≥%d", res.DeletedFiles, res.BytesReclaimed, total)
	}
	if p := cb.peak.Load(); p > 8 || p < 2 {
		t.Fatalf("peak concurrent deletes %d, want 2..8", p)
	}
}

func TestBadPolicy(t *testing.T) {
	for _, p := range []cleanup.Policy{{RetainVersions: 0}, {RetainVersions: 1, OlderThan: -time.Second}, {RetainVersions: 1, MinAge: -1}} {
		if err := p.Validate(); err == nil {
			t.Errorf("policy %+v accepted", p)
		}
	}
}
