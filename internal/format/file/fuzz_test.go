package file

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"google.golang.org/protobuf/proto"
)

// FuzzOpen feeds whole files (seeded with the corpus) to the metadata
// parser, the page decoders and Check.
func FuzzOpen(f *testing.F) {
	for _, b := range corpusBytes(f) {
		if len(b) < 8<<10 {
			f.Add(b)
		}
	}
	// Small Arrow dictionary files of every version: the corpus's are too
	// big to seed, and the 2.0 ones decode through their own index rule.
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, lt := range []string{"dict:string:int8:false", "dict:large_binary:uint16:false"} {
			b, err := arrowDictFile(f, v, lt, []string{"a", "bb", ""}, 40)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
		// Dictionaries of numbers: flat items at the value width (2.0 with
		// a null item behind a validity buffer; 2.1+ a flat page dictionary).
		vals := [][]byte{{1, 0}, {0xff, 0x7f}, {0, 0x80}}
		for _, lt := range []string{"dict:int16:int8:false", "dict:halffloat:uint32:false"} {
			b, err := numDictFile(f, v, lt, vals, 40, func(i int) bool { return i%6 == 0 })
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
		b, err := numDictFile(f, v, "dict:double:int16:false", nil, 20, func(int) bool { return true })
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// Booleans: one-bit dictionary items (a byte per row read as bits).
		b, err = numDictFile(f, v, "dict:bool:int8:false", [][]byte{{0x5a}}, 8, func(i int) bool { return i == 3 })
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Vectors stored as their rows' bytes (plain full-zip pages, read
	// straight into a window's buffer), over several pages, and with null
	// rows (a control word per row).
	f.Add(vectorFile(f, 40, 64, WriterOptions{PageBytes: 2 << 10}, nil))
	f.Add(vectorFile(f, 20, 64, WriterOptions{PageBytes: 2 << 10}, func(i int) bool { return i%3 == 0 }))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Forged row counts are refused only past maxRows; keep each run
		// quick by skipping files that claim many rows.
		fl, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil || fl.NumRows() > 1<<16 {
			return
		}
		rerr := readEverything(b)
		// Check decodes every page the reads decode, and more strictly.
		if cerr := fl.Check(nil); cerr == nil && rerr != nil {
			t.Errorf("a read fails (%v) but Check passes", rerr)
		}
	})
}

// FuzzFooter exercises the footer and metadata tables alone.
func FuzzFooter(f *testing.F) {
	for _, b := range corpusBytes(f) {
		f.Add(b[len(b)-FooterSize:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == FooterSize {
			_, _ = ParseFooter(b)
		}
		_, _ = Open(bytes.NewReader(b), int64(len(b)))
	})
}

// FuzzMiniBlock decodes arbitrary page buffers under the real mini-block
// layouts of the corpus (the encoding fixed, the bytes fuzzed).
func FuzzMiniBlock(f *testing.F) {
	var layouts [][]byte
	for _, b := range corpusBytes(f) {
		fl, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil || fl.Version() == V2_0 {
			continue
		}
		for _, c := range fl.Columns {
			for _, p := range c.GetPages() {
				pl := &pb.PageLayout{}
				if unwrapEncoding(p.GetEncoding(), "PageLayout", pl) != nil {
					continue
				}
				raw, _ := proto.Marshal(pl)
				bufs, err := fl.pageBuffers(p)
				// Big pages make the fuzzer crawl; small ones cover the same code.
				if err != nil || len(bufs) < 2 || len(bufs[1]) > 16<<10 {
					continue
				}
				layouts = append(layouts, raw)
				f.Add(len(layouts)-1, bufs[0], bufs[1], uint16(p.GetLength()))
			}
		}
	}
	f.Fuzz(func(t *testing.T, which int, b0, b1 []byte, rows uint16) {
		if which < 0 || which >= len(layouts) {
			return
		}
		pl := &pb.PageLayout{}
		if proto.Unmarshal(layouts[which], pl) != nil {
			return
		}
		bufs := [][]byte{b0, b1, b1}
		leaf := DataType{Kind: KindInt64}
		st := time.Now()
		defer func() {
			if d := time.Since(st); d > 2*time.Second {
				panic(fmt.Sprintf("slow input: %v", d))
			}
		}()
		switch l := pl.GetLayout().(type) {
		case *pb.PageLayout_MiniBlockLayout:
			_, _ = decodeMiniBlockPage(l.MiniBlockLayout, bufs, int(rows), leaf, false)
			_, _ = decodeMiniBlockPage(l.MiniBlockLayout, bufs, int(rows), leaf, true)
		case *pb.PageLayout_FullZipLayout:
			_, _ = decodeFullZipPage(l.FullZipLayout, bufs, int(rows), leaf)
		case *pb.PageLayout_ConstantLayout:
			_, _ = decodeConstantPage(l.ConstantLayout, bufs, int(rows), leaf)
		}
	})
}

// FuzzCodecs drives the buffer codecs directly.
func FuzzCodecs(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 0x40, 1, 2, 3, 4}, 4)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		_, _ = unlz4(b)
		_, _ = unzstd(b)
		_, _ = unpackInline(32, b, n)
		_, _ = unpackOutOfLine(16, 3, b, n)
		_, _ = blockVariable(b, n)
		_, _ = chunkVariable(b, n, 32)
		if t, err := parseFSST(b); err == nil {
			_, _ = t.decode(nil, b)
		}
	})
}
