package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// ErrLeftToLanceDB marks a full-text rebuild compactord refuses because
// it would not tokenize the index's text exactly (its tokenizer, or some
// row's text): not a failure, the index stays LanceDB's to maintain.
var ErrLeftToLanceDB = errors.New("left to LanceDB")

// invertedOpener opens the files of segment m.
func invertedOpener(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata) fts.Opener {
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	return func(name string) (io.ReaderAt, int64, error) {
		key := dir + name
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, 0, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		return storage.NewReaderAt(ctx, b, key, a.Size), a.Size, nil
	}
}

// InvertedRefusal is why a catch-up leaves the full-text index of job p to
// LanceDB, or for later ("" when it catches it up): a segment waiting for
// its remap through the fragment-reuse index ix (nil: none), more than
// one segment, a format it does not read, or a tokenizer it does not
// reproduce. Text a tokenizer refuses is found only as the rows are
// tokenized. The dry run asks the same question, so that its plan names
// what the catch-up then skips.
func InvertedRefusal(ctx context.Context, b storage.Bucket, ix *fri.Index, p Job) string {
	if ix.NeedsRemap(p.Segments[0]) {
		// The new segment copies the old partitions' row addresses and
		// is stamped with the read version: were they still waiting for
		// an FRI remap, readers would never apply it to them.
		return "its segment waits for its physical remap (index remap) first"
	}
	if len(p.Segments) != 1 {
		return fmt.Sprintf("%d segments; compactord adds a partition to a full-text index of one segment", len(p.Segments))
	}
	m, err := fts.ReadMetadata(invertedOpener(ctx, b, p.Segments[0]))
	if err != nil {
		return err.Error()
	}
	if _, err := fts.NewTokenizer(m.Params); err != nil {
		return err.Error()
	}
	return ""
}

// CanRemapInverted says why compactord cannot remap the full-text
// segment m (nil if it can): its metadata.lance names a format it does
// not read.
func CanRemapInverted(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata) error {
	_, err := fts.ReadMetadata(invertedOpener(ctx, b, m))
	return err
}

// RemapInvertedFiles remaps the full-text segment m (fts.RemapEach) and
// hands each file of the new segment to put as it is encoded, counting
// its docs; mem (nil: no bound) holds a partition's memory from a budget
// while it is remapped.
func RemapInvertedFiles(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), mem func(context.Context, int64) (func(), error), put func(name string, data []byte) error) (RemapStats, error) {
	var hold func(int64) (func(), error)
	if mem != nil {
		// A partition's files are decoded whole (postings, docs, tokens)
		// and its new files encoded beside them.
		hold = func(stored int64) (func(), error) { return mem(ctx, 4*stored) }
	}
	fst, err := fts.RemapEach(invertedOpener(ctx, b, m), remap, hold, func(f fts.NamedFile) error { return put(f.Name, f.Data) })
	return RemapStats{Entries: fst.Docs, Kept: fst.Kept, Dropped: fst.Dropped}, err
}

// remapInverted is Remap of a full-text (inverted) segment: fts.Remap
// rewrites its docs, postings and token set for the new addresses; the
// files are written under a new uuid with m's name, fields, details and
// index version, its creation time kept as Lance's remap keeps it.
func remapInverted(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), o RemapOptions) (*pb.IndexMetadata, []string, RemapStats, error) {
	w, put := newWritten(ctx, b)
	st, err := RemapInvertedFiles(ctx, b, m, remap, o.Memory, put)
	if err != nil {
		return nil, w.Keys, st, fmt.Errorf("index %s: %w", m.GetName(), err)
	}
	nm, err := remappedMetadata(m, KindInverted, o, w)
	return nm, w.Keys, st, err
}

