package compact_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// benchTable writes nFrags fragments of rows rows each to a file:// table
// (appends committed directly: ops.Append's duplicate-key scan would make
// the setup quadratic) and deletes the given share of each fragment's rows
// at random.
func benchTable(b *testing.B, nFrags, rows int, deleted float64) (*ops.Table, uint64) {
	return benchTableAt(b, "file://"+b.TempDir(), nFrags, rows, deleted)
}

func benchTableAt(b testing.TB, url string, nFrags, rows int, deleted float64) (*ops.Table, uint64) {
	b.Helper()
	ctx := context.Background()
	bk, err := storage.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bk.Close() })
	c, err := commit.NewCommitter(commit.Config{}, bk, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	tb := ops.NewTable(bk, c, nil, nil)
	tb.MaxRowsPerFragment = rows
	s, _ := table.ParseSchema("id:int64,cat:string,val:float64,note:string", []string{"id"})
	m, err := tb.Create(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var bytes uint64
	for i := 0; i < nFrags; i++ {
		batch := make([]table.Row, rows)
		for j := range batch {
			k := int64(i*rows + j)
			batch[j] = table.Row{k, fmt.Sprintf("c%d", rng.IntN(16)), rng.Float64() * 1000, fmt.Sprintf("note-%x-%d", rng.Uint64(), k)}
		}
		frags, files, err := tb.WriteFragments(ctx, s, batch)
		if err != nil {
			b.Fatal(err)
		}
		txn := tb.NewTxn(m.Version)
		txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags}}
		res, err := tb.CommitOrClean(ctx, txn, files)
		if err != nil {
			b.Fatal(err)
		}
		m = res.Manifest
		bytes += frags[0].DataFile.SizeBytes
	}
	if deleted > 0 {
		op := &pb.Delete{}
		for _, f := range m.Fragments {
			bm := roaring.New()
			for bm.GetCardinality() < uint64(deleted*float64(f.PhysicalRows)) {
				bm.Add(uint32(rng.IntN(int(f.PhysicalRows))))
			}
			df, err := table.WriteDeletionFile(ctx, bk, f.Id, m.Version, bm)
			if err != nil {
				b.Fatal(err)
			}
			op.UpdatedFragments = append(op.UpdatedFragments, &pb.Fragment{Id: f.Id, DataFile: f.DataFile, PhysicalRows: f.PhysicalRows, DeletionFile: df})
		}
		txn := tb.NewTxn(m.Version)
		txn.Operation = &pb.Transaction_Delete{Delete: op}
		if _, err := tb.CommitOrClean(ctx, txn, nil); err != nil {
			b.Fatal(err)
		}
	}
	return tb, bytes
}

// benchCompact measures Execute (read, rewrite, write every group; no
// commit) over 16 fragments of 128 Ki rows: every fragment below the target
// (no deletions) or deletion-heavy (10%), so all of them are rewritten.
// b.SetBytes is the input data bytes, so MB/s compares with a cp of the
// same files.
func benchCompact(b *testing.B, deleted float64) {
	const nFrags, rows = 16, 128 << 10
	tb, bytes := benchTable(b, nFrags, rows, deleted)
	c, err := compact.New(compact.Config{TargetRowsPerFragment: 4 * rows, DeletionThreshold: 0.05, Parallelism: 4}, tb, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	read, jobs, err := c.Plan(ctx, nil)
	if err != nil || len(jobs) == 0 {
		b.Fatalf("plan: %v, %v", jobs, err)
	}
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	var st compact.Stats
	var wall, cpu time.Duration
	for i := 0; i < b.N; i++ {
		start, cpu0 := time.Now(), processCPU()
		p, err := c.Execute(ctx, read, jobs)
		if err != nil {
			b.Fatal(err)
		}
		wall, cpu = wall+time.Since(start), cpu+processCPU()-cpu0
		st = p.Stats
		b.StopTimer()
		c.Abort(ctx, p)
		b.StartTimer()
	}
	b.ReportMetric(float64(nFrags*rows*b.N)/wall.Seconds(), "rows/s")
	if cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
	b.ReportMetric(float64(st.RowGroupsCopied), "rowgroups-copied")
}

func BenchmarkCompactNoDeletions(b *testing.B)  { benchCompact(b, 0) }
func BenchmarkCompactDeleted10Pct(b *testing.B) { benchCompact(b, 0.10) }
