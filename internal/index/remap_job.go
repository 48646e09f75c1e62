package index

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// RemapJobOptions configure RemapIndexes.
type RemapJobOptions struct {
	// Indices are the logical indexes to remap; nil means every index that
	// needs it.
	Indices []string
	// NoTrim leaves the FRI as it is after the remaps.
	NoTrim bool
	// Clock is the clock of created_at (the wall clock if nil).
	Clock clock.Clock
	// Attempts bounds the tries of one commit after a retryable conflict
	// (0: those of DefaultConfig).
	Attempts int
	// Memory, when set, is each segment remap's RemapOptions.Memory: the
	// daemon passes the compaction's memory budget, so that a deferred
	// compaction's later remap shares the bound its inline remap has.
	Memory func(ctx context.Context, n int64) (release func(), err error)
}

// RemapResult is what RemapIndexes did.
type RemapResult struct {
	ReadVersion uint64 `json:"read_version"`
	// FRIVersions is the number of FRI versions at the read (0: no FRI).
	FRIVersions int             `json:"fri_versions"`
	Indices     []RemappedIndex `json:"indices"`
	Skipped     []Skip          `json:"skipped,omitempty"`
	Trim        *TrimResult     `json:"trim,omitempty"`
	Versions    []uint64        `json:"versions"`
	Commits     int             `json:"commits"`
}

// RemappedIndex is the physical remap of one logical index.
type RemappedIndex struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Segments []string `json:"segments"`
	Removed  []string `json:"removed"`
	Entries  int      `json:"entries"`
	Dropped  int      `json:"dropped"`
	Version  uint64   `json:"version"`
	Attempts int      `json:"attempts"`
}

// TrimResult is an FRI trim.
type TrimResult struct {
	// Dropped are the dataset versions of the FRI versions trimmed; Kept
	// those left.
	Dropped []uint64 `json:"dropped"`
	Kept    []uint64 `json:"kept"`
	// Removed: no version was left, so the FRI itself went.
	Removed  bool   `json:"removed"`
	Version  uint64 `json:"version"`
	Attempts int    `json:"attempts"`
}

// RemapIndexes physically remaps, through the fragment-reuse index, every
// btree, bitmap and vector segment (SegmentRemappable) whose data may hold
// addresses an FRI version remaps (fri.Index.NeedsRemap), one CreateIndex
// per logical index, and
// then trims the FRI of the versions no index needs (or removes it). Each
// new segment has a new uuid, dataset_version = the head it read and its
// fragment bitmap through the load-time remap; deleted rows (dropped by a
// compaction, or in removed fragments) are gone from it.
//
// A segment of another kind, or without a fragment bitmap, cannot be
// remapped here; it keeps the versions it needs in the FRI (see Skipped).
func RemapIndexes(ctx context.Context, h *table.Handle, o RemapJobOptions) (*RemapResult, error) {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultConfig().Replans + 1
	}
	read, _, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	res := &RemapResult{ReadVersion: read.Manifest.GetVersion(), Indices: []RemappedIndex{}, Versions: []uint64{}}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil {
		return nil, err
	}
	if ix == nil {
		return res, nil
	}
	res.FRIVersions = len(ix.Versions)
	names, err := remapNames(read, o.Indices)
	if err != nil {
		return nil, err
	}
	// Progress: the entries of every segment remapped, a segment at a
	// time (their total is known only once each is read).
	progress.From(ctx).Start("index remap", progress.Units{})
	for _, name := range names {
		ri, skip, err := retry(ctx, o.Attempts, func() (*RemappedIndex, *Skip, error) { return remapIndexOnce(ctx, h, name, o) })
		if err != nil {
			return res, fmt.Errorf("index %s: %w", name, err)
		}
		if skip != nil {
			res.Skipped = append(res.Skipped, *skip)
		}
		if ri != nil {
			res.Indices = append(res.Indices, *ri)
			res.Versions = append(res.Versions, ri.Version)
			res.Commits++
		}
	}
	if o.NoTrim {
		return res, nil
	}
	tr, _, err := retry(ctx, o.Attempts, func() (*TrimResult, *Skip, error) { return trimOnce(ctx, h, o) })
	if err != nil {
		return res, fmt.Errorf("fri trim: %w", err)
	}
	if tr != nil {
		res.Trim = tr
		if tr.Version != 0 {
			res.Versions = append(res.Versions, tr.Version)
			res.Commits++
		}
	}
	return res, nil
}

