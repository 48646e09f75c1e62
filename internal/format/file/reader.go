package file

import (
	"fmt"
	"io"
	"sort"
	"sync"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// Batch is a set of rows of some top-level fields.
type Batch struct {
	NumRows int
	Fields  []*Field
	Columns []*Array
}

// Column returns the array of the named top-level field, or nil.
func (b *Batch) Column(name string) *Array {
	for i, f := range b.Fields {
		if f.Name == name {
			return b.Columns[i]
		}
	}
	return nil
}

// project resolves top-level field names (nil: every field).
func (f *File) project(names []string) ([]*Field, error) {
	if names == nil {
		return f.Schema.Fields, nil
	}
	out := make([]*Field, 0, len(names))
	for _, n := range names {
		fl := f.Schema.Field(n)
		if fl == nil {
			return nil, fmt.Errorf("lance file: no field %q", n)
		}
		out = append(out, fl)
	}
	return out, nil
}

// leafPaths lists the root-to-leaf paths of a field's columns.
func leafPaths(f *Field) [][]*Field {
	var out [][]*Field
	var walk func(path []*Field, n *Field)
	walk = func(path []*Field, n *Field) {
		path = append(path[:len(path):len(path)], n)
		if n.Column >= 0 {
			out = append(out, path)
			return
		}
		for _, c := range n.Children {
			walk(path, c)
		}
	}
	walk(nil, f)
	return out
}

// pageSpan returns the pages of column c covering rows [start, end) and
// the first row of the first of them.
func (f *File) pageSpan(c int, start, end uint64) (lo, hi int, first uint64, err error) {
	pages := f.Columns[c].GetPages()
	var row uint64
	lo, hi = -1, -1
	for i, p := range pages {
		next := row + p.GetLength()
		if next > start && row < end || (p.GetLength() == 0 && row >= start && row < end) {
			if lo < 0 {
				lo, first = i, row
			}
			hi = i + 1
		}
		row = next
	}
	if row < end {
		return 0, 0, 0, errf("column %d has %d rows, %d asked for", c, row, end)
	}
	if lo < 0 {
		lo, hi, first = 0, 0, start
	}
	return lo, hi, first, nil
}

func (f *File) pageBuffers(p *pb.ColumnMetadata_Page) ([][]byte, error) {
	bufs := make([][]byte, len(p.GetBufferOffsets()))
	for i := range bufs {
		b, err := f.readRange(Buffer{p.BufferOffsets[i], p.BufferSizes[i]})
		if err != nil {
			return nil, err
		}
		bufs[i] = b
	}
	return bufs, nil
}

// decodePage undoes the layout of one 2.1+ page of a leaf column.
// With keep, a mini-block page's FSST-compressed values stay compressed
// (decodeMiniChunks).
func (f *File) decodePage(p *pb.ColumnMetadata_Page, leaf *Field, keep bool) (*leafPage, error) {
	pl := &pb.PageLayout{}
	if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil {
		return nil, err
	}
	bufs, err := f.pageBuffers(p)
	if err != nil {
		return nil, err
	}
	rows := p.GetLength()
	if err := checkCount(rows, int(f.size)); err != nil {
		return nil, err
	}
	switch l := pl.GetLayout().(type) {
	case *pb.PageLayout_MiniBlockLayout:
		return decodeMiniBlockPage(l.MiniBlockLayout, bufs, int(rows), leaf.Type, keep)
	case *pb.PageLayout_FullZipLayout:
		return decodeFullZipPage(l.FullZipLayout, bufs, int(rows), leaf.Type)
	case *pb.PageLayout_ConstantLayout:
		return decodeConstantPage(l.ConstantLayout, bufs, int(rows), leaf.Type)
	case *pb.PageLayout_BlobLayout:
		return nil, errf("blob pages are not supported")
	}
	return nil, errf("page with unknown layout")
}

// fullZipWindow decodes rows [lo, hi) of a full-zip page whose rows are
// items of one stride (fixed-width values, no repetition, no list layer:
// a vector column, whose pages LanceDB writes full-zip), reading only
// their bytes; ok is false for any other page, which decodes whole. A
// page decoded whole for every window of a compaction's scan cost the
// page's size in memory and its decode once per window.
func (f *File) fullZipWindow(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout, leaf *Field, lo, hi uint64) (lp *leafPage, ok bool, err error) {
	bpv, fixed := fz.GetDetails().(*pb.FullZipLayout_BitsPerValue)
	rows := p.GetLength()
	if !fixed || bpv.BitsPerValue == 0 || bpv.BitsPerValue%8 != 0 || fz.GetBitsRep() != 0 || fz.GetBitsDef() > 16 ||
		uint64(fz.GetNumItems()) != rows || len(p.GetBufferOffsets()) < 1 || len(p.GetBufferSizes()) < 1 || lo >= hi {
		return nil, false, nil
	}
	for _, l := range fz.GetLayers() {
		if isListLayer(l) {
			return nil, false, nil
		}
	}
	cw := uint64(0)
	switch bd := fz.GetBitsDef(); {
	case bd == 0:
	case bd <= 8:
		cw = 1
	default:
		cw = 2
	}
	stride := cw + uint64(bpv.BitsPerValue/8)
	if rows == 0 || p.BufferSizes[0]/rows != stride || p.BufferSizes[0]%rows != 0 {
		return nil, false, nil // not the layout assumed here
	}
	data, err := f.readRange(Buffer{p.BufferOffsets[0] + lo*stride, (hi - lo) * stride})
	if err != nil {
		return nil, true, err
	}
	cut := &pb.FullZipLayout{BitsRep: fz.BitsRep, BitsDef: fz.BitsDef, Details: fz.Details, ValueCompression: fz.ValueCompression,
		NumItems: uint32(hi - lo), NumVisibleItems: uint32(hi - lo), Layers: fz.Layers}
	lp, err = decodeFullZipPage(cut, [][]byte{data}, int(hi-lo), leaf.Type)
	return lp, true, err
}

// plainStride is the bytes of a row of leaf in a full-zip page that
// stores its rows' values back to back with nothing to undo, and whether
// page p is one: fixed-width values (a primitive or a fixed-size list of
// one, not bool), no control words (no repetition, no definition levels:
// LanceDB writes a vector column without nulls so), flat values, and a
// value buffer of exactly its rows' bytes inside the file.
func (f *File) plainStride(p *pb.ColumnMetadata_Page, fz *pb.FullZipLayout, leaf *Field) (uint64, bool) {
	t := leaf.Type
	var stride, itemBits uint64
	switch {
	case t.Kind == KindFixedSizeList:
		it := firstChild(leaf)
		if t.Size <= 0 || it == nil || it.Type.Kind == KindBool || it.Type.ByteWidth() == 0 {
			return 0, false
		}
		itemBits = 8 * uint64(it.Type.ByteWidth())
		stride = uint64(t.Size) * uint64(it.Type.ByteWidth())
	case t.Kind != KindBool && t.ByteWidth() > 0:
		stride = uint64(t.ByteWidth())
	default:
		return 0, false
	}
	bpv, ok := fz.GetDetails().(*pb.FullZipLayout_BitsPerValue)
	if !ok || uint64(bpv.BitsPerValue) != 8*stride || fz.GetBitsRep() != 0 || fz.GetBitsDef() != 0 {
		return 0, false
	}
	rows := p.GetLength()
	if uint64(fz.GetNumItems()) != rows || uint64(fz.GetNumVisibleItems()) != rows || len(p.GetBufferOffsets()) < 1 || len(p.GetBufferSizes()) < 1 {
		return 0, false
	}
	for _, l := range fz.GetLayers() {
		if l != pb.RepDefLayer_REPDEF_ALL_VALID_ITEM {
			return 0, false
		}
	}
	switch c := fz.GetValueCompression().GetCompression().(type) {
	case nil:
		if itemBits != 0 {
			return 0, false
		}
	case *pb.CompressiveEncoding_Flat:
		if itemBits != 0 || c.Flat.GetData() != nil || c.Flat.GetBitsPerValue() != 8*stride {
			return 0, false
		}
	case *pb.CompressiveEncoding_FixedSizeList:
		fl := c.FixedSizeList
		v := fl.GetValues().GetFlat()
		if itemBits == 0 || fl.GetHasValidity() || fl.GetItemsPerValue() != uint64(t.Size) || v == nil || v.GetData() != nil || v.GetBitsPerValue() != itemBits {
			return 0, false
		}
	default:
		return 0, false
	}
	off, size := p.BufferOffsets[0], p.BufferSizes[0]
	if size/stride != rows || size%stride != 0 || off > f.size || size > f.size-off {
		return 0, false
	}
	return stride, true
}

// plainFullZipSpan reads rows [start, end) of a column from its pages
// (the first starting at row first) when every one of them is a plain
// full-zip page (plainStride): the bytes read are the values, so they go
// straight into one buffer from rb, with no decode and no copy. ok is
// false for any other span, which the caller decodes page by page.
func (f *File) plainFullZipSpan(pages []*pb.ColumnMetadata_Page, leaf *Field, first, start, end uint64, rb *decodeBufs) (lp *leafPage, ok bool, err error) {
	if len(pages) == 0 || start >= end || f.Version() == V2_0 {
		return nil, false, nil
	}
	var stride uint64
	var enc *pb.CompressiveEncoding
	for _, p := range pages {
		pl := &pb.PageLayout{}
		if unwrapEncoding(p.GetEncoding(), "PageLayout", pl) != nil {
			return nil, false, nil // the page-by-page decode names the error
		}
		fz := pl.GetFullZipLayout()
		if fz == nil {
			return nil, false, nil
		}
		s, plain := f.plainStride(p, fz, leaf)
		if !plain || stride != 0 && s != stride {
			return nil, false, nil
		}
		stride, enc = s, fz.GetValueCompression()
	}
	n := end - start
	// The pages' buffers lie inside the file (plainStride), so a window
	// larger than the file means pages sharing bytes: not a file Lance
	// writes; the page-by-page decode handles it.
	if n > f.size/stride {
		return nil, false, nil
	}
	buf := rb.bytes(int(n * stride))
	row := first
	for _, p := range pages {
		a, b := max(start, row), min(end, row+p.GetLength())
		if a < b {
			dst := buf[(a-start)*stride : (b-start)*stride]
			if _, err := f.readRangeInto(Buffer{p.BufferOffsets[0] + (a-row)*stride, (b - a) * stride}, dst); err != nil {
				return nil, true, err
			}
		}
		row += p.GetLength()
	}
	if row < end {
		return nil, true, errf("pages hold %d rows, %d asked for", row-first, end-first)
	}
	v, err := perValue(enc, &block{n: int(n), bits: int(8 * stride), data: buf})
	if err != nil {
		return nil, true, err
	}
	return &leafPage{rows: int(n), slots: int(n), values: v}, true, nil
}

// decodePageWindow decodes the part of a page that rows [lo, hi) of it
// need (hi may lie past the page) and reports how many leading rows it
// skipped. Only mini-block pages without repetition are cut (their rows
// are their items, so chunk counts locate rows); others decode whole.
func (f *File) decodePageWindow(p *pb.ColumnMetadata_Page, leaf *Field, lo, hi uint64, rb *decodeBufs) (*leafPage, uint64, error) {
	rows := p.GetLength()
	hi = min(hi, rows)
	keep := rb != nil && rb.keepFSST
	if lo == 0 && hi == rows {
		lp, err := f.decodePage(p, leaf, keep)
		return lp, 0, err
	}
	pl := &pb.PageLayout{}
	if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil {
		return nil, 0, err
	}
	if fz := pl.GetFullZipLayout(); fz != nil {
		if lp, ok, err := f.fullZipWindow(p, fz, leaf, lo, hi); ok {
			return lp, lo, err
		}
	}
	ml := pl.GetMiniBlockLayout()
	if ml == nil || ml.GetRepCompression() != nil || len(p.GetBufferOffsets()) < 2 || ml.GetNumItems() != rows {
		lp, err := f.decodePage(p, leaf, keep)
		return lp, 0, err
	}
	meta, err := f.readRange(Buffer{p.BufferOffsets[0], p.BufferSizes[0]})
	if err != nil {
		return nil, 0, err
	}
	chunks, err := miniChunks(ml, meta, int(p.BufferSizes[1]))
	if err != nil {
		return nil, 0, err
	}
	var at uint64
	c0, c1 := -1, -1
	var skipped uint64
	for c, ch := range chunks {
		next := at + uint64(ch.n)
		if next > lo && at < hi || (ch.n == 0 && at >= lo && at < hi) {
			if c0 < 0 {
				c0, skipped = c, at
			}
			c1 = c + 1
		}
		at = next
	}
	if c0 < 0 {
		c0, c1, skipped = 0, 0, lo
	}
	sel := chunks[c0:c1]
	var data []byte
	var pooled *[]byte
	base := 0
	if len(sel) > 0 {
		base = sel[0].off
		endb := sel[len(sel)-1].off + sel[len(sel)-1].size
		// The chunk bytes go into a pooled buffer; it is returned below
		// unless the decoded page still points into it.
		pooled = getReadBuf(endb - base)
		if data, err = f.readRangeInto(Buffer{p.BufferOffsets[1] + uint64(base), uint64(endb - base)}, *pooled); err != nil {
			readBufs.Put(pooled)
			return nil, 0, err
		}
	}
	var dict []byte
	if ml.GetDictionary() != nil && len(p.GetBufferOffsets()) > 2 {
		if dict, err = f.readRange(Buffer{p.BufferOffsets[2], p.BufferSizes[2]}); err != nil {
			return nil, 0, err
		}
	}
	n := 0
	for _, ch := range sel {
		n += ch.n
	}
	lp, err := decodeMiniChunks(ml, sel, data, base, dict, n, leaf.Type, rb, keep)
	if pooled != nil && (err != nil || !lp.aliases(data)) {
		readBufs.Put(pooled)
	}
	return lp, skipped, err
}

// readBufs holds the buffers decodePageWindow reads chunk bytes into
// (*[]byte), so reading a file window by window does not allocate and
// fault in fresh memory per window.
var readBufs sync.Pool

func getReadBuf(n int) *[]byte {
	if b, ok := readBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, n, n+n/4)
	return &b
}

