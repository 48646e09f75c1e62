package file

import (
	"slices"
	"strings"
	"testing"
)

// TestChunkOffsets decodes a variable chunk's offsets of both widths and
// rejects offsets that decrease or run past the chunk, wherever they are.
func TestChunkOffsets(t *testing.T) {
	for _, ob := range []int{32, 64} {
		w := ob / 8
		put := func(b []byte, i int, v uint64) {
			if w == 4 {
				le.PutUint32(b[4*i:], uint32(v))
			} else {
				le.PutUint64(b[8*i:], v)
			}
		}
		const n = 5
		mk := func(offs ...uint64) []byte {
			b := make([]byte, (n+1)*w+20)
			for i, o := range offs {
				put(b, i, o)
			}
			return b
		}
		h := uint64((n + 1) * w)
		b := mk(h, h+2, h+2, h+5, h+9, h+20)
		offs := make([]int64, n+1)
		data, err := chunkOffsets(b, n, ob, offs)
		if err != nil {
			t.Fatalf("ob=%d: %v", ob, err)
		}
		if want := []int64{0, 2, 2, 5, 9, 20}; !slices.Equal(offs, want) || len(data) != 20 || &data[0] != &b[h] {
			t.Fatalf("ob=%d: offsets %v, %d bytes of data", ob, offs, len(data))
		}
		for name, bad := range map[string][]byte{
			"decreasing":   mk(h, h+2, h+1, h+5, h+9, h+20),
			"first past":   mk(h+3, h+2, h+4, h+5, h+9, h+20),
			"past the end": mk(h, h+2, h+2, h+5, h+9, h+21),
			"huge":         mk(h, h+2, h+2, h+5, h+9, 1<<31),
			"short":        mk(h, h+2)[:(n+1)*w-1],
		} {
			if _, err := chunkOffsets(bad, n, ob, make([]int64, n+1)); err == nil || !strings.Contains(err.Error(), "variable chunk") {
				t.Errorf("ob=%d %s: %v, want a variable chunk error", ob, name, err)
			}
		}
	}
}
