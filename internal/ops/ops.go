// Package ops holds the operator-facing table operations: create, append,
// delete and scan. Each plans against one read version, writes files that
// stay invisible until committed, and commits one transaction.
package ops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Table is an open table: a bucket plus the committer that publishes to it.
type Table struct {
	Bucket    storage.Bucket
	Committer *commit.Committer
	Now       func() time.Time
	Logger    *zap.Logger
	// MaxRowsPerFragment splits large appends.
	MaxRowsPerFragment int
}

// NewTable wires a table. now and logger may be nil.
func NewTable(b storage.Bucket, c *commit.Committer, now func() time.Time, logger *zap.Logger) *Table {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Table{Bucket: b, Committer: c, Now: now, Logger: logger, MaxRowsPerFragment: 1 << 20}
}

// NewTxn starts a transaction against readVersion.
func (t *Table) NewTxn(readVersion uint64) *pb.Transaction {
	return &pb.Transaction{ReadVersion: readVersion, Uuid: uuid.NewString(), TimestampMicros: t.Now().UnixMicro()}
}

// CommitOrClean commits txn and, when it definitely did not commit, deletes
// the data files the caller wrote for it. An ambiguous outcome keeps them.
func (t *Table) CommitOrClean(ctx context.Context, txn *pb.Transaction, files []string) (*commit.Result, error) {
	res, err := t.Committer.Commit(ctx, txn)
	if err != nil {
		var ae *commit.AmbiguousError
		if !errors.As(err, &ae) {
			t.removeFiles(ctx, files)
		}
		return nil, err
	}
	t.removeFiles(ctx, res.Garbage)
	return res, nil
}

func (t *Table) removeFiles(ctx context.Context, files []string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, f := range files {
		if err := t.Bucket.Delete(dctx, f); err != nil && !storage.IsNotFound(err) {
			t.Logger.Warn("could not remove an uncommitted file; orphan cleanup will", zap.String("key", f), zap.Error(err))
		}
	}
}

// Create commits version 1 with schema.
func (t *Table) Create(ctx context.Context, schema *pb.Schema) (*pb.Manifest, error) {
	if err := table.ValidateSchema(schema); err != nil {
		return nil, err
	}
	if _, err := table.LatestVersion(ctx, t.Bucket); err == nil {
		return nil, fmt.Errorf("a table already exists here")
	} else if !errors.Is(err, table.ErrNoTable) {
		return nil, err
	}
	txn := t.NewTxn(0)
	txn.Operation = &pb.Transaction_Create{Create: &pb.Create{Schema: schema}}
	res, err := t.CommitOrClean(ctx, txn, nil)
	if err != nil {
		return nil, err
	}
	return res.Manifest, nil
}

// ReadJSONLines parses JSON lines into rows, failing on the first bad line
// with its line number. Blank lines are skipped.
func ReadJSONLines(s *pb.Schema, r io.Reader) ([]table.Row, []string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	var rows []table.Row
	var opsOut []string
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		row, op, err := table.ParseJSONRow(s, b)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", line, err)
		}
		rows = append(rows, row)
		opsOut = append(opsOut, op)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	return rows, opsOut, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// appendRechecks bounds how often an append re-checks its keys after a
// concurrent insert of keys it may share.
const appendRechecks = 5

