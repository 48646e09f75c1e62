package file

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

// CopyColumns copies the pages of some columns of src (indices as in
// File.Columns) to the same columns of the file being written, appending
// src's rows to just those columns. With CopyColumns a file can be
// assembled from unchanged columns of several files; every column must
// hold the same number of rows at Close. Columns are leaves in 2.1+ and
// schema nodes in 2.0 (see Field.Column).
func (w *Writer) CopyColumns(src *File, columns []int) error {
	if err := w.copyColumns(src, columns); err != nil {
		return err
	}
	// The file's rows are the rows its top-level columns hold.
	w.rows = 0
	for _, f := range w.schema.Fields {
		for _, p := range leafPaths(f) {
			c := p[0].Column
			if w.opts.Version != V2_0 {
				c = p[len(p)-1].Column
			}
			w.rows = max(w.rows, w.colRows[c])
		}
	}
	return nil
}

// spareHeld is the bytes sparePool keeps (tests).
func spareHeld() int {
	sparePool.mu.Lock()
	defer sparePool.mu.Unlock()
	return sparePool.held
}

// decode appends the expansion of src to dst.
func (t *fsstTable) decode(dst, src []byte) ([]byte, error) {
	if t.raw {
		return append(dst, src...), nil
	}
	n, err := t.expandedLen(src)
	if err != nil {
		return nil, err
	}
	pos := len(dst)
	dst = append(dst, make([]byte, n)...)
	t.expand(dst, pos, src)
	return dst, nil
}

func newFSSTEncoder() *fsstEncoder {
	e := &fsstEncoder{}
	e.reset()
	return e
}

// build makes the symbol table from a sample of values.
func (e *fsstEncoder) build(sample [][]byte) {
	e.buildCounts(sample, nil)
}

// compress appends the compressed form of the value data[lo:hi] to dst;
// bytes of data past hi may be loaded but never matched.
func (e *fsstEncoder) compress(dst, data []byte, lo, hi int) []byte {
	for i := lo; i < hi; {
		c, l := e.match(load(data, i), hi-i)
		if c >= fsstPseudo {
			dst = append(dst, fsstEscape, data[i])
		} else {
			dst = append(dst, byte(c))
		}
		i += l
	}
	return dst
}
