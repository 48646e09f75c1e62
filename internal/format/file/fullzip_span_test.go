package file

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"testing"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"google.golang.org/protobuf/proto"
)

// vecItem is item k of row i's vector in vectorFile: exact in float32.
func vecItem(i, k int) float32 { return float32(i) + float32(k)/1024 }

// vectorFile is a 2.2 file of n rows of id (int64, the row) and vec
// (fixed_size_list<float, dim>, null where null says), written with
// WriteRows in batches of 100, as a compaction writes.
func vectorFile(t testing.TB, n, dim int, opts WriterOptions, null func(int) bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, vectorFields(dim), opts)
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < n; lo += 100 {
		m := min(100, n-lo)
		ids := alloc(8 * m)
		items := alloc(4 * m * dim)
		var valid []byte
		for i := range m {
			binary.LittleEndian.PutUint64(ids[8*i:], uint64(lo+i))
			for k := range dim {
				binary.LittleEndian.PutUint32(items[4*(i*dim+k):], math.Float32bits(vecItem(lo+i, k)))
			}
			if null != nil && null(lo+i) {
				if valid == nil {
					valid = make([]byte, bitmapLen(m))
					for j := range m {
						setBit(valid, j)
					}
				}
				valid[i>>3] &^= 1 << (i & 7)
			}
		}
		vt := DataType{Kind: KindFixedSizeList, Size: dim}
		b := &Batch{NumRows: m, Columns: []*Array{
			{Type: DataType{Kind: KindInt64}, Len: m, Values: ids},
			{Type: vt, Len: m, Valid: valid, Children: []*Array{{Type: DataType{Kind: KindFloat32}, Len: m * dim, Values: items}}},
		}}
		if err := w.WriteRows(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// vectorFields is vectorFile's schema.
func vectorFields(dim int) []*lancepb.Field {
	return []*lancepb.Field{
		{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"},
		{Name: "vec", Id: 1, ParentId: -1, LogicalType: "fixed_size_list:float:" + itoa(dim), Nullable: true},
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// checkVectors fails unless a holds rows [row, row+n) of vectorFile's vec
// column (nulls where null says; a null row's items are not compared).
func checkVectors(t *testing.T, a *Array, row, n, dim int, null func(int) bool) {
	t.Helper()
	if a.Len != n || len(a.Children) != 1 || len(a.Children[0].Values) < 4*n*dim {
		t.Fatalf("rows [%d, %d): a vector array of %d rows", row, row+n, a.Len)
	}
	items := a.Children[0].Values
	for i := range n {
		if isNull := null != nil && null(row+i); isNull != !a.IsValid(i) {
			t.Fatalf("row %d: null %v, want %v", row+i, !a.IsValid(i), isNull)
		} else if isNull {
			continue
		}
		for k := range dim {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(items[4*(i*dim+k):])); got != vecItem(row+i, k) {
				t.Fatalf("row %d item %d: %v, want %v", row+i, k, got, vecItem(row+i, k))
			}
		}
	}
}

// vecPages is the pages of f's vec column with their full-zip layouts.
func vecPages(t *testing.T, f *File) ([]*pb.ColumnMetadata_Page, []*pb.FullZipLayout) {
	t.Helper()
	pages := f.Columns[f.Schema.Field("vec").Column].GetPages()
	var fzs []*pb.FullZipLayout
	for i, p := range pages {
		pl := &pb.PageLayout{}
		if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil || pl.GetFullZipLayout() == nil {
			t.Fatalf("vec page %d is not full-zip (%v)", i, err)
		}
		fzs = append(fzs, pl.GetFullZipLayout())
	}
	return pages, fzs
}

// TestPlainFullZipSpan: the writer stores a vector column without nulls
// (384-byte rows) full-zip as its rows' bytes back to back, which the
// general full-zip decoder reads back; the reader takes such pages as
// they are (plainStride), and windows that start and end inside pages
// and span several read the rows, from a buffer reused window after
// window (not a fresh one per window).
func TestPlainFullZipSpan(t *testing.T) {
	const n, dim = 1000, 96
	b := vectorFile(t, n, dim, WriterOptions{PageBytes: 16 << 10}, nil)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	vec := f.Schema.Field("vec")
	pages, fzs := vecPages(t, f)
	if len(pages) < 10 {
		t.Fatalf("%d vector pages; want many small ones", len(pages))
	}
	row := 0
	for i, p := range pages {
		stride, ok := f.plainStride(p, fzs[i], vec)
		if !ok || stride != 4*dim {
			t.Fatalf("page %d: plain %v, stride %d; want a plain page of %d-byte rows", i, ok, stride, 4*dim)
		}
		data, err := f.readRange(Buffer{p.BufferOffsets[0], p.BufferSizes[0]})
		if err != nil {
			t.Fatal(err)
		}
		m := int(p.GetLength())
		want := make([]byte, 0, m*4*dim)
		for r := row; r < row+m; r++ {
			for k := range dim {
				want = binary.LittleEndian.AppendUint32(want, math.Float32bits(vecItem(r, k)))
			}
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("page %d: its buffer is not rows [%d, %d) back to back", i, row, row+m)
		}
		lp, err := f.decodePage(p, vec, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(leafBytes(t, lp), want) {
			t.Fatalf("page %d: the general full-zip decoder reads other values", i)
		}
		row += m
	}
	for _, w := range []int{1, 7, 41, 100, 333, n} {
		st, err := f.Stream(nil, w)
		if err != nil {
			t.Fatal(err)
		}
		bufs := map[*byte]bool{}
		row := 0
		for {
			bt, err := st.NextView()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("windows of %d: %v", w, err)
			}
			checkVectors(t, bt.Column("vec"), row, bt.NumRows, dim, nil)
			if id := int(binary.LittleEndian.Uint64(bt.Column("id").Values)); id != row {
				t.Fatalf("windows of %d: id %d at row %d", w, id, row)
			}
			bufs[&bt.Column("vec").Children[0].Values[0]] = true
			row += bt.NumRows
		}
		if row != n {
			t.Fatalf("windows of %d: %d rows read", w, row)
		}
		if len(bufs) > 2 {
			t.Errorf("windows of %d: the vectors came in %d buffers; want one reused", w, len(bufs))
		}
	}
	for _, r := range [][2]int{{0, n}, {3, 4}, {40, 900}, {n - 1, n}} {
		bt, err := f.ReadRange([]string{"vec"}, uint64(r[0]), uint64(r[1]))
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, bt.Column("vec"), r[0], r[1]-r[0], dim, nil)
	}
}

// TestPlainFullZipSpanNulls: a vector column with null rows has a
// control word per row, so no page is plain; windows still read every
// row and null where they were written.
func TestPlainFullZipSpanNulls(t *testing.T) {
	const n, dim = 700, 80
	null := func(i int) bool { return i%7 == 3 }
	b := vectorFile(t, n, dim, WriterOptions{PageBytes: 16 << 10}, null)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	pages, fzs := vecPages(t, f)
	for i, p := range pages {
		if _, ok := f.plainStride(p, fzs[i], f.Schema.Field("vec")); ok || fzs[i].GetBitsDef() == 0 {
			t.Fatalf("page %d: plain %v, bits_def %d; want control words", i, ok, fzs[i].GetBitsDef())
		}
	}
	for _, w := range []int{9, 64, n} {
		st, err := f.Stream(nil, w)
		if err != nil {
			t.Fatal(err)
		}
		row := 0
		for {
			bt, err := st.NextView()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, bt.Column("vec"), row, bt.NumRows, dim, null)
			row += bt.NumRows
		}
		if row != n {
			t.Fatalf("windows of %d: %d rows read", w, row)
		}
	}
}

// TestPlainStrideRefuses: a full-zip page is taken as its rows' bytes only
// when nothing in it needs decoding and its buffer is exactly its rows
// inside the file; each departure from the plain page below sends it to
// the general decoder.
func TestPlainStrideRefuses(t *testing.T) {
	b := vectorFile(t, 50, 64, WriterOptions{}, nil)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	vec := f.Schema.Field("vec")
	pages, fzs := vecPages(t, f)
	if _, ok := f.plainStride(pages[0], fzs[0], vec); !ok {
		t.Fatal("the unchanged page is not plain")
	}
	for _, c := range []struct {
		name string
		edit func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout)
	}{
		{"control words", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { fz.BitsDef = 1 }},
		{"repetition", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { fz.BitsRep = 1 }},
		{"other width", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: 8 * 128}
		}},
		{"variable", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.Details = &pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 32}
		}},
		{"items", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { fz.NumItems++ }},
		{"visible items", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { fz.NumVisibleItems-- }},
		{"nullable layer", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.Layers = []pb.RepDefLayer{pb.RepDefLayer_REPDEF_NULLABLE_ITEM}
		}},
		{"item validity", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.GetValueCompression().GetFixedSizeList().HasValidity = true
		}},
		{"items per value", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.GetValueCompression().GetFixedSizeList().ItemsPerValue = 32
		}},
		{"compressed items", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.GetValueCompression().GetFixedSizeList().Values = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_General{General: &pb.General{}}}
		}},
		{"flat with data", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) {
			fz.GetValueCompression().GetFixedSizeList().GetValues().GetFlat().Data = &pb.BufferCompression{}
		}},
		{"short buffer", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { p.BufferSizes[0] -= 4 }},
		{"long buffer", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { p.BufferSizes[0] += 256 }},
		{"past the file", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { p.BufferOffsets[0] = uint64(len(b)) - 8 }},
		{"no buffer", func(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout) { p.BufferOffsets, p.BufferSizes = nil, nil }},
	} {
		p := proto.Clone(pages[0]).(*pb.ColumnMetadata_Page)
		fz := proto.Clone(fzs[0]).(*pb.FullZipLayout)
		c.edit(p, fz)
		if _, ok := f.plainStride(p, fz, vec); ok {
			t.Errorf("%s: taken as plain", c.name)
		}
	}
}

