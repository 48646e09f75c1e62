package ops_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

func benchRows(n int) []table.Row {
	rows := make([]table.Row, n)
	for i := range rows {
		rows[i] = table.Row{int64(i), fmt.Sprintf("category-%d", i%16), float64(i) * 0.5}
	}
	return rows
}

func benchTable(b *testing.B, url string) *ops.Table {
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
	s, _ := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	if _, err := tb.Create(ctx, s); err != nil {
		b.Fatal(err)
	}
	return tb
}

// Append throughput: rows/s and MB/s of Parquet written (the key-uniqueness
// check against an empty table costs nothing here).
func BenchmarkAppend(b *testing.B) {
	for _, backend := range []string{"mem", "file"} {
		b.Run(backend, func(b *testing.B) {
			const n = 200_000
			rows := benchRows(n)
			var bytes uint64
			for b.Loop() {
				url := "mem://"
				if backend == "file" {
					url = "file://" + b.TempDir()
				}
				tb := benchTable(b, url)
				res, err := tb.Append(context.Background(), rows)
				if err != nil {
					b.Fatal(err)
				}
				bytes = res.Manifest.Fragments[0].DataFile.SizeBytes
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}

// Scan throughput over a 1 M-row table in 5 fragments with deletions.
func BenchmarkScan(b *testing.B) {
	for _, backend := range []string{"mem", "file"} {
		b.Run(backend, func(b *testing.B) {
			url := "mem://"
			if backend == "file" {
				url = "file://" + b.TempDir()
			}
			tb := benchTable(b, url)
			ctx := context.Background()
			tb.MaxRowsPerFragment = 200_000
			if _, err := tb.Append(ctx, benchRows(1_000_000)); err != nil {
				b.Fatal(err)
			}
			head, _ := table.ReadLatest(ctx, tb.Bucket)
			p, _ := ops.ParsePredicate(head.Schema, "id < 100000")
			if _, _, err := tb.Delete(ctx, head, ops.DeleteSpec{Predicate: p}); err != nil {
				b.Fatal(err)
			}
			head, _ = table.ReadLatest(ctx, tb.Bucket)
			var size uint64
			for _, f := range head.Fragments {
				size += f.DataFile.SizeBytes
			}
			b.ResetTimer()
			var n int
			for b.Loop() {
				n = 0
				if _, err := tb.Scan(ctx, 0, func(table.Row) error { n++; return nil }, nil); err != nil {
					b.Fatal(err)
				}
			}
			if n != 900_000 {
				b.Fatalf("scanned %d rows", n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
