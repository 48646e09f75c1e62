package index

import (
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
)

// TestIndexableRefusesDictionaries: a dictionary-typed column (which
// LanceDB 0.39 refuses to index) is refused with a one-line error,
// while its value type alone is indexable.
func TestIndexableRefusesDictionaries(t *testing.T) {
	d, err := file.ParseType("dict:string:int32:false")
	if err != nil {
		t.Fatal(err)
	}
	err = Indexable(d)
	if err == nil || !strings.Contains(err.Error(), "dictionary<utf8,int32>") || strings.Contains(err.Error(), "\n") {
		t.Errorf("dictionary column: %v", err)
	}
	if err := Indexable(file.DataType{Kind: file.KindUtf8}); err != nil {
		t.Errorf("utf8: %v", err)
	}
}