// aliases reports whether the page's values or levels may point into b
// (only values decoded directly, without levels or a dictionary, are
// known not to).
func (lp *leafPage) aliases(b []byte) bool {
	if lp.rep != nil || lp.def != nil || lp.values == nil {
		return true
	}
	v := lp.values
	if v.dim > 0 || v.fields != nil || v.child != nil {
		return true
	}
	return overlaps(v.data, b)
}

// overlaps reports whether a's bytes lie within b's backing array.
func overlaps(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	pa, pb := uintptrOf(a[:1]), uintptrOf(b[:1])
	return pa >= pb && pa < pb+uintptr(cap(b))
}

// readPath decodes one leaf column over the pages covering [start, end)
// and returns its path array trimmed to exactly those rows.
func (f *File) readPath(path []*Field, start, end uint64) (*Array, error) {
	arr, first, err := f.readPathSpan(path, start, end, nil)
	if err != nil {
		return nil, err
	}
	if first != start || uint64(arr.Len) != end-start {
		arr = arr.Slice(int(start-first), int(end-first))
	}
	return arr, nil
}

// readPathSpan decodes the pages of a leaf column covering [start, end)
// into the path array of all their rows, which start at row first.
//
// rb, when not nil, lends buffers for the decoded values.
func (f *File) readPathSpan(path []*Field, start, end uint64, rb *decodeBufs) (arr *Array, first uint64, err error) {
	leaf := path[len(path)-1]
	if f.Version() == V2_0 {
		return nil, 0, errf("internal: 2.0 columns are read by readField20")
	}
	lo, hi, first, err := f.pageSpan(leaf.Column, start, end)
	if err != nil {
		return nil, 0, err
	}
	pages := f.Columns[leaf.Column].GetPages()
	lps := make([]*leafPage, 0, hi-lo)
	pageRow := first
	// Plain fixed-width full-zip pages (vectors) are read straight into
	// one buffer, rows [start, end) only, however many pages they span.
	if lp, ok, err := f.plainFullZipSpan(pages[lo:hi], leaf, first, start, end, rb); ok {
		if err != nil {
			return nil, 0, fmt.Errorf("column %d (%s) pages %d-%d: %w", leaf.Column, leaf.Name, lo, hi-1, err)
		}
		lps, first, lo = append(lps, lp), start, hi
	}
	for i := lo; i < hi; i++ {
		var lp *leafPage
		// The first and last page may be read in part: only the chunks the
		// rows need.
		if i == lo || i == hi-1 {
			var skipped uint64
			lp, skipped, err = f.decodePageWindow(pages[i], leaf, start-min(start, pageRow), end-pageRow, rb)
			if i == lo {
				first += skipped
			}
		} else {
			lp, err = f.decodePage(pages[i], leaf, rb != nil && rb.keepFSST)
		}
		pageRow += pages[i].GetLength()
		if err != nil {
			return nil, 0, fmt.Errorf("column %d (%s) page %d: %w", leaf.Column, leaf.Name, i, err)
		}
		lps = append(lps, lp)
	}
	// Pages kept FSST-compressed become segments of the array, one per
	// page (each with its own table), when every page of the span is one;
	// otherwise they are expanded here.
	var segs []fsstSeg
	if n := keptFSST(lps); n > 0 {
		if n == len(lps) && len(path) == 1 {
			row := 0
			for _, lp := range lps {
				segs = append(segs, fsstSeg{row: row, tab: lp.fsst, t: lp.fsstT})
				row += lp.rows
			}
		} else {
			for _, lp := range lps {
				if lp.fsst != nil {
					if lp.values, err = unfsstBlocks(lp.fsst, []*block{lp.values}); err != nil {
						return nil, 0, err
					}
					lp.fsst, lp.fsstT = nil, nil
				}
			}
		}
	}
	var lp *leafPage
	if len(lps) == 0 {
		lp = &leafPage{values: zeroBlock(leaf.Type, 0)}
	} else if lp, err = concatPages(lps, leaf.Type); err != nil {
		return nil, 0, err
	}
	lists := make([]bool, len(path))
	for i, n := range path {
		lists[len(path)-1-i] = n.Type.Kind == KindList || n.Type.Kind == KindLargeList
	}
	outs, err := unravel(lp, lists)
	if err != nil {
		return nil, 0, fmt.Errorf("column %d (%s): %w", leaf.Column, leaf.Name, err)
	}
	arr, err = buildPath(path, outs, lp.values)
	if err != nil {
		return nil, 0, err
	}
	arr.fsst = segs
	return arr, first, nil
}

