package file

import (
	"fmt"
	"os"
	"testing"

	"github.com/compactord/compactord/gen/lancefilepb"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// TestDump prints a file's metadata (LANCE_DUMP=path); a debugging aid.
func TestDump(t *testing.T) {
	p := os.Getenv("LANCE_DUMP")
	if p == "" {
		t.Skip("LANCE_DUMP not set")
	}
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := fh.Stat()
	f, err := Open(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("version %s rows %d columns %d globals %d\n", f.Version(), f.NumRows(), len(f.Columns), len(f.Globals))
	var walk func(fl *Field, ind string)
	walk = func(fl *Field, ind string) {
		fmt.Printf("%s%s %s null=%v col=%d md=%v\n", ind, fl.Name, fl.Type, fl.Nullable, fl.Column, fl.Metadata)
		for _, c := range fl.Children {
			walk(c, ind+"  ")
		}
	}
	for _, fl := range f.Schema.Fields {
		walk(fl, "")
	}
	for i, c := range f.Columns {
		fmt.Printf("== column %d: %d pages, %d col buffers\n", i, len(c.Pages), len(c.BufferOffsets))
		for j, pg := range c.Pages {
			var msg proto.Message
			if f.Version() == V2_0 {
				msg = &lancefilepb.ArrayEncoding{}
				err = unwrapEncoding(pg.Encoding, "ArrayEncoding", msg)
			} else {
				msg = &lancefilepb.PageLayout{}
				err = unwrapEncoding(pg.Encoding, "PageLayout", msg)
			}
			s := prototext.MarshalOptions{}.Format(msg)
			if os.Getenv("LANCE_DUMP_LONG") == "" && len(s) > 600 {
				s = s[:600]
			}
			fmt.Printf("  page %d rows=%d prio=%d sizes=%v err=%v\n  %s\n", j, pg.Length, pg.Priority, pg.BufferSizes, err, s)
			if os.Getenv("LANCE_DUMP_HEX") != "" {
				for k := range pg.BufferOffsets {
					b, _ := f.readRange(Buffer{pg.BufferOffsets[k], min(pg.BufferSizes[k], 96)})
					fmt.Printf("    buf %d: % x\n", k, b)
				}
			}
		}
	}
}
