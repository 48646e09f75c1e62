package file

import (
	"errors"
	"fmt"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// PageError is a page of a file that does not decode, or decodes to
// something its metadata contradicts. It names the column (the leaf
// column's index and its field's name) and the page within the column.
type PageError struct {
	Column int
	Field  string
	Page   int
	Err    error
}

func (e *PageError) Error() string {
	return fmt.Sprintf("column %d (%s) page %d: %v", e.Column, e.Field, e.Page, e.Err)
}

func (e *PageError) Unwrap() error { return e.Err }

// CheckProgress is called after each page Check decoded, with the page's
// rows and the bytes of its buffers.
type CheckProgress func(rows, bytes uint64)

// Check decodes every page of every column of the file, one page at a
// time, and checks what decoding alone cannot see: each page decodes to
// exactly the rows its metadata gives, the decoded values are well formed
// (offsets monotone and within the values, validity and fixed-width
// buffers as long as the rows, list items and fixed-size-list children as
// many as the offsets and sizes say, dictionary indices of non-null slots
// within the dictionary: 2.1+), and each column holds the file's rows. Open has already checked the footer, the metadata tables and that
// every buffer lies inside the file.
//
// Memory is one decoded page (and its buffers) at a time, whatever the
// size of the file. The error of a page is a *PageError (wrapping
// ErrFormat for malformed bytes); a failure of the reader is returned as
// it is.
//
// What Check cannot see: bytes changed inside a page whose encoding has
// no redundancy (plain fixed-width values, bitpacked integers within their
// width) decode as other valid values. Lance files carry no checksums.
func (f *File) Check(progress CheckProgress) error {
	return f.check(progress, false)
}

// CheckKeepFSST is Check without expanding FSST-compressed strings: their
// symbol tables, compressed offsets and lengths are checked, not the
// expansion of each value, which was about a third of the CPU of
// checking a file of short strings. For a reader that copies the pages
// as they are (the compressed bytes move unchanged). It cannot see what
// only an expansion finds: an escape code that ends a value.
func (f *File) CheckKeepFSST(progress CheckProgress) error {
	return f.check(progress, true)
}

func (f *File) check(progress CheckProgress, keepFSST bool) error {
	if f.Version() == V2_0 {
		return f.check20(progress)
	}
	for _, fl := range f.Schema.Fields {
		for _, path := range leafPaths(fl) {
			if err := f.checkPath(path, progress, keepFSST); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *File) checkPath(path []*Field, progress CheckProgress, keepFSST bool) error {
	leaf := path[len(path)-1]
	lists := make([]bool, len(path))
	for i, n := range path {
		lists[len(path)-1-i] = n.Type.Kind == KindList || n.Type.Kind == KindLargeList
	}
	pages := f.Columns[leaf.Column].GetPages()
	for i, p := range pages {
		fail := func(err error) error {
			return &PageError{Column: leaf.Column, Field: fieldPath(path), Page: i, Err: err}
		}
		lp, err := f.decodePage(p, leaf, keepFSST)
		if err != nil {
			return fail(err)
		}
		if uint64(lp.rows) != p.GetLength() {
			return fail(errf("decodes to %d rows, its metadata says %d", lp.rows, p.GetLength()))
		}
		if err := lp.dictInRange(); err != nil {
			return fail(err)
		}
		outs, err := unravel(lp, lists)
		if err != nil {
			return fail(err)
		}
		arr, err := buildPath(path, outs, lp.values)
		if err != nil {
			return fail(err)
		}
		if uint64(arr.Len) != p.GetLength() {
			return fail(errf("decodes to %d rows, its metadata says %d", arr.Len, p.GetLength()))
		}
		if err := arr.wellFormed(); err != nil {
			return fail(err)
		}
		if progress != nil {
			progress(p.GetLength(), pageBytes(p))
		}
	}
	return nil
}

// check20 checks a 2.0 file: every page of every column decoded on its
// own (list columns' pages as offsets, struct columns' pages only
// counted: they hold no values), each column holding the rows its parent
// says.
func (f *File) check20(progress CheckProgress) error {
	var walk func(fl *Field, rows uint64, name string) error
	walk = func(fl *Field, rows uint64, name string) error {
		if fl.Column < 0 {
			return nil
		}
		pages := f.Columns[fl.Column].GetPages()
		var got, items uint64
		for i, p := range pages {
			fail := func(err error) error {
				return &PageError{Column: fl.Column, Field: name, Page: i, Err: err}
			}
			n := p.GetLength()
			var err error
			switch {
			case n == 0:
			case fl.Type.Kind == KindStruct && !fl.Packed():
				// A struct column's pages carry no buffers of their own.
			case fl.Type.Kind == KindList || fl.Type.Kind == KindLargeList:
				var offs []int64
				offs, _, _, err = f.listOffsets20(fl.Column, got, got+n)
				if err == nil {
					if uint64(len(offs)) != n+1 {
						err = errf("decodes to %d rows, its metadata says %d", len(offs)-1, n)
					} else if offs[n] < 0 {
						err = errf("list offsets end at %d", offs[n])
					} else {
						items += uint64(offs[n])
					}
				}
			default:
				var d *decoded20
				d, _, err = f.column20(fl.Column, fl.Type, got, got+n)
				if err == nil {
					a := &Array{Type: fl.Type, Name: fl.Name, Len: d.b.n, Valid: d.valid}
					if err = fillValues(a, fl, d.b); err == nil {
						if uint64(a.Len) != n {
							err = errf("decodes to %d rows, its metadata says %d", a.Len, n)
						} else {
							err = a.wellFormed()
						}
					}
				}
			}
			if err != nil {
				var pe *PageError
				if errors.As(err, &pe) {
					return err
				}
				return fail(err)
			}
			got += n
			if progress != nil {
				progress(n, pageBytes(p))
			}
		}
		if got != rows {
			return &PageError{Column: fl.Column, Field: name, Page: len(pages), Err: errf("the column has %d rows, %d expected", got, rows)}
		}
		switch {
		case fl.Type.Kind == KindList || fl.Type.Kind == KindLargeList:
			if len(fl.Children) == 1 {
				return walk(fl.Children[0], items, name+"."+fl.Children[0].Name)
			}
		case fl.Type.Kind == KindStruct && !fl.Packed():
			for _, c := range fl.Children {
				if err := walk(c, rows, name+"."+c.Name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, fl := range f.Schema.Fields {
		if err := walk(fl, f.NumRows(), fl.Name); err != nil {
			return err
		}
	}
	return nil
}

// dictInRange reports a valid slot whose dictionary index is out of range
// (the decoders read any such index as entry 0, since null slots may hold
// any). Without definition levels every slot is valid; with them, a slot
// is valid when its level is 0 (when values and levels do not pair up
// slot for slot, the page is not judged).
func (lp *leafPage) dictInRange() error {
	v := lp.values
	if v == nil || len(v.outOfDict) == 0 {
		return nil
	}
	if lp.def != nil && len(lp.def) != v.n {
		return nil
	}
	for _, i := range v.outOfDict {
		if lp.def == nil || lp.def[i] == 0 {
			return errf("value %d: dictionary index out of range", i)
		}
	}
	return nil
}

func pageBytes(p *pb.ColumnMetadata_Page) uint64 {
	var n uint64
	for _, s := range p.GetBufferSizes() {
		n += s
	}
	return n
}

// fieldPath names a leaf by its path from the top-level field.
func fieldPath(path []*Field) string {
	s := path[0].Name
	for _, n := range path[1:] {
		s += "." + n.Name
	}
	return s
}

// wellFormed checks the buffers of a decoded array against its length and
// type, recursively: what a reader indexing into it relies on.
func (a *Array) wellFormed() error {
	if a.Len < 0 {
		return errf("%d rows", a.Len)
	}
	if a.Valid != nil && len(a.Valid) < bitmapLen(a.Len) {
		return errf("validity of %d bytes for %d rows", len(a.Valid), a.Len)
	}
	t := a.Type
	offsets := func(limit int) error {
		if len(a.Offsets) != a.Len+1 {
			return errf("%d offsets for %d rows", len(a.Offsets), a.Len)
		}
		if a.Offsets[0] < 0 {
			return errf("offset 0 is %d", a.Offsets[0])
		}
		for i := 1; i <= a.Len; i++ {
			if a.Offsets[i] < a.Offsets[i-1] {
				return errf("offset %d (%d) is below offset %d (%d)", i, a.Offsets[i], i-1, a.Offsets[i-1])
			}
		}
		if a.Offsets[a.Len] > int64(limit) {
			return errf("offsets end at %d, past the %d values", a.Offsets[a.Len], limit)
		}
		return nil
	}
	switch {
	case t.Kind == KindNull:
	case t.Kind == KindBool:
		if len(a.Values) < bitmapLen(a.Len) {
			return errf("%d value bytes for %d booleans", len(a.Values), a.Len)
		}
	case t.IsVariable():
		return offsets(len(a.Values))
	case t.Kind == KindList || t.Kind == KindLargeList:
		if len(a.Children) != 1 {
			return errf("list with %d children", len(a.Children))
		}
		if err := offsets(a.Children[0].Len); err != nil {
			return err
		}
		return a.Children[0].wellFormed()
	case t.Kind == KindFixedSizeList:
		if len(a.Children) != 1 {
			return errf("fixed-size list with %d children", len(a.Children))
		}
		if a.Children[0].Len != a.Len*t.Size {
			return errf("%d items for %d lists of %d", a.Children[0].Len, a.Len, t.Size)
		}
		return a.Children[0].wellFormed()
	case t.Kind == KindStruct:
		for _, c := range a.Children {
			if c.Len != a.Len {
				return errf("struct field %q has %d rows, the struct %d", c.Name, c.Len, a.Len)
			}
			if err := c.wellFormed(); err != nil {
				return fmt.Errorf("field %q: %w", c.Name, err)
			}
		}
	default:
		if w := t.ByteWidth(); w > 0 && len(a.Values) < a.Len*w {
			return errf("%d value bytes for %d values of %d bytes", len(a.Values), a.Len, w)
		}
	}
	return nil
}