// TestWidePageBytes: WidePageBytes sizes the pages of a vector column of
// 256 bytes or more a row (LanceDB's full-zip), not of a narrow one nor
// of the other columns, which keep PageBytes.
func TestWidePageBytes(t *testing.T) {
	count := func(dim, wide int) (vecPages, idPages int) {
		b := vectorFile(t, 1000, dim, WriterOptions{PageBytes: 4 << 10, WidePageBytes: wide}, nil)
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stream(nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, bt.Column("vec"), 0, 1000, dim, nil)
		return len(f.Columns[f.Schema.Field("vec").Column].GetPages()), len(f.Columns[f.Schema.Field("id").Column].GetPages())
	}
	// 1 000 rows of 384 bytes: about 94 pages of 4 KiB, 6 of 64 KiB.
	small, idSmall := count(96, 0)
	large, idLarge := count(96, 64<<10)
	if small < 60 || large < 4 || large > 8 || idSmall != idLarge {
		t.Errorf("384-byte rows: %d vector pages at 4 KiB, %d with 64 KiB wide pages (want about 94 and 6); id pages %d and %d (want equal)", small, large, idSmall, idLarge)
	}
	// 32-byte rows are mini-block, not wide: PageBytes sizes them.
	if n0, _ := count(8, 0); n0 < 4 {
		t.Errorf("32-byte rows: %d pages at 4 KiB", n0)
	} else if n1, _ := count(8, 64<<10); n1 != n0 {
		t.Errorf("32-byte rows: %d pages with wide pages of 64 KiB, %d without", n1, n0)
	}
}

