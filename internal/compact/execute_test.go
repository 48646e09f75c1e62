package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/faults"
)

// smallTable is a compactord-made table of three 10-row fragments (ids
// 0..29), offsets 2 and 5 of fragment del deleted.
func smallTable(t *testing.T, del int) *table.Handle {
	t.Helper()
	return smallTableN(t, 3, del)
}

// smallTableN is smallTable with n fragments.
func smallTableN(t *testing.T, n, del int) *table.Handle {
	t.Helper()
	h := openHandle(t, t.TempDir())
	ctx := t.Context()
	fields := []*pb.Field{
		{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"},
		{Name: "s", Id: 1, ParentId: -1, LogicalType: "string", Nullable: true},
	}
	if _, err := table.Create(ctx, h.Bucket, fields, "2.2", time.Now()); err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < 10*n; lo += 10 {
		var b bytes.Buffer
		for id := lo; id < lo+10; id++ {
			fmt.Fprintf(&b, `{"id":%d,"s":"v%d"}`+"\n", id, id)
		}
		if _, _, err := h.AppendJSON(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f1 := proto.Clone(read.Manifest.GetFragments()[del]).(*pb.DataFragment)
	df, key, data, err := deletion.Encode(f1.GetId(), roaring.BitmapOf(2, 5), read.Manifest.GetVersion())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bucket.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	f1.DeletionFile = df
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{UpdatedFragments: []*pb.DataFragment{f1}}}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn}); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestExecuteCutsAndCopies: with a target and a file cap of 12 rows the three fragments
// form one group; fragment 0 is copied, fragment 1's 8 live rows are
// re-encoded (2 fill the first file, 6 start the second), and fragment 2,
// which would push the second file past the target, is copied into a
// third. The rows read back in order, and the FRI maps each old address to
// its row.
func TestExecuteCutsAndCopies(t *testing.T) {
	h := smallTable(t, 1)
	ctx := t.Context()
	o := deferredOptions()
	o.TargetRowsPerFragment = 12
	o.MaxRowsPerFile = 12
	res, err := Run(ctx, h, o, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || len(res.Plan.Groups) != 1 {
		t.Fatalf("plan %+v", res.Plan)
	}
	head, _, err := meta.ReadLatest(ctx, h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, f := range head.Manifest.GetFragments() {
		sizes = append(sizes, fmt.Sprint(f.GetPhysicalRows()))
		if f.GetDeletionFile() != nil {
			t.Errorf("fragment %d has a deletion file", f.GetId())
		}
	}
	if got := strings.Join(sizes, ","); got != "12,6,10" {
		t.Fatalf("new fragments of %s rows, want 12,6,10", got)
	}
	if res.Stats.FragmentsCopied != 2 || res.Stats.RowsRewritten != 8 || res.Stats.RowsDropped != 2 {
		t.Errorf("stats %+v", res.Stats)
	}
	tb, err := scan.Open(ctx, h.Bucket, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := tb.Write(ctx, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 28 || !strings.Contains(lines[10], `"id":10`) || !strings.Contains(lines[12], `"id":13`) || !strings.Contains(lines[27], `"id":29`) {
		t.Fatalf("rows after compaction (%d): %v", len(lines), lines)
	}
	ix, err := fri.Load(ctx, h.Bucket, head)
	if err != nil || ix == nil {
		t.Fatalf("FRI %v %v", ix, err)
	}
	remap := ix.Remapper(0)
	nf := head.Manifest.GetFragments()
	for _, c := range []struct {
		frag, off uint32
		want      string
	}{{0, 9, fmt.Sprintf("%d:9", nf[0].GetId())}, {1, 2, "deleted"}, {1, 1, fmt.Sprintf("%d:11", nf[0].GetId())},
		{1, 3, fmt.Sprintf("%d:0", nf[1].GetId())}, {1, 6, fmt.Sprintf("%d:2", nf[1].GetId())}, {2, 0, fmt.Sprintf("%d:0", nf[2].GetId())}} {
		old := res.Plan.Groups[0].Old()[c.frag].GetId()
		a, ok := remap(meta.RowAddr(uint32(old), c.off))
		got := "deleted"
		if ok {
			f, o := meta.SplitRowAddr(a)
			got = fmt.Sprintf("%d:%d", f, o)
		}
		if got != c.want {
			t.Errorf("old fragment %d row %d maps to %s, want %s", old, c.off, got, c.want)
		}
	}
}

// TestExecuteCopiesUpToTarget: two copied fragments that fill the target
// exactly close the file before the re-encoded one starts the next.
func TestExecuteCopiesUpToTarget(t *testing.T) {
	h := smallTable(t, 2)
	o := DefaultOptions()
	o.TargetRowsPerFragment = 20
	o.MaxRowsPerFile = 20
	if _, err := Run(t.Context(), h, o, Env{}); err != nil {
		t.Fatal(err)
	}
	head, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, f := range head.Manifest.GetFragments() {
		sizes = append(sizes, fmt.Sprint(f.GetPhysicalRows()))
	}
	if got := strings.Join(sizes, ","); got != "20,8" {
		t.Fatalf("new fragments of %s rows, want 20,8", got)
	}
}

// TestRunReplansWhenTheFRIChanged: a deferred compaction whose read
// version's FRI was replaced meanwhile (another compaction of other
// fragments landed its own FRI version, which its transaction does not
// show) re-plans instead of dropping that version; the FRI ends with both.
func TestRunReplansWhenTheFRIChanged(t *testing.T) {
	h := smallTableN(t, 5, 4)
	ctx := t.Context()
	o := deferredOptions()
	o.TargetRowsPerFragment = 100
	first := true
	b := o
	b.Fragments = []uint64{3, 4}
	res, err := Run(ctx, h, b, Env{BeforeCommit: func(ctx context.Context, p *Plan) error {
		if !first {
			return nil
		}
		first = false
		a := o
		a.Fragments = []uint64{0, 1}
		r, err := Run(ctx, h, a, Env{})
		if err == nil && r.Commit == nil {
			err = fmt.Errorf("the other compaction landed nothing")
		}
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || res.Retried != 1 {
		t.Fatalf("commit %v, retried %d: want one re-plan", res.Commit != nil, res.Retried)
	}
	head, _, err := meta.ReadLatest(ctx, h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, h.Bucket, head)
	if err != nil || ix == nil || len(ix.Versions) != 2 {
		t.Fatalf("FRI %+v (%v): want two versions", ix, err)
	}
}

// planTwelves is smallTable(t, 1) planned with 12-row fragments and files
// (its one group: what Execute gets in the tests that call it directly).
func planTwelves(t *testing.T) (*table.Handle, *pb.Manifest, Group, Options) {
	t.Helper()
	h := smallTable(t, 1)
	o := DefaultOptions()
	o.TargetRowsPerFragment = 12
	o.MaxRowsPerFile = 12
	p, read, _, err := PlanLatest(t.Context(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 1 {
		t.Fatalf("plan %+v", p)
	}
	return h, read.Manifest, p.Groups[0], o
}

// TestExecuteLocalCopyMatchesStreamed: on a file:// bucket the copied
// fragments' pages go from file to file in the kernel (lance/file's
// TestCopyFileInKernel counts it); the files Execute writes there are
// byte for byte those it writes through a bucket without local files,
// where every byte is streamed.
func TestExecuteLocalCopyMatchesStreamed(t *testing.T) {
	h, m, g, o := planTwelves(t)
	ctx := t.Context()
	if _, ok := h.Bucket.(storage.LocalPather); !ok {
		t.Fatal("the test table's bucket has no local files")
	}
	local, err := Execute(ctx, h.Bucket, m, g, o)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := Execute(ctx, faults.NewFaulty(h.Bucket), m, g, o)
	if err != nil {
		t.Fatal(err)
	}
	if local.Stats.FragmentsCopied != 2 || len(local.Files) != 3 || len(streamed.Files) != len(local.Files) {
		t.Fatalf("copied %d fragments into %d files (streamed: %d files), want 2 into 3", local.Stats.FragmentsCopied, len(local.Files), len(streamed.Files))
	}
	for i := range local.Files {
		a, err := h.Bucket.Get(ctx, local.Files[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.Bucket.Get(ctx, streamed.Files[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("file %d: %d bytes written on file://, %d streamed, and they differ", i, len(a), len(b))
		}
	}
}

// writersBucket counts the data files being written at once. With
// overlap set, a data file is not closed before two were open at once (or
// ctx ends): proof that the groups run concurrently.
type writersBucket struct {
	storage.Bucket
	ctx       context.Context
	overlap   bool
	mu        sync.Mutex
	open, max int
	grew      chan struct{} // closed when max reaches 2
}

func (b *writersBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	w, err := b.Bucket.NewWriter(ctx, key)
	if err != nil || !strings.HasPrefix(key, "data/") {
		return w, err
	}
	b.mu.Lock()
	b.open++
	if b.open > b.max {
		if b.max = b.open; b.max == 2 {
			close(b.grew)
		}
	}
	b.mu.Unlock()
	return &countedWriter{WriteCloser: w, b: b}, nil
}

type countedWriter struct {
	io.WriteCloser
	b    *writersBucket
	once sync.Once
}

func (w *countedWriter) Close() error {
	if w.b.overlap {
		select {
		case <-w.b.grew:
		case <-w.b.ctx.Done():
		}
	}
	err := w.WriteCloser.Close()
	w.once.Do(func() {
		w.b.mu.Lock()
		w.b.open--
		w.b.mu.Unlock()
	})
	return err
}

// TestMemoryBudgetBoundsGroups: four groups at parallelism 4 write files
// at once (the first file waits for a second to open); with a budget of
// one group's working memory, or less, they write one at a time, and give
// the whole budget back.
func TestMemoryBudgetBoundsGroups(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget func(m *pb.Manifest) *MemoryBudget
		atMost int
	}{
		{"unbounded", func(*pb.Manifest) *MemoryBudget { return nil }, 4},
		{"one group's worth", func(m *pb.Manifest) *MemoryBudget { return NewMemoryBudget(groupMemory(m)) }, 1},
		{"less than one group's worth", func(m *pb.Manifest) *MemoryBudget { return NewMemoryBudget(1) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := smallTableN(t, 8, 0)
			o := DefaultOptions()
			o.TargetRowsPerFragment = 16
			p, read, _, err := PlanLatest(t.Context(), h, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Groups) != 4 {
				t.Fatalf("%d groups, want 4", len(p.Groups))
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			wb := &writersBucket{Bucket: h.Bucket, ctx: ctx, overlap: c.atMost > 1, grew: make(chan struct{})}
			hb := *h
			hb.Bucket = wb
			budget := c.budget(read.Manifest)
			outs, err := executeAll(ctx, &hb, read.Manifest, p, o, 4, budget)
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 4 || wb.open != 0 {
				t.Fatalf("%d outputs, %d writers still open", len(outs), wb.open)
			}
			if c.atMost == 1 && wb.max != 1 || c.atMost > 1 && (wb.max < 2 || wb.max > c.atMost) {
				t.Fatalf("%d data files written at once, want %s", wb.max, map[bool]string{true: "1", false: fmt.Sprintf("2 to %d", c.atMost)}[c.atMost == 1])
			}
			if budget != nil && !budget.sem.TryAcquire(budget.Size()) {
				t.Fatal("the groups did not give the budget back")
			}
		})
	}
}

func TestMemoryBudget(t *testing.T) {
	b := NewMemoryBudget(10)
	got, err := b.acquire(t.Context(), 25)
	if err != nil || got != 10 {
		t.Fatalf("acquire(25) of 10 took %d (%v): want all 10", got, err)
	}
	done := make(chan int64)
	go func() {
		n, _ := b.acquire(t.Context(), 4)
		done <- n
	}()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.acquire(ctx, 1); err == nil {
		t.Fatal("acquire with a canceled context while the budget is spent succeeded")
	}
	select {
	case n := <-done:
		t.Fatalf("a waiter took %d while the budget was spent", n)
	default:
	}
	b.release(got)
	if n := <-done; n != 4 {
		t.Fatalf("waiter took %d, want 4", n)
	}
	b.release(4)
	var nilBudget *MemoryBudget
	if n, err := nilBudget.acquire(t.Context(), 1<<40); n != 0 || err != nil {
		t.Fatalf("nil budget: %d, %v", n, err)
	}
	nilBudget.release(5)
}

// TestEvenSplit: a group's rows per file, as LanceDB 0.39 splits a group
// (the first three measured with its optimize()).
func TestEvenSplit(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct{ live, target, want uint64 }{
		{1179648, mi, 1179648},
		{1887437, mi, 1887437},
		{2123366, mi, 1061683},
		{2123367, mi, 1061684},
		{3 * mi, mi, mi},
		{3*mi + 2, mi, mi + 1},
		{5, mi, 5},
		{0, mi, MaxTargetRows},
		{10, 3, 4},
	} {
		if got := evenSplit(c.live, c.target); got != c.want {
			t.Errorf("evenSplit(%d, %d) = %d, want %d", c.live, c.target, got, c.want)
		}
	}
}

// TestWindowRows: a decode window holds about windowBytes of stored rows,
// within minWindowRows and decodeWindow, and at most maxWindowBytes of
// very wide rows; a file whose size or rows are unknown gets the largest
// window.
func TestWindowRows(t *testing.T) {
	for _, c := range []struct {
		size int64
		rows uint64
		want int
	}{
		{18 << 20, 1 << 20, windowBytes / 18}, // 18 bytes a row
		{50 << 20, 1 << 20, windowBytes / 50}, // a vector row
		{1 << 20, 1 << 20, decodeWindow},      // narrower than the cap
		{256 << 20, 1 << 20, minWindowRows},   // 256-byte rows
		{1 << 30, 1 << 20, 2048},              // 1 KiB rows: 2 MiB
		{3 << 30, 1 << 20, 682},               // 3 KiB rows (768-d float32): 2 MiB, not 12
		{16 << 30, 1 << 20, 128},              // 16 KiB rows: 2 MiB, not 64
		{1 << 45, 1 << 20, 1},                 // rows past maxWindowBytes
		{0, 1 << 20, decodeWindow},            // size unknown
		{18 << 20, 0, decodeWindow},           // no rows
		{100, 1000, decodeWindow},             // under a byte a row
	} {
		if got := windowRows(c.size, c.rows); got != c.want {
			t.Errorf("windowRows(%d, %d) = %d, want %d", c.size, c.rows, got, c.want)
		}
	}
}

// TestGroupMemoryCountsVectors: a group's estimate counts a vector column
// (fixed-width rows of 256 bytes or more) at its window of stored rows
// and its wide output page, and any other leaf at two output pages.
func TestGroupMemoryCountsVectors(t *testing.T) {
	fields := func(vec string) *pb.Manifest {
		return &pb.Manifest{Fields: []*pb.Field{
			{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"},
			{Name: "s", Id: 1, ParentId: -1, LogicalType: "string"},
			{Name: "vec", Id: 2, ParentId: -1, LogicalType: vec},
		}}
	}
	for _, c := range []struct {
		vec  string
		want int64
	}{
		{"fixed_size_list:float:8", 2<<20 + 3*2*pageBytes},
		{"fixed_size_list:float:64", 2<<20 + 2*2*pageBytes + minWindowRows*256 + widePageBytes*5/4},
		{"fixed_size_list:float:768", 2<<20 + 2*2*pageBytes + maxWindowBytes + widePageBytes*5/4},
		{"fixed_size_list:int8:64", 2<<20 + 3*2*pageBytes},
	} {
		if got := groupMemory(fields(c.vec)); got != c.want {
			t.Errorf("vec %s: groupMemory %d, want %d", c.vec, got, c.want)
		}
	}
}

// TestExecuteFailedCloseOfEarlierFile: a finished data file is closed
// (fsynced, published) while the next one is written; when that Close
// fails, Execute fails with its error, naming the file, and lists it for
// removal: the first of three files (seen when the second finishes) and
// the last (seen only at the end).
func TestExecuteFailedCloseOfEarlierFile(t *testing.T) {
	for _, nth := range []int{1, 3} {
		t.Run(fmt.Sprintf("file %d", nth), func(t *testing.T) {
			h, m, g, o := planTwelves(t)
			ctx := t.Context()
			fb := faults.NewFaulty(h.Bucket)
			rule := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpUpload}, KeyPrefix: "data/", Nth: nth, Action: faults.Fail(nil)})
			out, err := Execute(ctx, fb, m, g, o)
			if !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("Execute: %v, want the injected failure of file %d's Close", err, nth)
			}
			if rule.Fired() != 1 || out == nil || len(out.Files) != nth {
				t.Fatalf("the fault fired %d times; files listed for removal %v, want %d", rule.Fired(), out.Files, nth)
			}
			failed := out.Files[nth-1]
			if !strings.Contains(err.Error(), failed) {
				t.Errorf("error %q does not name the failed file %s", err, failed)
			}
			if _, err := h.Bucket.Attributes(ctx, failed); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("the failed file %s: %v, want not found", failed, err)
			}
		})
	}
}
