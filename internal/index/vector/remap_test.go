package vector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestRemapStorageStream: the streamed remap of LanceDB's IVF_FLAT,
// IVF_PQ (codes transposed per partition) and IVF_HNSW_SQ storage holds
// what RemapStorage of the whole storage holds (row ids, partitions,
// codes), and takes its memory from the budget a partition at a time,
// each taken once and given back before the next; a budget that fails
// stops it.
func TestRemapStorageStream(t *testing.T) {
	for _, k := range allKinds() {
		if k.distance != "l2" || k.typ == "ivf_hnsw_pq" {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			f := indexedTable(t, t.TempDir(), k, 600, 300)
			dirs := segmentDirs(t, f.Dir)
			if len(dirs) != 1 {
				t.Fatalf("%d index directories, want 1", len(dirs))
			}
			s, err := ReadStorage(openLocal(t, dirs[0]+"/"+StorageFile))
			if err != nil {
				t.Fatal(err)
			}
			// Every third row deleted, the others moved to fragment 9.
			remap := func(a uint64) (uint64, bool) {
				off := a & 0xffffffff
				if off%3 == 0 {
					return 0, false
				}
				return 9<<32 | (a>>32)*300 + off, true
			}
			want, wst, _ := RemapStorage(s, remap)
			var held, open int
			var sizes []int64
			mem := func(_ context.Context, n int64) (func(), error) {
				if open != 0 {
					t.Errorf("a partition's memory taken while %d still held", open)
				}
				held++
				open++
				sizes = append(sizes, n)
				return func() { open-- }, nil
			}
			r, size := openLocal(t, dirs[0]+"/"+StorageFile)
			var buf bytes.Buffer
			n, st, err := remapStorageStream(t.Context(), r, size, &buf, func(*Storage) error { return nil }, remap, mem)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(buf.Len()) || st != wst {
				t.Fatalf("wrote %d bytes (buffer %d), stats %+v, want %+v", n, buf.Len(), st, wst)
			}
			nonEmpty := 0
			for _, l := range s.IVF.GetLengths() {
				if l > 0 {
					nonEmpty++
				}
			}
			if held != nonEmpty || open != 0 || slices.Contains(sizes, 0) {
				t.Fatalf("memory taken %d times (sizes %v), %d not given back; want once per each of %d partitions", held, sizes, open, nonEmpty)
			}
			got, err := ReadStorage(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.RowIDs, want.RowIDs) || !proto.Equal(got.IVF, want.IVF) {
				t.Fatalf("row ids or partitions differ: %d rows %v, want %d rows %v", len(got.RowIDs), got.IVF.GetLengths(), len(want.RowIDs), want.IVF.GetLengths())
			}
			// IVF_RQ's codes too: unpacked, and packed again per partition.
			for i, c := range want.Columns {
				if !sameArray(got.Columns[i], c) {
					t.Fatalf("column %d differs", i)
				}
			}
			if got.Quantizer != s.Quantizer || len(got.Extra) != len(s.Extra) {
				t.Fatalf("storage %s with %d extra buffers, want %s with %d", got.Quantizer, len(got.Extra), s.Quantizer, len(s.Extra))
			}
			boom := errors.New("budget closed")
			r2, _ := openLocal(t, dirs[0]+"/"+StorageFile)
			_, _, err = remapStorageStream(t.Context(), r2, size, &bytes.Buffer{}, func(*Storage) error { return nil }, remap,
				func(context.Context, int64) (func(), error) { return nil, boom })
			if !errors.Is(err, boom) {
				t.Fatalf("with a failing budget: %v", err)
			}
			_, _, err = remapStorageStream(t.Context(), r2, size, &bytes.Buffer{}, func(*Storage) error { return errors.New("mismatch") }, remap, nil)
			if err == nil || !strings.Contains(err.Error(), "mismatch") {
				t.Fatalf("a failed header check: %v", err)
			}
		})
	}
}

// FuzzRemapStorageStream: an auxiliary.idx of any bytes, remapped a
// partition at a time, gives a storage or an error, never a panic.
func FuzzRemapStorageStream(f *testing.F) {
	sb, _ := encodeSynth(f)
	f.Add(sb)
	f.Add(sb[:len(sb)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		remap := func(a uint64) (uint64, bool) { return a + 1<<32, a%3 != 0 }
		_, _, _ = remapStorageStream(context.Background(), bytes.NewReader(b), int64(len(b)), io.Discard, func(*Storage) error { return nil }, remap, nil)
	})
}