// TestLanceDBReadsPlainVectors: LanceDB 0.39 reads vector columns written
// as their rows' bytes (several plain pages; pages of WidePageBytes) and
// with null vectors as the rows written.
func TestLanceDBReadsPlainVectors(t *testing.T) {
	lancedb.Require(t)
	const n, dim = 300, 96
	dir := t.TempDir()
	var cases []lancedbCase
	for _, c := range []struct {
		name string
		opts WriterOptions
		null func(int) bool
	}{
		{"plainvec_pages", WriterOptions{PageBytes: 16 << 10}, nil},
		{"plainvec_wide", WriterOptions{PageBytes: 4 << 10, WidePageBytes: 64 << 10}, nil},
		{"nullvec_pages", WriterOptions{PageBytes: 16 << 10}, func(i int) bool { return i%7 == 3 }},
	} {
		data := vectorFile(t, n, dim, c.opts, c.null)
		writeTable(t, dir, c.name, vectorFields(dim), data, V2_2, []int32{0, 1}, []int32{0, 1}, n)
		ids := alloc(8 * n)
		items := alloc(4 * n * dim)
		valid := make([]byte, bitmapLen(n))
		for i := range n {
			binary.LittleEndian.PutUint64(ids[8*i:], uint64(i))
			for k := range dim {
				binary.LittleEndian.PutUint32(items[4*(i*dim+k):], math.Float32bits(vecItem(i, k)))
			}
			if c.null == nil || !c.null(i) {
				setBit(valid, i)
			}
		}
		vec := &Array{Type: DataType{Kind: KindFixedSizeList, Size: dim}, Len: n, Valid: valid,
			Children: []*Array{{Type: DataType{Kind: KindFloat32}, Len: n * dim, Values: items}}}
		cols := map[string]json.RawMessage{}
		for name, a := range map[string]*Array{"id": {Type: DataType{Kind: KindInt64}, Len: n, Values: ids}, "vec": vec} {
			raw, err := json.Marshal(canonColumn(a))
			if err != nil {
				t.Fatal(err)
			}
			cols[name] = raw
		}
		cases = append(cases, lancedbCase{name: c.name, want: &oracle{Rows: n, Columns: cols}})
	}
	lancedbRead(t, dir, cases)
}