// Append inserts rows as new fragments. Primary keys must be unique within
// the rows and absent from the table. The absence is checked at the read
// version, and the transaction carries its key set: an append or merge
// committed since with keys it may share is a retryable conflict, after
// which the keys are checked again against the fragments added since (the
// data files written are reused), and the append commits or fails.
func (t *Table) Append(ctx context.Context, rows []table.Row) (*commit.Result, error) {
	head, err := table.ReadLatest(ctx, t.Bucket)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("nothing to append")
	}
	keys := make(map[string]int, len(rows))
	var kb commit.KeySetBuilder
	for i, r := range rows {
		if len(r) != len(head.Schema.Fields) {
			return nil, fmt.Errorf("row %d has %d values, schema has %d fields", i+1, len(r), len(head.Schema.Fields))
		}
		k := table.KeyOf(head.Schema, r)
		if j, dup := keys[k]; dup {
			return nil, fmt.Errorf("duplicate primary key %s in rows %d and %d of the append", keyString(head.Schema, r), j+1, i+1)
		}
		keys[k] = i
		kb.Add([]byte(k))
	}
	ks, err := kb.KeySet()
	if err != nil {
		return nil, err
	}
	// Keys already live make the append a conflict, not a silent
	// duplicate. Data files are immutable and deletions only remove rows,
	// so a fragment checked once need not be checked again.
	checked := map[string]bool{}
	check := func(m *pb.Manifest) error {
		for _, f := range m.Fragments {
			p := f.GetDataFile().GetPath()
			if checked[p] {
				continue
			}
			err := table.ScanFragment(ctx, t.Bucket, m.Schema, f, func(_ uint32, r table.Row) error {
				if _, ok := keys[table.KeyOf(m.Schema, r)]; ok {
					return fmt.Errorf("primary key %s already exists in the table (use the MemWAL for upserts)", keyString(m.Schema, r))
				}
				return nil
			})
			if err != nil {
				return err
			}
			checked[p] = true
		}
		return nil
	}
	if err := check(head); err != nil {
		return nil, err
	}
	frags, files, err := t.WriteFragments(ctx, head.Schema, rows)
	if err != nil {
		t.removeFiles(ctx, files)
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		txn := t.NewTxn(head.Version)
		txn.Operation = &pb.Transaction_Append{Append: &pb.Append{Fragments: frags, Keys: ks}}
		res, err := t.Committer.Commit(ctx, txn)
		if err == nil {
			t.removeFiles(ctx, res.Garbage)
			return res, nil
		}
		var ae *commit.AmbiguousError
		if errors.As(err, &ae) {
			return nil, err // it may have landed: keep the files
		}
		// Only a conflict with a committed transaction is re-checked;
		// retries that ran out are the caller's to handle.
		var ce *commit.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, commit.ErrRetryable) || ce.Theirs == "" || attempt > appendRechecks {
			t.removeFiles(ctx, files)
			return nil, err
		}
		if head, err = table.ReadLatest(ctx, t.Bucket); err == nil {
			err = check(head)
		}
		if err != nil {
			t.removeFiles(ctx, files)
			return nil, err
		}
	}
}

func keyString(s *pb.Schema, r table.Row) string {
	out := ""
	for i, idx := range table.KeyIndexes(s) {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%v", r[idx])
	}
	return out
}

// WriteFragments writes rows into data files of at most MaxRowsPerFragment
// rows each. It returns the fragments and every file written (for cleanup).
func (t *Table) WriteFragments(ctx context.Context, s *pb.Schema, rows []table.Row) ([]*pb.Fragment, []string, error) {
	var frags []*pb.Fragment
	var files []string
	prog := progress.From(ctx)
	for start := 0; start < len(rows); start += t.MaxRowsPerFragment {
		end := min(start+t.MaxRowsPerFragment, len(rows))
		w, err := table.NewFragmentWriter(ctx, t.Bucket, s)
		if err != nil {
			return nil, files, err
		}
		files = append(files, w.Key())
		for i := start; i < end; i += table.ScanBatch {
			batch := rows[i:min(i+table.ScanBatch, end)]
			if err := w.Write(batch); err != nil {
				return nil, files, err
			}
			prog.Add(int64(len(batch)), 0)
		}
		f, err := w.Close()
		if err != nil {
			return nil, files, err
		}
		prog.Add(0, int64(f.GetDataFile().GetSizeBytes()))
		frags = append(frags, f)
	}
	return frags, files, nil
}