// readField decodes rows [start, end) of one top-level field.
func (f *File) readField(fl *Field, start, end uint64) (*Array, error) {
	if f.Version() == V2_0 {
		return f.readField20(fl, start, end)
	}
	var out *Array
	for _, p := range leafPaths(fl) {
		a, err := f.readPath(p, start, end)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = a
		} else {
			mergeInto(out, a)
		}
	}
	if out == nil {
		return nil, errf("field %q has no columns", fl.Name)
	}
	return out, nil
}

// ReadRange decodes rows [start, end) of the named top-level fields (nil:
// all). Only the pages overlapping the range are read.
func (f *File) ReadRange(fields []string, start, end uint64) (*Batch, error) {
	if start > end || end > f.NumRows() {
		return nil, fmt.Errorf("lance file: rows [%d, %d) outside the file's %d", start, end, f.NumRows())
	}
	fls, err := f.project(fields)
	if err != nil {
		return nil, err
	}
	b := &Batch{NumRows: int(end - start), Fields: fls, Columns: make([]*Array, len(fls))}
	for i, fl := range fls {
		if b.Columns[i], err = f.readField(fl, start, end); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// ReadAll decodes every row of the named fields (nil: all).
func (f *File) ReadAll(fields []string) (*Batch, error) { return f.ReadRange(fields, 0, f.NumRows()) }

// Take decodes the given rows (any order, repeats allowed). Rows are
// grouped into runs of nearby rows so that each page is decoded once per
// run.
func (f *File) Take(fields []string, rows []uint64) (*Batch, error) {
	fls, err := f.project(fields)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r >= f.NumRows() {
			return nil, fmt.Errorf("lance file: row %d outside the file's %d", r, f.NumRows())
		}
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rows[order[a]] < rows[order[b]] })
	b := &Batch{NumRows: len(rows), Fields: fls, Columns: make([]*Array, len(fls))}
	const gap = 4096 // rows between takes that still share one decode
	for fi, fl := range fls {
		var parts []*Array
		var partIdx [][]int // positions in the output per part
		for i := 0; i < len(order); {
			j := i + 1
			for j < len(order) && rows[order[j]]-rows[order[j-1]] <= gap {
				j++
			}
			lo, hi := rows[order[i]], rows[order[j-1]]+1
			a, err := f.readField(fl, lo, hi)
			if err != nil {
				return nil, err
			}
			idx := make([]int, j-i)
			pos := make([]int, j-i)
			for k := i; k < j; k++ {
				idx[k-i] = int(rows[order[k]] - lo)
				pos[k-i] = order[k]
			}
			parts = append(parts, a.Take(idx))
			partIdx = append(partIdx, pos)
			i = j
		}
		b.Columns[fi] = gatherParts(fl, parts, partIdx, len(rows))
	}
	return b, nil
}

