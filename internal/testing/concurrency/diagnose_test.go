package concurrency

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/model"
)

// keyFragments lists the fragments where key is live in version v.
func keyFragments(ctx context.Context, b storage.Bucket, v uint64, key int64) ([]uint64, error) {
	t, err := scan.Open(ctx, b, scan.Options{Version: v, Columns: []string{"id"}})
	if err != nil {
		return nil, err
	}
	var out []uint64
	err = t.Batches(ctx, func(bt *scan.Batch) error {
		for _, i := range bt.Live {
			if bt.Columns[0].Int64s()[i] == key {
				out = append(out, bt.Fragment)
			}
		}
		return nil
	})
	return out, err
}

// diagnoseDup finds the first version after since (among those still on
// disk) where key is live twice and describes the commits around it:
// which operation made it, from which read version, and where the key
// was before.
func diagnoseDup(ctx context.Context, b storage.Bucket, since, v uint64, key int64) string {
	vs, naming, err := meta.ListVersions(ctx, b)
	if err != nil {
		return err.Error()
	}
	var out []string
	var prev uint64
	slices.Sort(vs)
	for _, x := range vs {
		if x > v {
			break
		}
		if x <= since && since > 0 {
			prev = x
			continue
		}
		frags, err := keyFragments(ctx, b, x, key)
		if err != nil {
			out = append(out, fmt.Sprintf("version %d: %v", x, err))
			continue
		}
		if len(frags) < 2 {
			prev = x
			continue
		}
		f, err := meta.ReadVersion(ctx, b, naming, x)
		if err != nil {
			return err.Error()
		}
		txn, _ := meta.ReadTransaction(ctx, b, f)
		before, _ := keyFragments(ctx, b, prev, key)
		op := prototext.MarshalOptions{}.Format(txn)
		if len(op) > 3000 {
			op = op[:3000] + "…"
		}
		out = append(out, fmt.Sprintf("first version with key %d twice: %d (fragments %v; in version %d it was in %v), writer %s %s, transaction: %s",
			key, x, frags, prev, before, f.Manifest.GetWriterVersion().GetLibrary(), f.Manifest.GetWriterVersion().GetVersion(), op))
		// The commits it was rebased over (read version to x): who wrote
		// each, what it did, and where the key lived after it.
		for y := txn.GetReadVersion() + 1; y < x; y++ {
			out = append(out, describeCommit(ctx, b, naming, y, key))
		}
		break
	}
	if len(out) == 0 {
		return fmt.Sprintf("no version in (%d, %d] of %v has key %d twice", since, v, vs, key)
	}
	return strings.Join(out, "; ")
}

// diagnoseIndex finds the first version after since (among those still
// on disk) whose indexes disagree with its scan and describes the commit
// that made it.
func diagnoseIndex(ctx context.Context, b storage.Bucket, since, v uint64) string {
	vs, naming, err := meta.ListVersions(ctx, b)
	if err != nil {
		return err.Error()
	}
	slices.Sort(vs)
	for _, x := range vs {
		if x <= since || x > v {
			continue
		}
		snap, err := model.ReadSnapshot(ctx, b, x)
		if err != nil {
			continue
		}
		bad, err := model.CheckIndices(ctx, b, snap)
		if err != nil || len(bad) == 0 {
			continue
		}
		f, err := meta.ReadVersion(ctx, b, naming, x)
		if err != nil {
			return err.Error()
		}
		txn, _ := meta.ReadTransaction(ctx, b, f)
		op := prototext.MarshalOptions{}.Format(txn)
		if len(op) > 4000 {
			op = op[:4000] + "…"
		}
		return fmt.Sprintf("first version with the disagreement: %d (%v), writer %s %s, transaction: %s",
			x, bad, f.Manifest.GetWriterVersion().GetLibrary(), f.Manifest.GetWriterVersion().GetVersion(), op)
	}
	return fmt.Sprintf("no version in (%d, %d] still on disk disagrees", since, v)
}

// describeCommit is one line about version y: its writer, operation, the
// fragments it changed, and the fragments holding key after it.
func describeCommit(ctx context.Context, b storage.Bucket, naming meta.Naming, y uint64, key int64) string {
	f, err := meta.ReadVersion(ctx, b, naming, y)
	if err != nil {
		return fmt.Sprintf("version %d: %v", y, err)
	}
	txn, _ := meta.ReadTransaction(ctx, b, f)
	frags, _ := keyFragments(ctx, b, y, key)
	var changed []uint64
	for _, fr := range append(append(txn.GetDelete().GetUpdatedFragments(), txn.GetUpdate().GetUpdatedFragments()...), txn.GetUpdate().GetNewFragments()...) {
		changed = append(changed, fr.GetId())
	}
	removed := append(append([]uint64{}, txn.GetDelete().GetDeletedFragmentIds()...), txn.GetUpdate().GetRemovedFragmentIds()...)
	for _, g := range txn.GetRewrite().GetGroups() {
		for _, fr := range g.GetOldFragments() {
			removed = append(removed, fr.GetId())
		}
	}
	return fmt.Sprintf("version %d by %s %s: %s read %d, changed %v, removed %v; key %d in %v",
		y, f.Manifest.GetWriterVersion().GetLibrary(), f.Manifest.GetWriterVersion().GetVersion(), commit.OpName(txn), txn.GetReadVersion(), changed, removed, key, frags)
}
