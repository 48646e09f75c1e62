package merge

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/compactord/compactord/internal/table"
)

func TestAppendInt64KeyMatchesTableEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, -1, math.MinInt64, math.MaxInt64, 1 << 32, -(1 << 40)}
	for i := 0; i < 1000; i++ {
		vals = append(vals, int64(rng.Uint64()))
	}
	for _, v := range vals {
		if got, want := string(appendInt64Key(nil, v)), string(table.AppendKey(nil, v)); got != want {
			t.Fatalf("%d: %x, want %x", v, got, want)
		}
		if got, want := string(appendInt64Key(nil, v)), string(table.AppendKey(nil, table.Timestamp(v))); got != want {
			t.Fatalf("timestamp %d: %x, want %x", v, got, want)
		}
	}
}

func TestDecodeSingleKey(t *testing.T) {
	for _, v := range []any{int64(0), int64(-5), int64(math.MaxInt64), "", "a\x00b", "zz\x00", []byte{}, []byte{0, 0xff, 0}, true, false} {
		got, err := decodeSingleKey(string(table.AppendKey(nil, v)))
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if string(table.AppendKey(nil, got)) != string(table.AppendKey(nil, v)) {
			t.Fatalf("%#v decoded as %#v", v, got)
		}
	}
	for _, bad := range []string{"", "\x01\x00", "\x03ab", "\x03a\x00\x01", "\x09xx"} {
		if _, err := decodeSingleKey(bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}