// gatherParts puts the rows of parts back in request order.
func gatherParts(fl *Field, parts []*Array, pos [][]int, n int) *Array {
	if len(parts) == 1 {
		inv := make([]int, n)
		for k, p := range pos[0] {
			inv[p] = k
		}
		return parts[0].Take(inv)
	}
	if len(parts) == 0 {
		return emptyArray(fl)
	}
	// Concatenate parts, then reorder.
	all := concatArrays(parts)
	inv := make([]int, n)
	at := 0
	for pi := range parts {
		for k, p := range pos[pi] {
			inv[p] = at + k
		}
		at += parts[pi].Len
	}
	return all.Take(inv)
}

// concatArrays joins arrays of one type (built by Take, so fully owned).
// Flat types are joined in one pass (one allocation per buffer: joining
// pairwise copies the growing prefix again for every part); nested ones
// pairwise.
func concatArrays(as []*Array) *Array {
	t := as[0].Type
	if len(as) == 1 || t.Kind == KindList || t.Kind == KindLargeList || t.Kind == KindFixedSizeList || t.Kind == KindStruct || t.Kind == KindNull {
		out := as[0]
		for _, a := range as[1:] {
			out = appendArray(out, a)
		}
		return out
	}
	n, nulls := 0, false
	for _, a := range as {
		n += a.Len
		nulls = nulls || a.Valid != nil
	}
	out := &Array{Type: t, Name: as[0].Name, Len: n}
	if nulls {
		out.Valid = make([]byte, bitmapLen(n))
		at := 0
		for _, a := range as {
			if a.Valid == nil {
				for i := 0; i < a.Len; i++ {
					setBit(out.Valid, at+i)
				}
			} else {
				copyBits(out.Valid, at, a.Valid, 0, a.Len)
			}
			at += a.Len
		}
	}
	switch {
	case t.Kind == KindBool:
		out.Values = make([]byte, bitmapLen(n))
		at := 0
		for _, a := range as {
			copyBits(out.Values, at, a.Values, 0, a.Len)
			at += a.Len
		}
	case t.IsVariable():
		total := int64(0)
		for _, a := range as {
			total += a.Offsets[a.Len] - a.Offsets[0]
		}
		out.Offsets = make([]int64, n+1)
		out.Values = alloc(int(total))
		at, base := 0, int64(0)
		for _, a := range as {
			o0 := a.Offsets[0]
			for i := 1; i <= a.Len; i++ {
				out.Offsets[at+i] = base + a.Offsets[i] - o0
			}
			copy(out.Values[base:], a.Values[o0:a.Offsets[a.Len]])
			base += a.Offsets[a.Len] - o0
			at += a.Len
		}
	default:
		w := t.ByteWidth()
		out.Values = alloc(n * w)
		at := 0
		for _, a := range as {
			copy(out.Values[at*w:], a.Values[:a.Len*w])
			at += a.Len
		}
	}
	return out
}

