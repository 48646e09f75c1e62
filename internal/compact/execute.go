package compact

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// decodeWindow is the most rows decoded at once on the re-encode path;
// the writer cuts pages by bytes, so it bounds memory, not the output. On
// the compaction benchmark 32 Ki rows took the same CPU as 64 Ki and 10 MB
// less peak RSS (59-62 MB against 64-79).
const decodeWindow = 32 << 10

// windowBytes is about the bytes of rows (as stored) a decode window
// holds: a wide row (a vector column) gets fewer rows per window, since
// every column of a window is decoded, copied into the writer's page
// buffer past its page size, and read, at once. At 1 Mi rows with an
// 8-float vector (50 bytes a row) a 256 KiB window (5 Ki rows) took the
// peak RSS from 65-70 to 58-62 MiB at the same CPU; minWindowRows keeps
// the per-window work small next to the rows'.
// maxWindowBytes bounds the window of a file of wide rows (over 512
// bytes a row), which minWindowRows alone would make large: 4 Ki rows of
// a 768-d float32 vector are 12 MiB. The rows of such a window are read
// into its buffer, copied into the output page and written from there,
// so the window and the page (widePageBytes) are the whole working set;
// kept within the CPU's caches it cost a fifth of the CPU: compacting 587
// MiB of 768-d vectors took 0.22-0.29 s with 1 MiB windows and pages,
// 0.24-0.25 s with 2 MiB ones, 1.25-1.38 s with 12 MiB windows and 8 MiB
// pages, in alternating runs (the same write(2)s cost 0.13 s from a 1 MiB
// buffer and 0.16-1.31 s from an 8 MiB one on that machine).
const (
	windowBytes    = 256 << 10
	minWindowRows  = 4 << 10
	maxWindowBytes = 2 << 20
)

// windowRows is the decode window for a data file of size bytes holding
// rows rows.
func windowRows(size int64, rows uint64) int {
	if size <= 0 || rows == 0 {
		return decodeWindow
	}
	per := max(1, uint64(size)/rows)
	return int(min(max(windowBytes/per, minWindowRows), decodeWindow, max(1, maxWindowBytes/per)))
}

// Stats count what a compaction did.
type Stats struct {
	Groups          int    `json:"groups"`
	FragmentsIn     int    `json:"fragments_in"`
	FragmentsOut    int    `json:"fragments_out"`
	FragmentsCopied int    `json:"fragments_copied"`
	RowsCopied      uint64 `json:"rows_copied"`
	RowsRewritten   uint64 `json:"rows_rewritten"`
	RowsDropped     uint64 `json:"rows_dropped"`
	BytesRead       uint64 `json:"bytes_read"`
	BytesWritten    uint64 `json:"bytes_written"`
}

func (s *Stats) add(o Stats) {
	s.Groups += o.Groups
	s.FragmentsIn += o.FragmentsIn
	s.FragmentsOut += o.FragmentsOut
	s.FragmentsCopied += o.FragmentsCopied
	s.RowsCopied += o.RowsCopied
	s.RowsRewritten += o.RowsRewritten
	s.RowsDropped += o.RowsDropped
	s.BytesRead += o.BytesRead
	s.BytesWritten += o.BytesWritten
}

// Output is one executed group: its new fragments (ids still 0; Run
// assigns reserved ids), the old addresses that survived, in the order
// their rows were written, and the data files written.
type Output struct {
	Group Group
	// Old are the group's fragments in ascending id order, as read.
	Old []*pb.DataFragment
	New []*pb.DataFragment
	// Changed are the surviving old row addresses. Their rows fill the
	// new fragments in ascending address order (Lance's FRI row map).
	Changed *roaring64.Bitmap
	// Deleted is each old fragment's deletion vector as read, Survivors
	// its other rows (by id).
	Deleted   map[uint64]*roaring.Bitmap
	Survivors map[uint64]*roaring.Bitmap
	Files     []string
	Stats     Stats
}

