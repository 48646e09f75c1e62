package file

import "testing"

// TestFixedRowBytes: the row width of fixed-width logical types (vectors
// at their items' width times their size), 0 for the others.
func TestFixedRowBytes(t *testing.T) {
	for _, c := range []struct {
		lt   string
		want int
	}{
		{"int64", 8},
		{"float", 4},
		{"fixed_size_binary:16", 16},
		{"fixed_size_list:float:768", 3072},
		{"fixed_size_list:halffloat:8", 16},
		{"fixed_size_list:uint8:32", 32},
		{"bool", 0},
		{"fixed_size_list:bool:8", 0},
		{"string", 0},
		{"list", 0},
		{"struct", 0},
		{"no such type", 0},
	} {
		if got := FixedRowBytes(c.lt); got != c.want {
			t.Errorf("FixedRowBytes(%q) = %d, want %d", c.lt, got, c.want)
		}
	}
}