// TrimFRI drops the FRI versions no index needs (see fri.Index.Trim);
// nil when there is no FRI or nothing to trim.
func TrimFRI(ctx context.Context, h *table.Handle, o RemapJobOptions) (*TrimResult, error) {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	tr, _, err := retry(ctx, o.Attempts, func() (*TrimResult, *Skip, error) { return trimOnce(ctx, h, o) })
	return tr, err
}

// retry runs once until it succeeds or fails other than by a retryable
// conflict, at most attempts times; the result's Attempts are filled.
func retry[T any](ctx context.Context, attempts int, once func() (*T, *Skip, error)) (*T, *Skip, error) {
	var last error
	for i := 1; i <= attempts; i++ {
		r, s, err := once()
		if err == nil {
			switch v := any(r).(type) {
			case *RemappedIndex:
				if v != nil {
					v.Attempts = i
				}
			case *TrimResult:
				if v != nil {
					v.Attempts = i
				}
			}
			return r, s, nil
		}
		if !errors.Is(err, commit.ErrRetryable) || ctx.Err() != nil {
			return nil, nil, err
		}
		last = err
	}
	return nil, nil, fmt.Errorf("gave up after %d conflicting attempts: %w", attempts, last)
}

func remapNames(read *meta.ManifestFile, want []string) ([]string, error) {
	var names []string
	for _, m := range read.Indices {
		if !meta.IsSystemIndex(m) && !slices.Contains(names, m.GetName()) {
			names = append(names, m.GetName())
		}
	}
	for _, n := range want {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("no index %q in version %d (indexes: %v)", n, read.Manifest.GetVersion(), names)
		}
	}
	if want != nil {
		names = slices.Clone(want)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// RemapRefusal is why an index remap leaves the logical index whose
// segments need remapping (those the fragment-reuse index names) as it
// is, keeping its FRI versions; "" when it remaps it. The dry run asks
// the same question, so that it names the indexes the remap then
// rewrites.
func RemapRefusal(ctx context.Context, b storage.Bucket, m *pb.Manifest, need []*pb.IndexMetadata) (string, error) {
	kind := meta.IndexKind(need[0])
	if !SegmentRemappable(need[0]) {
		why := fmt.Sprintf("a %s index compactord cannot remap (it remaps btree, bitmap, label-list, full-text and vector indexes)", kind)
		if kind == vector.Kind {
			why = "a vector index compactord cannot remap: " + vector.SegmentRefusal(need[0])
		}
		return why + "; it keeps its FRI versions", nil
	}
	if kind == KindInverted {
		for _, s := range need {
			if err := CanRemapInverted(ctx, b, s); err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				return fmt.Sprintf("%v; it keeps its FRI versions", err), nil
			}
		}
	}
	fields := need[0].GetFields()
	for _, f := range m.GetFields() {
		if len(fields) == 1 && f.GetId() == fields[0] {
			if f.GetParentId() != -1 {
				break
			}
			return "", nil
		}
	}
	return fmt.Sprintf("fields %v are not one top-level field of the schema", fields), nil
}