// Execute writes the new data files of one group of a plan made from m.
// A fragment without deletions whose file matches the table's schema and
// format version is copied page by page without decoding; any other is
// decoded in windows, its deleted rows dropped, and re-encoded. A group's
// rows are split as LanceDB 0.39's compaction splits them (evenSplit),
// or, when MaxRowsPerFile is set, a new file is cut before it would pass
// that many rows; a file is also cut once it reaches MaxBytesPerFile. The files stay invisible until a commit names
// them; on an error the ones written are listed in the error's Output.
func Execute(ctx context.Context, b storage.Bucket, m *pb.Manifest, g Group, o Options) (out *Output, err error) {
	if m.GetWriterFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, fmt.Errorf("compact: the table uses stable row ids; compactord does not rewrite their row-id sequences")
	}
	v, err := table.FileVersion(m)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	maxBytes := o.MaxBytesPerFile
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytesPerFile
	}
	maxRows, even := o.MaxRowsPerFile, o.MaxRowsPerFile == 0
	if even {
		maxRows = evenSplit(g.LiveRows(), o.TargetRowsPerFragment)
	}
	out = &Output{Group: g, Old: g.Old(), Deleted: map[uint64]*roaring.Bitmap{}, Survivors: map[uint64]*roaring.Bitmap{}}
	out.Stats.Groups = 1
	out.Stats.FragmentsIn = len(out.Old)
	var top []string
	for _, f := range m.GetFields() {
		if f.GetParentId() == -1 {
			top = append(top, f.GetName())
		}
	}
	w := &outWriter{ctx: ctx, b: b, fields: m.GetFields(), v: v}
	// The kept rows of a window, shared by the group's rewritten
	// fragments: a fresh one per fragment would be half a MiB of new heap
	// to fault in each time.
	var keep []int
	// Progress: a copied fragment's rows and bytes once it is copied, a
	// rewritten one's rows per decoded window and its bytes at its end.
	rep := progress.From(ctx)
	defer func() {
		w.abandon()
		if cerr := w.waitClose(); err == nil {
			err = cerr
		}
		out.Files = append(out.Files, w.keys...)
		if err != nil {
			err = fmt.Errorf("compact: %w", err)
		}
	}()
	for _, f := range out.Old {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var copied int64 // the rows of a fragment copied whole
		src, size, done, err := openFile(ctx, b, f)
		if err != nil {
			return out, err
		}
		out.Stats.BytesRead += uint64(size)
		key := meta.DataKey(f.GetFiles()[0].GetPath())
		err = func() error {
			defer done()
			if src.NumRows() != f.GetPhysicalRows() {
				return fmt.Errorf("fragment %d: %s has %d rows, the manifest %d", f.GetId(), key, src.NumRows(), f.GetPhysicalRows())
			}
			dv, err := deletion.Read(ctx, b, f.GetId(), f.GetDeletionFile(), f.GetPhysicalRows())
			if err != nil {
				return err
			}
			out.Deleted[f.GetId()] = dv
			phys := f.GetPhysicalRows()
			live := phys - dv.GetCardinality()
			surv := roaring.New()
			surv.AddRange(0, phys)
			surv.AndNot(dv)
			out.Survivors[f.GetId()] = surv
			out.Stats.RowsDropped += phys - live
			// Split evenly, a fragment that would cross a cut is
			// re-encoded, so the cut falls on the row LanceDB's does.
			if dv.IsEmpty() && copyable(src, m.GetFields(), v) && (!even || w.rows+phys <= maxRows) {
				if w.rows > 0 && w.rows+phys > maxRows {
					if err := w.finish(out); err != nil {
						return err
					}
				}
				// Pages are copied without decoding: decode them first, so a
				// damaged file fails the compaction, naming it, instead of
				// being carried into the new fragment (Lance files carry no
				// checksums: decoding is the only check there is). Strings
				// stay FSST-compressed: their bytes are copied as they are.
				if err := src.CheckKeepFSST(nil); err != nil {
					return sourceErr(f.GetId(), key, err)
				}
				if err := w.open(); err != nil {
					return err
				}
				if err := w.w.CopyFile(src); err != nil {
					return fmt.Errorf("fragment %d: copy %s to %s: %w", f.GetId(), key, meta.DataKey(w.name), err)
				}
				w.rows += phys
				copied = int64(phys)
				out.Stats.FragmentsCopied++
				out.Stats.RowsCopied += phys
				if w.rows >= maxRows || w.size() >= maxBytes {
					return w.finish(out)
				}
				return nil
			}
			win := windowRows(size, phys)
			if cap(keep) < win {
				keep = make([]int, 0, win)
			}
			return rewriteRows(ctx, src, key, f, dv, top, w, out, keep[:0:win], maxRows, maxBytes, rep)
		}()
		if err != nil {
			return out, err
		}
		rep.Add(copied, size)
	}
	if w.rows > 0 {
		if err := w.finish(out); err != nil {
			return out, err
		}
	}
	if out.Changed, err = changedAddrs(out.Old, out.Survivors); err != nil {
		return out, err
	}
	return out, nil
}

