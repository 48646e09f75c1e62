package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

// RebuildOptions configure Rebuild.
type RebuildOptions struct {
	// Now is the clock of created_at (time.Now if nil).
	Now func() time.Time
	// Attempts bounds the re-plans after a retryable conflict (0: 3).
	Attempts int
}

// RebuildResult is what Rebuild committed.
type RebuildResult struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	ReadVersion uint64 `json:"read_version"`
	Version     uint64 `json:"version"`
	// Rows are the entries of the new segment; Fragments the fragments it
	// covers (every fragment of the read version).
	Rows      int      `json:"rows"`
	Fragments []uint32 `json:"fragments"`
	Segment   string   `json:"segment"`
	// Removed are the segments replaced (every segment of the index).
	Removed  []string `json:"removed"`
	Attempts int      `json:"attempts"`
}

// Rebuild builds the btree, bitmap, label-list, full-text or vector index
// name afresh from the data of the latest version (every live row of every
// fragment) and commits one CreateIndex that adds the new segment and
// removes every segment of that name: the repair after verify --deep finds
// an index whose content
// disagrees with the data. The new segment keeps the index's name, fields,
// details and index version; its dataset_version is the read version, so
// the commit loop's derivation credits it with the MemWAL catch-up that
// version allows.
//
// Memory: the column's live values and addresses are collected whole and
// sorted, as catch-up's rebuild does.
//
// A vector index is re-encoded with its existing centroids and quantizer
// (no retraining), read from its first segment, which must therefore be
// readable (float16, float64 and binary vectors are encoded in lance's
// arithmetic for them). A full-text
// index is rebuilt into one partition when compactord reproduces its
// tokenizer (fts.NewTokenizer), else refused.
func Rebuild(ctx context.Context, h *table.Handle, name string, o RebuildOptions) (*RebuildResult, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	attempts := o.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var last error
	for i := 1; i <= attempts; i++ {
		res, err := rebuildOnce(ctx, h, name, o)
		if res != nil {
			res.Attempts = i
		}
		if err == nil || !errors.Is(err, commit.ErrRetryable) {
			return res, err
		}
		last = err
	}
	return nil, fmt.Errorf("index rebuild %s: gave up after %d conflicting attempts: %w", name, attempts, last)
}

// RebuildJob checks that the index name of read can be rebuilt and
// returns its segments and the table field it is on.
func RebuildJob(read *meta.ManifestFile, name string) (segs []*pb.IndexMetadata, kind string, field *pb.Field, err error) {
	m := read.Manifest
	segs = meta.FindIndex(read.Indices, name)
	if len(segs) == 0 || meta.IsSystemIndex(segs[0]) {
		var names []string
		for _, ix := range read.Indices {
			if !meta.IsSystemIndex(ix) && !slices.Contains(names, ix.GetName()) {
				names = append(names, ix.GetName())
			}
		}
		slices.Sort(names)
		return nil, "", nil, fmt.Errorf("index rebuild: no index %q in version %d (indexes: %v)", name, m.GetVersion(), names)
	}
	if m.GetReaderFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, "", nil, errors.New("index rebuild: tables with stable row ids are not supported (their indexes hold row ids, not addresses)")
	}
	kind = meta.IndexKind(segs[0])
	switch kind {
	case KindBTree, KindBitmap, KindLabelList, KindInverted:
	case vector.Kind:
		if !vector.Buildable(segs[0]) {
			return nil, "", nil, fmt.Errorf("index rebuild: %s: %s (rebuild it with LanceDB)", name, vector.SegmentRefusal(segs[0]))
		}
	default:
		return nil, "", nil, fmt.Errorf("index rebuild: %s: compactord rebuilds btree, bitmap, label-list, full-text and vector indexes, not %s indexes (rebuild it with LanceDB)", name, kind)
	}
	for _, s := range segs {
		if k := meta.IndexKind(s); k != kind {
			return nil, "", nil, fmt.Errorf("index rebuild: index %s has segments of kinds %s and %s", name, kind, k)
		}
		if !slices.Equal(s.GetFields(), segs[0].GetFields()) {
			return nil, "", nil, fmt.Errorf("index rebuild: index %s has segments on fields %v and %v", name, segs[0].GetFields(), s.GetFields())
		}
	}
	fields := segs[0].GetFields()
	if len(fields) != 1 {
		return nil, "", nil, fmt.Errorf("index rebuild: index %s is on %d fields, compactord rebuilds single-column indexes", name, len(fields))
	}
	for _, f := range m.GetFields() {
		if f.GetId() == fields[0] {
			field = f
		}
	}
	if field == nil || field.GetParentId() != -1 {
		return nil, "", nil, fmt.Errorf("index rebuild: index %s is on field %d, which is not a top-level field of version %d", name, fields[0], m.GetVersion())
	}
	if err := checkIndexable(kind, m.GetFields(), field); err != nil && kind != vector.Kind {
		return nil, "", nil, fmt.Errorf("index rebuild: index %s: %w", name, err)
	}
	return segs, kind, field, nil
}