func appendArray(a, b *Array) *Array {
	n := a.Len + b.Len
	out := &Array{Type: a.Type, Name: a.Name, Len: n}
	if a.Valid != nil || b.Valid != nil {
		out.Valid = make([]byte, bitmapLen(n))
		for i := 0; i < a.Len; i++ {
			if a.IsValid(i) {
				setBit(out.Valid, i)
			}
		}
		for i := 0; i < b.Len; i++ {
			if b.IsValid(i) {
				setBit(out.Valid, a.Len+i)
			}
		}
	}
	switch {
	case a.Type.Kind == KindBool:
		out.Values = make([]byte, bitmapLen(n))
		copyBits(out.Values, 0, a.Values, 0, a.Len)
		copyBits(out.Values, a.Len, b.Values, 0, b.Len)
	case a.Type.IsVariable() || a.Type.Kind == KindList || a.Type.Kind == KindLargeList:
		out.Offsets = make([]int64, n+1)
		copy(out.Offsets, a.Offsets)
		base := a.Offsets[a.Len]
		for i := 1; i <= b.Len; i++ {
			out.Offsets[a.Len+i] = base + b.Offsets[i]
		}
		if a.Type.IsVariable() {
			out.Values = append(append(alloc(0), a.Values[:a.Offsets[a.Len]]...), b.Values[:b.Offsets[b.Len]]...)
		} else {
			out.Children = []*Array{appendArray(a.Children[0], b.Children[0])}
		}
	case a.Type.Kind == KindFixedSizeList:
		out.Children = []*Array{appendArray(a.Children[0], b.Children[0])}
	case a.Type.Kind == KindStruct:
		out.Children = make([]*Array, len(a.Children))
		for i := range a.Children {
			out.Children[i] = appendArray(a.Children[i], b.Children[i])
		}
	case a.Type.Kind == KindNull:
	default:
		w := a.Type.ByteWidth()
		out.Values = alloc(n * w)
		copy(out.Values, a.Values[:a.Len*w])
		copy(out.Values[a.Len*w:], b.Values[:b.Len*w])
	}
	return out
}