// evenSplit is the rows per new file of a group of live rows, as LanceDB
// 0.39 (Lance 12) writes a compaction group: as many files as the target
// fits in the rows (at least one), the rows spread evenly over them, so
// no file is below the target (unless the group is) and none reaches
// twice it. Measured: 1 179 648 and 1 887 437 rows are one fragment;
// 2 123 366 are two of 1 061 683.
func evenSplit(live, target uint64) uint64 {
	n := max(1, live/max(target, 1))
	per := (live + n - 1) / n
	if per == 0 || per > MaxTargetRows {
		return MaxTargetRows
	}
	return per
}

// changedAddrs is the 64-bit set of surviving addresses, assembled from
// the per-fragment sets in roaring64's portable form (one 32-bit bitmap
// per fragment id), which costs a copy instead of a union per run.
func changedAddrs(old []*pb.DataFragment, surv map[uint64]*roaring.Bitmap) (*roaring64.Bitmap, error) {
	var buf bytes.Buffer
	var n [8]byte
	k, size := 0, 8
	for _, f := range old {
		if s := surv[f.GetId()]; !s.IsEmpty() {
			s.RunOptimize()
			k++
			size += 4 + int(s.GetSerializedSizeInBytes())
		}
	}
	buf.Grow(size)
	binary.LittleEndian.PutUint64(n[:], uint64(k))
	buf.Write(n[:])
	for _, f := range old {
		s := surv[f.GetId()]
		if s.IsEmpty() {
			continue
		}
		binary.LittleEndian.PutUint32(n[:4], uint32(f.GetId()))
		buf.Write(n[:4])
		if _, err := s.WriteTo(&buf); err != nil {
			return nil, err
		}
	}
	out := roaring64.New()
	if err := out.UnmarshalBinary(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("surviving addresses: %w", err)
	}
	return out, nil
}

// rewriteRows decodes a fragment in windows and writes its live rows.
// keep is scratch for the kept rows of a window, whose rows are its
// capacity.
func rewriteRows(ctx context.Context, src *file.File, key string, f *pb.DataFragment, dv *roaring.Bitmap, top []string, w *outWriter, out *Output, keep []int, target, maxBytes uint64, rep *progress.Reporter) error {
	st, err := src.Stream(top, cap(keep))
	if err != nil {
		return sourceErr(f.GetId(), key, err)
	}
	// FSST compresses each value on its own against its page's symbol
	// table, so dropping rows needs no expansion: the kept values are
	// written still compressed, with their source page's table.
	st.KeepFSST()
	del := dv.Iterator() // deleted rows ascending, walked once
	for off := uint64(0); ; {
		if err := ctx.Err(); err != nil {
			return err
		}
		bt, err := st.NextView()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return sourceErr(f.GetId(), key, err)
		}
		rows := keep[:0]
		end := off + uint64(bt.NumRows)
		r := 0
		for del.HasNext() && uint64(del.PeekNext()) < end {
			d := int(uint64(del.Next()) - off)
			for ; r < d; r++ {
				rows = append(rows, r)
			}
			r = d + 1
		}
		for ; r < bt.NumRows; r++ {
			rows = append(rows, r)
		}
		off = end
		rep.Add(int64(bt.NumRows), 0)
		for len(rows) > 0 {
			if w.w != nil && w.rows >= target {
				if err := w.finish(out); err != nil {
					return err
				}
			}
			if err := w.open(); err != nil {
				return err
			}
			n := min(uint64(len(rows)), target-w.rows)
			part := rows[:n]
			if len(part) == bt.NumRows {
				part = nil // all of them
			}
			// WriteRows copies the rows into the writer's page buffers, so
			// the view of the decoded pages is not kept.
			if err := w.w.WriteRows(bt, part); err != nil {
				return fmt.Errorf("fragment %d: encode %s: %w", f.GetId(), meta.DataKey(w.name), err)
			}
			w.rows += n
			out.Stats.RowsRewritten += n
			rows = rows[n:]
			if w.rows >= target || w.size() >= maxBytes {
				if err := w.finish(out); err != nil {
					return err
				}
			}
		}
	}
}