func rebuildOnce(ctx context.Context, h *table.Handle, name string, o RebuildOptions) (_ *RebuildResult, retErr error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { retErr = table.ReadCleanedUp(ctx, h.Bucket, naming, read, "index rebuild", retErr) }()
	m := read.Manifest
	segs, kind, field, err := RebuildJob(read, name)
	if err != nil {
		return nil, err
	}
	live := roaring.New()
	for _, f := range m.GetFragments() {
		live.Add(uint32(f.GetId()))
	}
	progress.From(ctx).Start("index rebuild", progress.Units{Rows: LiveRows(m, live)})
	var keys []string
	cleanup := func() {
		for _, k := range keys {
			_ = h.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
	}
	var ix *pb.IndexMetadata
	var ks []string
	var rows int
	handled := true
	if kind == KindInverted {
		// One partition over every live row, when compactord reproduces
		// the index's tokenizer (else the reason is the error).
		var skip string
		ix, ks, rows, skip, err = writeInverted(ctx, h.Bucket, m.GetVersion(), name, field, segs[0], live, false, o.Now())
		if err == nil && skip != "" {
			err = fmt.Errorf("%s (%w)", skip, ErrLeftToLanceDB)
		}
	} else {
		ix, ks, rows, handled, err = buildOther(ctx, h.Bucket, Job{Name: name, Kind: kind, Field: field, Segments: segs, Rebuild: true}, m.GetVersion(), live, o.Now())
	}
	keys = append(keys, ks...)
	if handled && err != nil {
		cleanup()
		return nil, fmt.Errorf("index rebuild %s: %w", name, err)
	}
	if !handled {
		e, err := collectFor(kind)(ctx, h.Bucket, m.GetVersion(), field, live)
		if err != nil {
			return nil, fmt.Errorf("index rebuild %s: %w", name, err)
		}
		w, err := WriteSegment(ctx, h.Bucket, kind, field, e)
		if w != nil {
			keys = append(keys, w.Keys...)
		}
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("index rebuild %s: %w", name, err)
		}
		if ix, err = SegmentMetadata(name, segs[0].GetFields(), kind, segs[0], m.GetVersion(), live, w, o.Now()); err != nil {
			cleanup()
			return nil, err
		}
		rows = e.Len()
	}
	res := &RebuildResult{Name: name, Kind: kind, ReadVersion: m.GetVersion(), Rows: rows, Fragments: live.ToArray(),
		Segment: meta.UUIDString(ix.GetUuid()), Removed: []string{}}
	for _, s := range segs {
		res.Removed = append(res.Removed, meta.UUIDString(s.GetUuid()))
	}
	txn := commit.NewTransaction(m.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{ix}, RemovedIndices: segs}}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if err != nil {
		return nil, fmt.Errorf("index rebuild %s: %w", name, err)
	}
	res.Version = cr.Version
	return res, nil
}
