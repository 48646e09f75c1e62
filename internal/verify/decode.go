package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// decodeFile is a data or index file deep verify decodes page by page.
type decodeFile struct {
	check string
	key   string
	// frag, rows and df: the fragment a data file belongs to, its
	// physical rows and the manifest's record of the file (noID, 0 and
	// nil for an index file).
	frag uint64
	rows uint64
	df   *pb.DataFile
}

// toDecode queues a file for decodeFiles (Deep only, once per key).
func (c *checker) toDecode(d decodeFile) {
	if !c.opt.Deep || c.checked["decode "+d.key] {
		return
	}
	c.checked["decode "+d.key] = true
	c.decode = append(c.decode, d)
}

// decodeFiles decodes every queued file, one page in memory at a time,
// and checks it against what the manifest records of it: rows, file
// version, fields and columns. A file that does not decode is a
// violation naming it and the column and page that failed.
func (c *checker) decodeFiles(ctx context.Context) error {
	sort.Slice(c.decode, func(i, j int) bool { return c.decode[i].key < c.decode[j].key })
	var total int64
	for _, d := range c.decode {
		total += c.files[d.key]
	}
	// Progress: rows decoded (summed over columns) and bytes of the files.
	rep := progress.From(ctx)
	rep.Start("verify decode", progress.Units{Bytes: total})
	defer rep.Finish()
	for _, d := range c.decode {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := c.files[d.key]
		var done int64
		err := c.decodeOne(ctx, d, size, func(rows, bytes uint64) {
			rep.Add(int64(rows), int64(bytes))
			done += int64(bytes)
		})
		rep.Add(0, max(size-done, 0)) // the metadata and padding
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) decodeOne(ctx context.Context, d decodeFile, size int64, onPage file.CheckProgress) error {
	if df := d.df; df != nil {
		// A data file of a version compactord does not read (legacy 0.1
		// and 0.2 files record 0.0) is not decoded; one whose footer
		// contradicts a version it reads is damaged.
		v := file.Version{Major: uint16(df.GetFileMajorVersion()), Minor: uint16(df.GetFileMinorVersion())}
		if v != file.V2_0 && v != file.V2_1 && v != file.V2_2 {
			c.warn(d.check, d.key, fmt.Sprintf("of fragment %d not decoded: the manifest records file version %s, which compactord does not read", d.frag, v))
			return nil
		}
	}
	r := storage.NewReaderAt(ctx, c.b, d.key, size)
	defer r.(*storage.ReaderAt).Close()
	// fail sorts an error: the file's bytes (a violation), the object
	// removed since it was listed (a concurrent cleanup: the listing
	// already judged its presence), or storage (verify's own failure).
	what := ""
	if d.df != nil {
		what = fmt.Sprintf("of fragment %d ", d.frag)
	}
	fail := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, file.ErrFormat):
			c.add(d.check, d.key, fmt.Sprintf("%sdoes not decode: %v", what, err))
			return nil
		case storage.IsNotFound(err):
			return nil
		case strings.Contains(err.Error(), d.key):
			return err // the storage layer's errors name the object
		}
		return fmt.Errorf("read %s: %w", d.key, err)
	}
	f, err := file.Open(r, size)
	if err != nil && d.df == nil && errors.Is(err, file.ErrVersion) {
		// An index file of a format version compactord does not read (a
		// newer writer's): not necessarily damaged.
		c.warn(d.check, d.key, fmt.Sprintf("not decoded: %v", err))
		return nil
	}
	if err != nil {
		return fail(err)
	}
	if d.df != nil && !c.dataFileAgrees(d, f) {
		return nil
	}
	if err := f.Check(onPage); err != nil {
		return fail(err)
	}
	return nil
}

// dataFileAgrees checks a data file's metadata against the manifest's
// record of it and its fragment, reporting each disagreement.
func (c *checker) dataFileAgrees(d decodeFile, f *file.File) bool {
	ok := true
	bad := func(format string, args ...any) {
		c.add(d.check, d.key, fmt.Sprintf("of fragment %d: ", d.frag)+fmt.Sprintf(format, args...))
		ok = false
	}
	if d.rows != 0 && f.NumRows() != d.rows {
		bad("holds %d rows, the fragment records %d physical rows", f.NumRows(), d.rows)
	}
	df := d.df
	if maj, min := df.GetFileMajorVersion(), df.GetFileMinorVersion(); maj != 0 || min != 0 {
		if v := f.Version(); uint32(v.Major) != maj || uint32(v.Minor) != min {
			bad("is a %s file, the manifest records %d.%d", v, maj, min)
		}
	}
	if ci := df.GetColumnIndices(); len(ci) > 0 {
		if len(ci) != len(df.GetFields()) {
			bad("the manifest records %d fields but %d column indices", len(df.GetFields()), len(ci))
		}
		for _, k := range ci {
			if k >= int32(len(f.Columns)) {
				bad("the manifest records column %d, the file has %d columns", k, len(f.Columns))
				break
			}
		}
	}
	ids := map[int32]bool{}
	var walk func(fl *file.Field)
	walk = func(fl *file.Field) {
		ids[fl.ID] = true
		for _, ch := range fl.Children {
			walk(ch)
		}
	}
	for _, fl := range f.Schema.Fields {
		walk(fl)
	}
	for _, id := range df.GetFields() {
		if id >= 0 && !ids[id] {
			bad("the manifest records field %d, which the file's schema does not hold", id)
			break
		}
	}
	return ok
}