// sourceErr names the data file a read of fragment id failed on, once:
// the storage layer's errors name the object already.
func sourceErr(id uint64, key string, err error) error {
	if strings.Contains(err.Error(), key) {
		return fmt.Errorf("fragment %d: %w", id, err)
	}
	return fmt.Errorf("fragment %d: %s: %w", id, key, err)
}

// copyable reports whether src's pages can be copied into a file of the
// table's schema and version as they are.
func copyable(src *file.File, fields []*pb.Field, v file.Version) bool {
	if src.Version() != v {
		return false
	}
	sf := src.Desc.GetSchema().GetFields()
	if len(sf) != len(fields) {
		return false
	}
	for i := range sf {
		x, y := sf[i], fields[i]
		if x.GetId() != y.GetId() || x.GetParentId() != y.GetParentId() || x.GetName() != y.GetName() || x.GetLogicalType() != y.GetLogicalType() {
			return false
		}
	}
	for _, c := range src.Columns {
		if len(c.GetBufferOffsets()) > 0 {
			return false
		}
	}
	return true
}

func openFile(ctx context.Context, b storage.Bucket, f *pb.DataFragment) (*file.File, int64, func(), error) {
	if len(f.GetFiles()) != 1 {
		return nil, 0, nil, fmt.Errorf("fragment %d has %d data files; compactord rewrites single-file fragments only", f.GetId(), len(f.GetFiles()))
	}
	df := f.GetFiles()[0]
	key := meta.DataKey(df.GetPath())
	size := int64(df.GetFileSizeBytes())
	if size == 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("fragment %d: %w", f.GetId(), err)
		}
		size = a.Size
	}
	ra := storage.NewReaderAt(ctx, b, key, size)
	done := func() {
		if c, ok := ra.(io.Closer); ok {
			_ = c.Close()
		}
	}
	lf, err := file.Open(ra, size)
	if err != nil {
		done()
		return nil, 0, nil, sourceErr(f.GetId(), key, err)
	}
	return lf, size, done, nil
}

// outWriter is the new data file being written, streamed to the bucket.
type outWriter struct {
	ctx    context.Context
	b      storage.Bucket
	fields []*pb.Field
	v      file.Version

	name   string
	cancel context.CancelFunc
	wc     io.WriteCloser
	bw     *bufio.Writer // nil when wc buffers itself (storage.BuffersWrites)
	w      *file.Writer
	rows   uint64
	keys   []string // files completed
	// closing is the result of the last finished file's Close, running
	// in the background (nil when none is).
	closing    chan error
	closingKey string
}

func (o *outWriter) size() uint64 { return o.w.Size() }

// outBufs recycles the output files' write buffers: a fresh 1 MiB
// buffer per file is a megabyte of page faults on first touch.
var outBufs sync.Pool

func (o *outWriter) open() error {
	if o.w != nil {
		return nil
	}
	o.name = table.DataFileName()
	key := meta.DataKey(o.name)
	wctx, cancel := context.WithCancel(o.ctx)
	// Around the page cache where the bucket can (a local file system):
	// the file is written once and not read back by this job, and copying
	// it into fresh page-cache pages, then waiting for their writeback in
	// the fsync before the commit, was most of a wide compaction's wall
	// (docs/benchmarks.md, "A wide vector column").
	wc, err := o.b.NewWriter(storage.DirectWrites(wctx), key)
	if err != nil {
		cancel()
		return fmt.Errorf("write %s: %w", key, err)
	}
	o.cancel, o.wc = cancel, wc
	var dst io.Writer = wc
	if !storage.BuffersWrites(wc) {
		if bw, ok := outBufs.Get().(*bufio.Writer); ok {
			bw.Reset(wc)
			o.bw = bw
		} else {
			o.bw = bufio.NewWriterSize(wc, 1<<20)
		}
		dst = o.bw
	}
	w, err := file.NewWriter(dst, o.fields, file.WriterOptions{Version: o.v, PageBytes: pageBytes, WidePageBytes: widePageBytes})
	if err != nil {
		o.abandon()
		return err
	}
	o.w, o.rows = w, 0
	return nil
}

