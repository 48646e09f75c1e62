package vector

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
)

func TestScratchDump(t *testing.T) {
	dir := os.Getenv("VEC_DUMP")
	if dir == "" {
		t.Skip()
	}
	ms, _ := filepath.Glob(filepath.Join(dir, "t.lance/_indices/*/*.idx"))
	for _, p := range ms {
		fh, _ := os.Open(p)
		st, _ := fh.Stat()
		f, err := file.Open(fh, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("==", p, f.NumRows(), f.Version())
		for k, v := range f.Desc.GetSchema().GetMetadata() {
			fmt.Printf("  md %s = %.400s\n", k, v)
		}
		for _, fl := range f.Desc.GetSchema().GetFields() {
			fmt.Printf("  field %d %s %s nullable=%v parent=%d md=%v\n", fl.GetId(), fl.GetName(), fl.GetLogicalType(), fl.GetNullable(), fl.GetParentId(), fl.GetMetadata())
		}
		for i, g := range f.Globals {
			fmt.Printf("  gb %d %+v\n", i, g)
			if i > 0 {
				b := make([]byte, g.Size)
				fh.ReadAt(b, int64(g.Offset))
				fmt.Printf("    %x\n", b[:min(len(b), 120)])
			}
		}
		b, err := f.ReadAll(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range b.Columns {
			fmt.Printf("  col %d type %s len %d vals %d\n", i, c.Type, c.Len, len(c.Values))
		}
	}
}
