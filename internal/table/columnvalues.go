package table

import (
	"errors"
	"io"

	"github.com/parquet-go/parquet-go"
)

// ReadColumnValues calls fn with the values of a column chunk in batches of
// at most len(buf), page by page, so memory is bounded by one page, never a
// row group. It stops early when done (may be nil) reports true. Values
// handed to fn point into the page and are valid only during the call. A
// reader that returns no values and no error is an error (io.ErrNoProgress),
// not a spin.
func ReadColumnValues(cc parquet.ColumnChunk, buf []parquet.Value, fn func([]parquet.Value) error, done func() bool) error {
	pages := cc.Pages()
	defer pages.Close()
	stop := func() bool { return done != nil && done() }
	for !stop() {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = readPage(p, buf, fn, stop)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
	return nil
}

func readPage(p parquet.Page, buf []parquet.Value, fn func([]parquet.Value) error, stop func() bool) error {
	vr := p.Values()
	for !stop() {
		n, err := vr.ReadValues(buf)
		if n > 0 {
			if ferr := fn(buf[:n]); ferr != nil {
				return ferr
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		case n == 0:
			return io.ErrNoProgress
		}
	}
	return nil
}
