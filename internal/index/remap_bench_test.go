package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// BenchmarkRemapSegment is the physical remap of one btree or bitmap
// segment of 1 Mi entries over 16 fragments of 64 Ki rows (an int64 key
// equal to the row's position; bitmap keys id % 16), through an FRI that
// compacted the fragments 4 at a time after 10% deletions: read, remap,
// re-encode and write to an in-memory bucket.
func BenchmarkRemapSegment(b *testing.B) {
	const frags, rows = 16, 1 << 16
	ctx := context.Background()
	bk, err := storage.Open(ctx, "mem://")
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	var vs fri.Version
	vs.DatasetVersion = 1
	next := uint64(frags)
	for g := 0; g < frags; g += 4 {
		var olds []fri.OldFragment
		var surv uint64
		for f := g; f < g+4; f++ {
			del := roaring.New()
			for o := uint32(f); o < rows; o += 10 {
				del.Add(o)
			}
			olds = append(olds, fri.OldFragment{ID: uint64(f), PhysicalRows: rows, Deleted: del})
			surv += rows - del.GetCardinality()
		}
		grp, err := fri.BuildGroup(olds, []fri.Digest{{ID: next, PhysicalRows: surv}})
		if err != nil {
			b.Fatal(err)
		}
		next++
		vs.Groups = append(vs.Groups, grp)
	}
	ix, err := fri.New([]fri.Version{vs})
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{KindBTree, KindBitmap} {
		b.Run(kind, func(b *testing.B) {
			tf := &pb.Field{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"}
			n := frags * rows
			vals := make([]byte, 0, 8*n)
			addrs := make([]uint64, 0, n)
			for f := 0; f < frags; f++ {
				for o := 0; o < rows; o++ {
					v := int64(f*rows + o)
					if kind == KindBitmap {
						v %= 16
					}
					vals = le.AppendUint64(vals, uint64(v))
					addrs = append(addrs, meta.RowAddr(uint32(f), uint32(o)))
				}
			}
			e := &Entries{Values: &file.Array{Type: file.DataType{Kind: file.KindInt64}, Len: n, Values: vals}, Addrs: addrs}
			w, err := WriteSegment(ctx, bk, kind, tf, e)
			if err != nil {
				b.Fatal(err)
			}
			all := roaring.New()
			all.AddRange(0, frags)
			m, err := SegmentMetadata("id_idx", []int32{0}, kind, nil, 1, all, w, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			var st RemapStats
			for b.Loop() {
				_, _, st, err = Remap(ctx, bk, m, ix.Remapper(0), RemapOptions{Field: tf, DatasetVersion: 2, Bitmap: ix.RemapBitmap(m)})
				if err != nil {
					b.Fatal(err)
				}
			}
			if st.Entries != n || st.Dropped == 0 || st.Kept+st.Dropped != n {
				b.Fatalf("stats %+v", st)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			b.Logf("%s: %s", kind, fmt.Sprint(st))
		})
	}
}
