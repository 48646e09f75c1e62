package trim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
	"github.com/compactord/compactord/internal/trim"
	"github.com/compactord/compactord/internal/verify"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type fixture struct {
	tb     *ops.Table
	faulty *storage.Faulty
	w      *memwal.Writer
	next   int64
}

func setup(t *testing.T, url string, maintained bool) *fixture {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	f := storage.NewFaulty(b)
	c, _ := commit.NewCommitter(commit.Config{}, f, nil, nil, nil)
	tb := ops.NewTable(f, c, nil, nil)
	s, _ := table.ParseSchema("id:int64,v:string", []string{"id"})
	if _, err := tb.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Append(ctx, []table.Row{{int64(-1), "base"}}); err != nil {
		t.Fatal(err)
	}
	var keep []string
	if maintained {
		// A metadata-only segment stands in for a real index: trim reads
		// only its catch-up position, which BuildManifest derives from its
		// fragment bitmap.
		bm, _ := roaring.BitmapOf(0).ToBytes()
		txn := tb.NewTxn(2)
		txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{{
			Name: "ix", Uuid: "ix-1", Type: "btree", FieldIds: []int32{1}, DatasetVersion: 2, FragmentBitmap: bm}}}}
		if _, err := tb.CommitOrClean(ctx, txn, nil); err != nil {
			t.Fatal(err)
		}
		keep = []string{"ix"}
	}
	if _, err := memwal.Configure(ctx, tb, []string{"s0"}, keep); err != nil {
		t.Fatal(err)
	}
	w, err := memwal.NewWriter(memwal.Config{Shard: "s0", Schema: s}, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{tb: tb, faulty: f, w: w}
}

