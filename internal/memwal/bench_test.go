package memwal_test

import (
	"fmt"
	"testing"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

// BenchmarkWALAppend measures durable WAL appends: one put-if-absent of
// the entry plus the fence re-check (one short listing of the shard's
// manifests) per entry. It reports entries/s and, through SetBytes, MB/s
// of encoded entries. memblob sorts every key of the bucket on each List,
// so mem:// numbers fall as the WAL grows: compare at a fixed
// -benchtime=Nx.
func BenchmarkWALAppend(b *testing.B) {
	for _, store := range []string{"mem", "file"} {
		for _, per := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/records=%d", store, per), func(b *testing.B) {
				url := "mem://" + testutil.UniqueName(b)
				if store == "file" {
					url = "file://" + b.TempDir()
				}
				bk := openBucket(b, url)
				w := newWriter(b, bk, "s0")
				claim(b, w)
				recs := make([]memwal.Record, per)
				for i := range recs {
					recs[i] = memwal.Record{Op: memwal.Upsert, Row: table.Row{int64(i), fmt.Sprintf("category-%03d", i%100), float64(i) * 1.5}}
				}
				first := w.NextPosition()
				mustAppend(b, w, recs...)
				data, err := bk.Get(b.Context(), memwal.WALKey("s0", first))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(data)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := w.Append(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/sec, "entries/s")
				b.ReportMetric(float64(b.N*per)/sec, "records/s")
			})
		}
	}
}
