package file

import (
	"io"
	"math/rand/v2"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
)

// BenchmarkEncode writes 500 000 rows of one column per sub-benchmark
// (2.2, default pages, to io.Discard); MB/s is the array's in-memory size
// (values + offsets + validity) per second.
func BenchmarkEncode(b *testing.B) {
	const n = 500_000
	r := rand.New(rand.NewPCG(1, 2))
	type col struct {
		name string
		f    *lancepb.Field
		fill func(a *Array)
	}
	ints := func(w int, gen func(i int) uint64) func(a *Array) {
		return func(a *Array) {
			a.Values = alloc(n * w)
			for i := 0; i < n; i++ {
				v := gen(i)
				for k := 0; k < w; k++ {
					a.Values[i*w+k] = byte(v >> (8 * k))
				}
			}
		}
	}
	strs := func(gen func(i int) string) func(a *Array) {
		return func(a *Array) {
			a.Offsets = make([]int64, n+1)
			for i := 0; i < n; i++ {
				a.Values = append(a.Values, gen(i)...)
				a.Offsets[i+1] = int64(len(a.Values))
			}
		}
	}
	words := []string{"alpha", "beta", "gamma", "delta"}
	cols := []col{
		{"i64_random", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "int64"}, ints(8, func(int) uint64 { return r.Uint64() })},
		{"i64_sequence", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "int64"}, ints(8, func(i int) uint64 { return uint64(i) })},
		{"i32_small", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "int32"}, ints(4, func(int) uint64 { return r.Uint64N(1000) })},
		{"f64", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "double"}, ints(8, func(int) uint64 { return r.Uint64() })},
		{"ts_us", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "timestamp:us:-"}, ints(8, func(i int) uint64 { return 1_700_000_000_000_000 + uint64(i)*1000 + r.Uint64N(1000) })},
		{"utf8_unique", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "string"}, strs(func(i int) string {
			return "value-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + "-" + string(rune('0'+i%10)) + "xyz"
		})},
		{"utf8_lowcard", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "string"}, strs(func(int) string { return words[r.IntN(4)] })},
		{"bool", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "bool"}, func(a *Array) {
			a.Values = make([]byte, bitmapLen(n))
			for i := range a.Values {
				a.Values[i] = byte(r.Uint32())
			}
		}},
		{"fsl_f32_8", &lancepb.Field{Name: "c", ParentId: -1, LogicalType: "fixed_size_list:float:8"}, func(a *Array) {
			c := &Array{Type: DataType{Kind: KindFloat32}, Len: 8 * n, Values: alloc(32 * n)}
			for i := range c.Values {
				c.Values[i] = byte(r.Uint32())
			}
			a.Children = []*Array{c}
		}},
	}
	for _, c := range cols {
		b.Run(c.name, func(b *testing.B) {
			w, err := NewWriter(io.Discard, []*lancepb.Field{c.f}, WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			a := &Array{Type: w.Schema().Fields[0].Type, Len: n}
			c.fill(a)
			batch := &Batch{NumRows: n, Columns: []*Array{a}}
			b.SetBytes(int64(arrayBytes(a)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, _ := NewWriter(io.Discard, []*lancepb.Field{c.f}, WriterOptions{})
				if err := w.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
