package table

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/format/jsonl"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
)

// Append commits fragments written against read (the version whose schema
// and data_storage_format they were written with) as a Lance Append. files
// are the data keys written for them: removed if the commit certainly
// failed. As in Lance, the unenforced primary key is not checked.
func (h *Handle) Append(ctx context.Context, read *meta.ManifestFile, naming meta.Naming, frags []*pb.DataFragment, files []string) (*commit.Result, error) {
	if len(frags) == 0 {
		return nil, errors.New("append: no fragments")
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_Append_{Append: &pb.Transaction_Append{Fragments: frags}}
	return h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: files})
}

// FileVersion is the file format version a table's data files are written
// in: its data_storage_format.
func FileVersion(m *pb.Manifest) (file.Version, error) {
	df := m.GetDataFormat()
	if df.GetFileFormat() != "lance" {
		return file.Version{}, fmt.Errorf("data format %q is not lance", df.GetFileFormat())
	}
	switch df.GetVersion() {
	case "2.0":
		return file.V2_0, nil
	case "2.1":
		return file.V2_1, nil
	case "2.2":
		return file.V2_2, nil
	}
	return file.Version{}, fmt.Errorf("data_storage_format %q: compactord writes 2.0, 2.1 and 2.2 files only", df.GetVersion())
}

// NewDataFile describes a data file a closed writer wrote, as the
// manifest records it: its leaf field ids and their columns, its version
// and its size (which spares readers a request for the footer).
func NewDataFile(name string, v file.Version, w *file.Writer) *pb.DataFile {
	df := &pb.DataFile{Path: name, FileMajorVersion: uint32(v.Major), FileMinorVersion: uint32(v.Minor), FileSizeBytes: w.Size()}
	df.Fields, df.ColumnIndices = w.DataFileFields()
	return df
}

// DataFileName is a new data file name as Lance makes them: 24 random
// binary digits (spreading files over object-store prefixes) and 26 hex
// digits of a random UUID, then ".lance".
func DataFileName() string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	bits := fmt.Sprintf("%08b%08b%08b", r[0], r[1], r[2])
	_, id := meta.NewUUID()
	return bits + strings.ReplaceAll(id, "-", "")[:26] + ".lance"
}

// Flush thresholds of AppendJSON: rows are handed to the file writer (which
// pages them) in batches of this many rows or bytes.
const (
	appendBatchRows  = 8192
	appendBatchBytes = 16 << 20
)

// LineError is AppendJSON's error for an input line it cannot use.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// AppendJSON writes the JSON lines of r (see package jsonl for the value
// conventions; blank lines are skipped) as one fragment of one data file
// at the table's data_storage_format version, and commits it as an Append.
// Rows stream through the file writer, so memory is bounded by its pages,
// not the input. On any error nothing is committed and the data file is
// abandoned.
func (h *Handle) AppendJSON(ctx context.Context, r io.Reader) (*commit.Result, uint64, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, 0, err
	}
	m := read.Manifest
	v, err := FileVersion(m)
	if err != nil {
		return nil, 0, err
	}
	name := DataFileName()
	key := meta.DataKey(name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ow, err := h.Bucket.NewWriter(wctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("write %s: %w", key, err)
	}
	abandon := func() {
		cancel()
		_ = ow.Close()
	}
	fw, err := file.NewWriter(ow, m.GetFields(), file.WriterOptions{Version: v})
	if err != nil {
		abandon()
		return nil, 0, err
	}
	b, err := jsonl.NewBuilder(fw.Schema().Fields)
	if err != nil {
		abandon()
		return nil, 0, err
	}
	br := bufio.NewReaderSize(r, 1<<16)
	lineNo := 0
	var rows uint64
	// Progress: rows per batch written, in the caller's phase.
	rep := progress.From(ctx)
	flush := func() error {
		if b.Rows() == 0 {
			return nil
		}
		n := b.Rows()
		rows += uint64(n)
		if err := fw.Write(b.Flush()); err != nil {
			return err
		}
		rep.Add(int64(n), 0)
		return nil
	}
	// A line is read in place in br's buffer (AddLine copies what it
	// keeps); one longer than the buffer is gathered in long.
	var long []byte
	readLine := func() ([]byte, error) {
		line, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return line, err
		}
		long = append(long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		return long, err
	}
	for {
		line, rerr := readLine()
		if len(line) > 0 {
			lineNo++
			if len(bytes.TrimSpace(line)) > 0 {
				if err := b.AddLine(line); err != nil {
					abandon()
					return nil, 0, &LineError{Line: lineNo, Err: err}
				}
				if b.Rows() >= appendBatchRows || b.Bytes() >= appendBatchBytes {
					if err := flush(); err != nil {
						abandon()
						return nil, 0, fmt.Errorf("write %s: %w", key, err)
					}
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			abandon()
			return nil, 0, fmt.Errorf("read input: %w", rerr)
		}
		if err := ctx.Err(); err != nil {
			abandon()
			return nil, 0, err
		}
	}
	if err := flush(); err != nil {
		abandon()
		return nil, 0, fmt.Errorf("write %s: %w", key, err)
	}
	if rows == 0 {
		abandon()
		return nil, 0, errors.New("no rows in the input")
	}
	if err := fw.Close(); err != nil {
		abandon()
		return nil, 0, fmt.Errorf("write %s: %w", key, err)
	}
	if err := ow.Close(); err != nil {
		return nil, 0, fmt.Errorf("write %s: %w", key, err)
	}
	df := NewDataFile(name, v, fw)
	frag := &pb.DataFragment{Files: []*pb.DataFile{df}, PhysicalRows: rows}
	res, err := h.Append(ctx, read, naming, []*pb.DataFragment{frag}, []string{key})
	if err != nil {
		return nil, 0, err
	}
	return res, rows, nil
}