// remapIndexOnce plans and commits the remap of one logical index on the
// latest version: nil, nil when no segment needs it.
func remapIndexOnce(ctx context.Context, h *table.Handle, name string, o RemapJobOptions) (_ *RemappedIndex, _ *Skip, retErr error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A cleanup that removed the read version took files being read: a
	// lost race, which the remap re-plans.
	defer func() { retErr = table.ReadCleanedUp(ctx, h.Bucket, naming, read, "index remap", retErr) }()
	m := read.Manifest
	if m.GetReaderFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, nil, errors.New("tables with stable row ids are not supported (their indexes hold row ids, which compaction keeps)")
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil || ix == nil {
		return nil, nil, err
	}
	var need []*pb.IndexMetadata
	for _, s := range meta.FindIndex(read.Indices, name) {
		if ix.NeedsRemap(s) {
			need = append(need, s)
		}
	}
	if len(need) == 0 {
		return nil, nil, nil
	}
	kind := meta.IndexKind(need[0])
	why, err := RemapRefusal(ctx, h.Bucket, m, need)
	if err != nil {
		return nil, nil, err
	}
	if why != "" {
		return nil, &Skip{name, why}, nil
	}
	var field *pb.Field
	for _, f := range m.GetFields() {
		if f.GetId() == need[0].GetFields()[0] {
			field = f
		}
	}
	live := map[uint32]uint64{}
	for _, f := range m.GetFragments() {
		live[uint32(f.GetId())] = f.GetPhysicalRows()
	}
	full := func(frag uint32) (uint64, bool) {
		if n, ok := live[frag]; ok {
			return n, true
		}
		if n, ok := ix.PhysicalRows(frag); ok {
			return n, true
		}
		// A dead fragment no version compacted (fully deleted): its rows
		// are dropped below whatever their count, so expand none.
		return 0, true
	}
	through := ix.Remapper(0)
	// Rows of fragments no longer live are deleted whatever the FRI says:
	// a fragment fully deleted after the last compaction is in no
	// version's removed set, and fragment ids are never reused.
	remap := func(a uint64) (uint64, bool) {
		na, ok := through(a)
		if !ok {
			return 0, false
		}
		_, alive := live[uint32(na>>32)]
		return na, alive
	}
	op := &pb.Transaction_CreateIndex{}
	ri := &RemappedIndex{Name: name, Kind: kind, Segments: []string{}, Removed: []string{}}
	var keys []string
	cleanup := func() {
		for _, k := range keys {
			_ = h.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
	}
	for _, s := range need {
		if meta.IndexKind(s) != kind {
			cleanup()
			return nil, nil, fmt.Errorf("segments of kinds %s and %s", kind, meta.IndexKind(s))
		}
		bm := ix.RemapBitmap(s)
		if bm == nil {
			cleanup()
			return nil, &Skip{name, "a segment has no fragment bitmap: its coverage after the remap is unknown"}, nil
		}
		// Likewise the coverage: removed fragments leave through the
		// load-time remap, any other dead fragment here.
		for _, id := range bm.ToArray() {
			if _, ok := live[id]; !ok {
				bm.Remove(id)
			}
		}
		nm, ks, st, err := Remap(ctx, h.Bucket, s, remap, RemapOptions{Field: field, DatasetVersion: m.GetVersion(), Bitmap: bm, Full: full, Now: o.Clock.Now(), Memory: o.Memory})
		keys = append(keys, ks...)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		progress.From(ctx).Add(int64(st.Entries), 0)
		op.NewIndices = append(op.NewIndices, nm)
		op.RemovedIndices = append(op.RemovedIndices, s)
		ri.Segments = append(ri.Segments, meta.UUIDString(nm.GetUuid()))
		ri.Removed = append(ri.Removed, meta.UUIDString(s.GetUuid()))
		ri.Entries += st.Kept
		ri.Dropped += st.Dropped
	}
	txn := commit.NewTransaction(m.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if err != nil {
		return nil, nil, err
	}
	ri.Version = cr.Version
	return ri, nil, nil
}

// trimOnce plans and commits an FRI trim on the latest version.
func trimOnce(ctx context.Context, h *table.Handle, o RemapJobOptions) (*TrimResult, *Skip, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, nil, err
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil || ix == nil {
		return nil, nil, err
	}
	dropped := ix.Trimmable(read.Indices)
	if len(dropped) == 0 {
		return nil, nil, nil
	}
	op, keys, err := ix.Trim(ctx, h.Bucket, read, o.Clock.Now())
	if err != nil {
		for _, k := range keys {
			_ = h.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
		return nil, nil, err
	}
	tr := &TrimResult{Dropped: dropped, Kept: []uint64{}, Removed: len(op.GetNewIndices()) == 0}
	for _, v := range ix.Versions {
		if !slices.Contains(dropped, v.DatasetVersion) {
			tr.Kept = append(tr.Kept, v.DatasetVersion)
		}
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if err != nil {
		return nil, nil, err
	}
	tr.Version = cr.Version
	return tr, nil, nil
}