func emptyArray(fl *Field) *Array {
	a := &Array{Type: fl.Type, Name: fl.Name}
	switch {
	case fl.Type.IsVariable(), fl.Type.Kind == KindList, fl.Type.Kind == KindLargeList:
		a.Offsets = []int64{0}
	}
	for _, c := range fl.Children {
		a.Children = append(a.Children, emptyArray(c))
	}
	if fl.Type.IsVariable() || fl.Type.Kind == KindList || fl.Type.Kind == KindLargeList {
		a.Values = []byte{}
	}
	if fl.Type.Kind == KindStruct || fl.Type.Kind == KindFixedSizeList || fl.Type.Kind == KindList || fl.Type.Kind == KindLargeList {
		a.Values = nil
	}
	return a
}

// Stream reads the named fields batch by batch. Each leaf column keeps the
// pages of its current batch decoded, so a page is decoded once however
// many batches it feeds, and memory stays bounded by the pages around one
// batch.
type Stream struct {
	f         *File
	fields    []*Field
	batchRows uint64
	next      uint64
	cache     map[int]*spanCache // by column
	// bufs: the buffers of flat columns' replaced windows, by column
	// (NextView only: a view is valid until the next call).
	bufs     map[int]*decodeBufs
	keepFSST bool
}

type spanCache struct {
	arr         *Array
	first, last uint64 // rows [first, last) of arr
}