// catchUpInverted adds a partition over the live rows of the fragments
// missing to the one segment of a full-text index, as LanceDB's
// optimize() does: a new segment (new uuid) with the old partitions'
// files copied and the new partition, replacing the old one, covering
// the old fragments and the missing ones. An index that would have more
// than maxParts partitions (maxParts > 0) is rebuilt instead: one
// partition over every live row of the version (live), so partitions do
// not pile up. A configuration compactord cannot tokenize exactly gives
// skip (the index is left to LanceDB).
func catchUpInverted(ctx context.Context, b storage.Bucket, reuse *fri.Index, version uint64, p Job, live *roaring.Bitmap, maxParts int, now time.Time) (ix *pb.IndexMetadata, keys []string, rows int, rebuilt bool, skip string, err error) {
	if skip := InvertedRefusal(ctx, b, reuse, p); skip != "" {
		return nil, nil, 0, false, skip, nil
	}
	old := p.Segments[0]
	m, err := fts.ReadMetadata(invertedOpener(ctx, b, old))
	if err != nil {
		return nil, nil, 0, false, err.Error(), nil
	}
	rebuilt = maxParts > 0 && len(m.Partitions)+1 > maxParts
	frags := p.Missing
	if rebuilt {
		frags = live
	}
	ix, keys, rows, skip, err = writeInverted(ctx, b, version, p.Name, p.Field, old, frags, !rebuilt, now)
	return ix, keys, rows, rebuilt, skip, err
}

// writeInverted builds a full-text segment like old over the live rows of
// frags: old plus a partition over them (appendPart), or one partition
// over them alone; the new segment covers old's fragments and frags, or
// frags alone.
func writeInverted(ctx context.Context, b storage.Bucket, version uint64, name string, field *pb.Field, old *pb.IndexMetadata, frags *roaring.Bitmap, appendPart bool, now time.Time) (ix *pb.IndexMetadata, keys []string, rows int, skip string, err error) {
	open := invertedOpener(ctx, b, old)
	m, err := fts.ReadMetadata(open)
	if err != nil {
		return nil, nil, 0, err.Error(), nil
	}
	if _, err := fts.NewTokenizer(m.Params); err != nil {
		return nil, nil, 0, err.Error(), nil
	}
	e, err := Collect(ctx, b, version, field, frags)
	if err != nil {
		return nil, nil, 0, "", err
	}
	if e.Values.Type.Kind != file.KindUtf8 && e.Values.Type.Kind != file.KindLargeUtf8 {
		return nil, nil, 0, fmt.Sprintf("column %q is %s, not a string", field.GetName(), e.Values.Type), nil
	}
	docs := make([]fts.Doc, 0, e.Len())
	for i, a := range e.Addrs {
		if e.Values.IsValid(i) {
			docs = append(docs, fts.Doc{RowID: a, Text: string(e.Values.Bytes(i))})
		}
	}
	var files []fts.NamedFile
	var copies []string
	var n int
	if appendPart {
		files, copies, n, err = fts.Append(open, docs)
	} else {
		files, n, err = fts.Rebuild(open, docs)
	}
	if err != nil {
		// Text the tokenizer refuses (non-ASCII under lower_case) leaves
		// the index to LanceDB; anything else is a failure.
		if errors.Is(err, fts.ErrUntokenizable) {
			return nil, nil, 0, err.Error(), nil
		}
		return nil, nil, 0, "", err
	}
	w, put := newWritten(ctx, b)
	for _, name := range copies {
		r, size, err := open(name)
		if err != nil {
			return nil, w.Keys, 0, "", err
		}
		data := make([]byte, size)
		if _, err := r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, w.Keys, 0, "", err
		}
		if err := put(name, data); err != nil {
			return nil, w.Keys, 0, "", err
		}
	}
	for _, f := range files {
		if err := put(f.Name, f.Data); err != nil {
			return nil, w.Keys, 0, "", err
		}
	}
	slices.SortFunc(w.Files, func(a, b *pb.IndexFile) int { return strings.Compare(a.GetPath(), b.GetPath()) })
	cov := frags.Clone()
	if appendPart {
		ob, known, err := meta.FragmentBitmap(old)
		if err != nil || !known {
			return nil, w.Keys, 0, "", fmt.Errorf("index %s: segment without a fragment bitmap", name)
		}
		cov.Or(ob)
	}
	nm, err := SegmentMetadata(name, old.GetFields(), KindInverted, old, version, cov, w, now)
	if err != nil {
		return nil, w.Keys, 0, "", err
	}
	return nm, w.Keys, n, "", nil
}