// scanManifest calls fn(fragment, offset, row) for every live row of m.
func (t *Table) scanManifest(ctx context.Context, m *pb.Manifest, fn func(frag, off uint32, r table.Row) error) error {
	for _, f := range m.Fragments {
		err := table.ScanFragment(ctx, t.Bucket, m.Schema, f, func(off uint32, r table.Row) error {
			return fn(f.Id, off, r)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Scan calls fn for every live row of version v (0 = latest). onManifest,
// when set, sees the manifest before the first row.
func (t *Table) Scan(ctx context.Context, v uint64, fn func(table.Row) error, onManifest func(*pb.Manifest)) (*pb.Manifest, error) {
	var m *pb.Manifest
	var err error
	if v == 0 {
		m, err = table.ReadLatest(ctx, t.Bucket)
	} else {
		m, err = table.ReadManifest(ctx, t.Bucket, v)
	}
	if err != nil {
		return nil, err
	}
	if onManifest != nil {
		onManifest(m)
	}
	return m, t.scanManifest(ctx, m, func(_, _ uint32, r table.Row) error { return fn(r) })
}

// DeleteSpec selects rows to delete; exactly one field is set.
type DeleteSpec struct {
	Keys      []table.Row // key-only rows (primary-key positions set)
	Predicate *Predicate
	Fragment  *uint32
}

// Delete deletes the selected rows. A fragment whose every row is deleted
// leaves the manifest. It returns nil result when nothing matched.
func (t *Table) Delete(ctx context.Context, head *pb.Manifest, spec DeleteSpec) (*commit.Result, uint64, error) {
	var err error
	if head == nil {
		if head, err = table.ReadLatest(ctx, t.Bucket); err != nil {
			return nil, 0, err
		}
	}
	del := map[uint32]*roaring.Bitmap{}
	var matched uint64
	mark := func(frag, off uint32) {
		bm := del[frag]
		if bm == nil {
			bm = roaring.New()
			del[frag] = bm
		}
		bm.Add(off)
		matched++
	}
	switch {
	case spec.Fragment != nil:
		f := table.FragmentByID(head, *spec.Fragment)
		if f == nil {
			return nil, 0, fmt.Errorf("fragment %d is not live at version %d", *spec.Fragment, head.Version)
		}
		matched = table.LiveRows(f)
		del[f.Id] = nil // whole fragment
	case spec.Predicate != nil:
		err = t.scanManifest(ctx, head, func(frag, off uint32, r table.Row) error {
			if spec.Predicate.Match(r) {
				mark(frag, off)
			}
			return nil
		})
	default:
		want := make(map[string]bool, len(spec.Keys))
		for _, k := range spec.Keys {
			want[table.KeyOf(head.Schema, k)] = true
		}
		err = t.scanManifest(ctx, head, func(frag, off uint32, r table.Row) error {
			if want[table.KeyOf(head.Schema, r)] {
				mark(frag, off)
			}
			return nil
		})
	}
	if err != nil {
		return nil, 0, err
	}
	if matched == 0 {
		return nil, 0, nil
	}
	op := &pb.Delete{}
	var files []string
	for _, f := range head.Fragments {
		bm, ok := del[f.Id]
		if !ok {
			continue
		}
		if bm == nil {
			op.RemovedFragmentIds = append(op.RemovedFragmentIds, f.Id)
			continue
		}
		prior, err := table.ReadDeletionFile(ctx, t.Bucket, f.DeletionFile)
		if err != nil {
			t.removeFiles(ctx, files)
			return nil, 0, err
		}
		bm.Or(prior)
		if bm.GetCardinality() >= f.PhysicalRows {
			op.RemovedFragmentIds = append(op.RemovedFragmentIds, f.Id)
			continue
		}
		df, err := table.WriteDeletionFile(ctx, t.Bucket, f.Id, head.Version, bm)
		if err != nil {
			t.removeFiles(ctx, files)
			return nil, 0, err
		}
		files = append(files, df.Path)
		nf := &pb.Fragment{Id: f.Id, DataFile: f.DataFile, PhysicalRows: f.PhysicalRows, DeletionFile: df}
		op.UpdatedFragments = append(op.UpdatedFragments, nf)
	}
	txn := t.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_Delete{Delete: op}
	res, err := t.CommitOrClean(ctx, txn, files)
	return res, matched, err
}
