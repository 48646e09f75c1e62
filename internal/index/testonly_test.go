package index

import "fmt"

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

// Equal reports whether two entry lists hold the same pairs in the same
// order, describing the first difference.
func (e *Entries) Equal(o *Entries) (bool, string) {
	if e.Len() != o.Len() {
		return false, fmt.Sprintf("%d entries, want %d", e.Len(), o.Len())
	}
	if e.Values.Type.Kind != o.Values.Type.Kind {
		return false, fmt.Sprintf("values of %s, want %s", e.Values.Type, o.Values.Type)
	}
	for i := range e.Addrs {
		if e.Addrs[i] != o.Addrs[i] {
			return false, fmt.Sprintf("entry %d: row address %#x, want %#x", i, e.Addrs[i], o.Addrs[i])
		}
		va, vb := e.Values.IsValid(i), o.Values.IsValid(i)
		if va != vb || va && compareValues(e.Values, i, o.Values, i) != 0 {
			return false, fmt.Sprintf("entry %d (row %#x): values differ", i, e.Addrs[i])
		}
	}
	return true, ""
}