// finish closes the file and adds its fragment to out.
func (o *outWriter) finish(out *Output) error {
	if o.w == nil {
		return nil
	}
	key := meta.DataKey(o.name)
	if err := o.w.Close(); err != nil {
		o.abandon()
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if o.bw != nil {
		if err := o.bw.Flush(); err != nil {
			o.abandon()
			return fmt.Errorf("write %s: %w", key, err)
		}
	}
	// The fsync and rename of a finished file (the bucket's Close) run
	// while the next file is written; one at a time, so a group holds at
	// most two files' write buffers. A file's data is durable, and its
	// name too once executeAll syncs the directory, before anything names it.
	if err := o.waitClose(); err != nil {
		o.abandon()
		return err
	}
	wc, cancel, done := o.wc, o.cancel, make(chan error, 1)
	go func() {
		err := wc.Close()
		cancel()
		done <- err
	}()
	o.closing, o.closingKey = done, key
	df := table.NewDataFile(o.name, o.v, o.w)
	rows := o.rows
	if o.bw != nil {
		o.bw.Reset(nil)
		outBufs.Put(o.bw)
	}
	o.w, o.wc, o.bw, o.rows = nil, nil, nil, 0
	// Listed before its Close returns: should that fail, the name is
	// removed with the group's other files (a failed Close leaves none).
	o.keys = append(o.keys, key)
	out.New = append(out.New, &pb.DataFragment{Files: []*pb.DataFile{df}, PhysicalRows: rows})
	out.Stats.FragmentsOut++
	out.Stats.BytesWritten += df.GetFileSizeBytes()
	return nil
}

// waitClose waits for the Close of the last finished file, if any, and
// returns its error.
func (o *outWriter) waitClose() error {
	if o.closing == nil {
		return nil
	}
	err := <-o.closing
	o.closing = nil
	if err != nil {
		return fmt.Errorf("write %s: %w", o.closingKey, err)
	}
	return nil
}

// abandon drops a file being written: closed after its context is
// canceled, nothing is published.
func (o *outWriter) abandon() {
	if o.wc == nil {
		return
	}
	o.cancel()
	_ = o.wc.Close()
	o.w, o.wc, o.bw, o.rows = nil, nil, nil, 0
}

// pageBytes is the page size of compaction outputs: 256 KiB of values
// per column page rather than the writer's 8 MiB default. Every column of
// every file being written holds a page in memory (and the batch that
// crosses it), so this bounds a group's working set. On the compaction
// benchmark 8 MiB pages took more CPU than 2 MiB ones; since strings keep
// their source pages' FSST tables (no symbol table is built per page),
// 1 MiB pages took no more CPU than 2 MiB ones and cut the peak RSS by a
// quarter (85 to 64-72 MB, one group at a time), and 256 KiB pages none
// more than 1 MiB ones, with 5-12 MiB less peak RSS at 1 and 4 Mi rows
// (plain 42-45 to 37-39 MiB at 1 Mi, 56 to 44-48 at 4 Mi).
const pageBytes = 256 << 10

// widePageBytes is the page size of vector columns (fixed-width rows of
// 256 bytes or more, stored full-zip): their rows are copied as they are,
// so a page's size costs only its buffer, while 256 KiB pages of a 768-d
// float32 vector held 86 rows each, 2 100 pages per 553 MB file against
// LanceDB's 24. Larger pages cost more CPU, not less: the page is written
// from its buffer, which should stay in the CPU's caches (maxWindowBytes).
const widePageBytes = 2 << 20
