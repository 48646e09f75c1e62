package deletion

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
)

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*_*-*")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Ext(p) == ".bin", b)
	}
	f.Fuzz(func(t *testing.T, bitmap bool, data []byte) {
		df := &lancepb.DeletionFile{}
		if bitmap {
			df.FileType = lancepb.DeletionFile_BITMAP
		}
		bm, err := Decode(df, data, 1<<20)
		if err != nil {
			return
		}
		if !bm.IsEmpty() && bm.Maximum() >= 1<<20 {
			t.Fatalf("offset %d beyond physical rows accepted", bm.Maximum())
		}
	})
}