// flush writes one generation of 3 upserts.
func (fx *fixture) flush(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := fx.w.Append(ctx, []memwal.Record{{Op: memwal.Upsert, Row: table.Row{fx.next, "w"}}}); err != nil {
			t.Fatal(err)
		}
		fx.next++
	}
	if _, err := fx.w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func (fx *fixture) merge(t *testing.T) {
	t.Helper()
	m, err := merge.New(merge.Config{}, fx.tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(context.Background(), "s0"); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, b storage.Bucket, dry bool) *trim.Result {
	t.Helper()
	return runAt(t, b, dry, time.Now())
}

// later is past the default reader grace of every version committed so far.
func later() time.Time { return time.Now().Add(trim.DefaultConfig().ReaderGrace + time.Second) }

func runAt(t *testing.T, b storage.Bucket, dry bool, now time.Time) *trim.Result {
	t.Helper()
	cfg := trim.DefaultConfig()
	cfg.KeepShardManifests, cfg.DryRun = 2, dry
	cfg.Now = func() time.Time { return now }
	res, err := trim.Run(context.Background(), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func verdicts(res *trim.Result) string {
	var out []string
	for _, d := range res.Decisions {
		v := "+"
		if !d.Retire {
			v = d.Reason
		}
		out = append(out, fmt.Sprintf("%d:%s", d.Generation, v))
	}
	return strings.Join(out, " ")
}

func mustVerify(t *testing.T, b storage.Bucket) {
	t.Helper()
	rep, err := verify.Run(context.Background(), b, verify.Options{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

func TestTrimRetiresMergedSSTablesAndWAL(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		fx := setup(t, url, false)
		ctx := context.Background()
		fx.flush(t)
		fx.flush(t)
		fx.flush(t)
		if got := verdicts(run(t, fx.tb.Bucket, true)); got != "1:not_merged 2:not_merged 3:not_merged" {
			t.Fatalf("before merge: %s", got)
		}
		fx.merge(t)
		// The version before the merge was the latest a moment ago: a
		// reader that opened it may still read its SSTables.
		within := run(t, fx.tb.Bucket, true)
		if got := verdicts(within); got != "1:version_retention 2:version_retention 3:version_retention" {
			t.Fatalf("after merge, within the reader grace: %s", got)
		}
		if r := within.Readers["s0"]; r.Compacted != 0 || !r.Passing || !within.Waiting() || !strings.Contains(r.Why, "reader grace") || !strings.Contains(within.Decisions[0].Detail, "reader grace") {
			t.Fatalf("readers %+v, detail %q", within.Readers, within.Decisions[0].Detail)
		}
		// Past the grace, older versions (still retained by cleanup for
		// time travel of the base table) no longer pin the SSTables.
		now := later()
		dry := runAt(t, fx.tb.Bucket, true, now)
		if got := verdicts(dry); got != "1:+ 2:+ 3:+" || dry.BytesTrimmed == 0 {
			t.Fatalf("dry run after merge: %s (%d bytes)", got, dry.BytesTrimmed)
		}
		sm, _ := memwal.ReadShardManifest(ctx, fx.tb.Bucket, "s0")
		if len(sm.Sstables) != 3 {
			t.Fatal("dry run changed the shard manifest")
		}
		res := runAt(t, fx.tb.Bucket, false, now)
		if res.RetiredSSTables != 3 || res.WALDeleted == 0 {
			t.Fatalf("result %+v", res)
		}
		sm, _ = memwal.ReadShardManifest(ctx, fx.tb.Bucket, "s0")
		if len(sm.Sstables) != 0 || sm.TrimmedThroughGeneration != 3 {
			t.Fatalf("shard manifest after trim: %v", sm)
		}
		for _, k := range []string{memwal.SSTableDir("s0")} {
			var left []string
			_ = fx.tb.Bucket.List(ctx, k, func(a storage.Attrs) error { left = append(left, a.Key); return nil })
			if len(left) != 0 {
				t.Fatalf("SSTable files left: %v", left)
			}
		}
		// The newest covered WAL entry is kept.
		pos, _ := memwal.ListWALPositions(ctx, fx.tb.Bucket, "s0")
		covered := 0
		for _, p := range pos {
			if p <= sm.ReplayAfterWalPosition {
				covered++
			}
		}
		if covered != 1 {
			t.Fatalf("%d covered WAL entries left (positions %v, cursor %d), want exactly the newest", covered, pos, sm.ReplayAfterWalPosition)
		}
		mustVerify(t, fx.tb.Bucket)
		// The writer keeps working after trim published a version.
		fx.flush(t)
		fx.merge(t)
		mustVerify(t, fx.tb.Bucket)
	})
}

// Past the reader grace, a version keeps its SSTables only while it is
// tagged or an in-flight marker names it; a zero grace pins nothing else.
func TestTagsAndInflightReadersPin(t *testing.T) {
	fx := setup(t, "mem://", false)
	ctx := context.Background()
	b := fx.tb.Bucket
	fx.flush(t)
	before, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	fx.merge(t)
	why := func(res *trim.Result) string {
		if len(res.Decisions) != 1 {
			t.Fatalf("decisions %+v", res.Decisions)
		}
		if res.Decisions[0].Retire {
			return "+"
		}
		return res.Decisions[0].Reason + " (" + res.Readers["s0"].Why + ")"
	}
	if got := why(runAt(t, b, true, later())); got != "+" {
		t.Fatalf("untagged, past the grace: %s", got)
	}
	if err := b.Put(ctx, table.TagsDir+"release-1", []byte(fmt.Sprint(before.Version))); err != nil {
		t.Fatal(err)
	}
	if res := runAt(t, b, true, later()); why(res) != `version_retention (tagged "release-1")` || res.Waiting() {
		t.Fatalf("tagged: %s (waiting %v: a tag is not released by time)", why(res), res.Waiting())
	}
	if err := b.Delete(ctx, table.TagsDir+"release-1"); err != nil {
		t.Fatal(err)
	}
	release, err := inflight.Register(ctx, b, "reader", before.Version, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res := runAt(t, b, true, later()); !strings.HasPrefix(why(res), "version_retention (an in-flight job or reader read version") || !res.Waiting() {
		t.Fatalf("in-flight reader: %s (waiting %v)", why(res), res.Waiting())
	}
	release()
	cfg := trim.DefaultConfig()
	cfg.ReaderGrace, cfg.DryRun = 0, true
	res, err := trim.Run(ctx, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := why(res); got != "+" {
		t.Fatalf("zero grace: %s", got)
	}
	if err := (trim.Config{Concurrency: 1, KeepShardManifests: 2, MaxAttempts: 1, ReaderGrace: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "reader_grace") {
		t.Fatalf("negative grace: %v", err)
	}
}

// An absent catch-up entry retains; once the index provably
// covers the merged rows, the SSTables retire.
func TestIndexLagRetains(t *testing.T) {
	fx := setup(t, "mem://", true)
	ctx := context.Background()
	fx.flush(t)
	fx.merge(t)
	res := runAt(t, fx.tb.Bucket, false, later())
	d := res.Decisions[0]
	if d.Retire || d.Reason != trim.ReasonIndexLag || d.Index != "ix" || res.Retained[trim.ReasonIndexLag] == 0 {
		t.Fatalf("decision %+v", d)
	}
	// The index catches up: a segment covering every fragment live now.
	head, _ := table.ReadLatest(ctx, fx.tb.Bucket)
	bm := roaring.New()
	for _, f := range head.Fragments {
		bm.Add(f.Id)
	}
	bb, _ := bm.ToBytes()
	txn := fx.tb.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{RemovedIndexUuids: []string{"ix-1"}, NewIndices: []*pb.IndexMetadata{{
		Name: "ix", Uuid: "ix-2", Type: "btree", FieldIds: []int32{1}, DatasetVersion: head.Version, FragmentBitmap: bb}}}}
	if _, err := fx.tb.CommitOrClean(ctx, txn, nil); err != nil {
		t.Fatal(err)
	}
	// The catch-up is credited by the next commit that reads a version the
	// new segment covers.
	if _, err := fx.tb.Append(ctx, []table.Row{{int64(1000), "later"}}); err != nil {
		t.Fatal(err)
	}
	res = runAt(t, fx.tb.Bucket, false, later())
	if res.RetiredSSTables != 1 {
		t.Fatalf("after catch-up: %s", verdicts(res))
	}
	mustVerify(t, fx.tb.Bucket)
}

// A crash in the middle of trim leaves a table that verifies; rerunning
// finishes (the orphaned SSTable is swept by generation).
func TestCrashMidTrim(t *testing.T) {
	fx := setup(t, "mem://", false)
	ctx := context.Background()
	fx.flush(t)
	fx.flush(t)
	fx.merge(t)
	rule := fx.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpDelete}, KeyPrefix: memwal.SSTableDir("s0"), Nth: 1, Action: storage.Fail(errors.New("killed"))})
	cfg := trim.DefaultConfig()
	cfg.Concurrency = 1
	now := later()
	cfg.Now = func() time.Time { return now }
	if _, err := trim.Run(ctx, fx.tb.Bucket, cfg); err == nil {
		t.Fatal("trim did not see the injected crash")
	}
	if rule.Fired() != 1 {
		t.Fatal("fault did not fire")
	}
	mustVerify(t, fx.tb.Bucket)
	fx.faulty.Clear()
	res, err := trim.Run(ctx, fx.tb.Bucket, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.OrphansDeleted == 0 {
		t.Fatalf("rerun swept nothing: %+v", res)
	}
	var left []string
	_ = fx.tb.Bucket.List(ctx, memwal.SSTableDir("s0"), func(a storage.Attrs) error { left = append(left, a.Key); return nil })
	if len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	mustVerify(t, fx.tb.Bucket)
}
