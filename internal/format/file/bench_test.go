package file

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// benchFile is the file benchmarks decode: LANCE_BENCH_FILE, or the
// committed 2.2 all-types file.
// The file is held in memory so the numbers are decode, not I/O.
func benchFile(b *testing.B) *File {
	p := os.Getenv("LANCE_BENCH_FILE")
	if p == "" {
		p = filepath.Join("testdata", "all_v22.lance")
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	f, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// decodedBytes is the in-memory size of an array (values, offsets,
// validity), the "MB" of MB/s.
func decodedBytes(a *Array) int64 {
	n := int64(len(a.Values) + len(a.Valid) + 8*len(a.Offsets))
	for _, c := range a.Children {
		n += decodedBytes(c)
	}
	return n
}

// BenchmarkDecode decodes each top-level column of the file in full and
// reports decoded MB/s (b.SetBytes is the decoded size).
func BenchmarkDecode(b *testing.B) {
	f := benchFile(b)
	for _, fl := range f.Schema.Fields {
		b.Run(fl.Name, func(b *testing.B) {
			bt, err := f.ReadAll([]string{fl.Name})
			if err != nil {
				b.Skip(err)
			}
			b.SetBytes(decodedBytes(bt.Columns[0]))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.ReadAll([]string{fl.Name}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTake takes 16 scattered rows of every column: with chunk-level
// windows only the chunks holding them are read and decoded.
func BenchmarkTake(b *testing.B) {
	f := benchFile(b)
	n := f.NumRows()
	rows := make([]uint64, 16)
	for i := range rows {
		rows[i] = (uint64(i)*7919*104729 + 13) % n
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := f.Take(nil, rows); err != nil {
			b.Fatal(err)
		}
	}
}