// Stream returns a reader of batches of up to batchRows rows.
func (f *File) Stream(fields []string, batchRows int) (*Stream, error) {
	if batchRows <= 0 {
		return nil, fmt.Errorf("lance file: batch of %d rows", batchRows)
	}
	fls, err := f.project(fields)
	if err != nil {
		return nil, err
	}
	return &Stream{f: f, fields: fls, batchRows: uint64(batchRows), cache: map[int]*spanCache{}}, nil
}

// KeepFSST makes NextView hand out the FSST-compressed pages of string
// and binary columns still compressed, for Writer.WriteRows to write as
// they are with the same symbol tables instead of expanding and
// compressing them again (it cuts the column's pages where the source
// pages change tables). Call it before the first batch; only WriteRows
// (or Slice and Take, which expand them) may consume such batches.
func (s *Stream) KeepFSST() { s.keepFSST = true }

// keptFSST counts the pages kept FSST-compressed.
func keptFSST(lps []*leafPage) int {
	n := 0
	for _, lp := range lps {
		if lp.fsst != nil {
			n++
		}
	}
	return n
}

// Next returns the next batch, or io.EOF after the last.
func (s *Stream) Next() (*Batch, error) {
	return s.next1(false)
}

func (s *Stream) next1(view bool) (*Batch, error) {
	f := s.f
	if s.next >= f.NumRows() {
		// The last view is invalid now: the stream's buffers go to the
		// next stream.
		for col, rb := range s.bufs {
			var a *Array
			if c := s.cache[col]; c != nil {
				a = c.arr
				delete(s.cache, col)
			}
			rb.release(a)
		}
		s.bufs = nil
		return nil, io.EOF
	}
	start, end := s.next, min(s.next+s.batchRows, f.NumRows())
	b := &Batch{NumRows: int(end - start), Fields: s.fields, Columns: make([]*Array, len(s.fields))}
	for i, fl := range s.fields {
		if f.Version() == V2_0 {
			a, err := f.readField20(fl, start, end)
			if err != nil {
				return nil, err
			}
			b.Columns[i] = a
			continue
		}
		var out *Array
		for _, p := range leafPaths(fl) {
			col := p[len(p)-1].Column
			c := s.cache[col]
			if c == nil || start < c.first || end > c.last {
				var rb *decodeBufs
				if view && len(p) == 1 && (flatKind(fl.Type) && fl.Type.Kind != KindBool && len(fl.Children) == 0 || fslFlatItem(fl.Type, firstChild(fl))) {
					if s.bufs == nil {
						s.bufs = map[int]*decodeBufs{}
					}
					if rb = s.bufs[col]; rb == nil {
						rb = &decodeBufs{keepFSST: s.keepFSST && fl.Type.IsVariable()}
						s.bufs[col] = rb
					}
					if c != nil {
						// Only the stream and the last view (now invalid)
						// point at the window being replaced.
						rb.give(c.arr)
					}
				}
				arr, first, err := f.readPathSpan(p, start, end, rb)
				if err != nil {
					return nil, err
				}
				c = &spanCache{arr: arr, first: first, last: first + uint64(arr.Len)}
				s.cache[col] = c
			}
			var a *Array
			if view {
				a = c.arr.view(int(start-c.first), int(end-c.first))
			} else {
				a = c.arr.Slice(int(start-c.first), int(end-c.first))
			}
			if out == nil {
				out = a
			} else {
				mergeInto(out, a)
			}
		}
		b.Columns[i] = out
	}
	s.next = end
	return b, nil
}
