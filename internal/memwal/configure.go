package memwal

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Configure commits a ConfigureMemWal: the shard list and the indices the
// MemWAL keeps caught up. Shards may be added freely. A shard may be
// dropped only when nothing of it is waiting: every flushed generation is
// merged and no WAL entry above its replay cursor holds a record, because
// a dropped shard's data would never reach the base table. A writer that
// keeps writing to a dropped shard after the check is not stopped; stop
// the writers before dropping a shard.
func Configure(ctx context.Context, t *ops.Table, shards, maintained []string) (*commit.Result, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("configure MemWAL: give at least one shard")
	}
	for _, s := range shards {
		if err := ValidateShardName(s); err != nil {
			return nil, fmt.Errorf("configure MemWAL: %w", err)
		}
	}
	for _, n := range maintained {
		if n == "" {
			return nil, fmt.Errorf("configure MemWAL: empty maintained index name")
		}
	}
	head, err := table.ReadLatest(ctx, t.Bucket)
	if err != nil {
		return nil, err
	}
	for _, n := range maintained {
		ix := table.FindIndex(head, n)
		if ix == nil {
			return nil, fmt.Errorf("configure MemWAL: maintained index %q does not exist at version %d", n, head.Version)
		}
		if table.IsSystemIndex(ix) {
			return nil, fmt.Errorf("configure MemWAL: %q is a system index and cannot be maintained", n)
		}
	}
	if d := table.MemWal(head); d != nil {
		for _, s := range d.Shards {
			if slices.Contains(shards, s) {
				continue
			}
			if err := checkDrainable(ctx, t.Bucket, s, d.CompactedSstables[s]); err != nil {
				return nil, fmt.Errorf("configure MemWAL: cannot drop shard %q: %w", s, err)
			}
		}
	}
	txn := t.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_ConfigureMemWal{ConfigureMemWal: &pb.ConfigureMemWal{
		Shards: slices.Clone(shards), MaintainedIndexes: slices.Clone(maintained)}}
	return t.CommitOrClean(ctx, txn, nil)
}

// checkDrainable reports why a shard still holds data the base table lacks.
func checkDrainable(ctx context.Context, b storage.Bucket, shard string, compacted uint64) error {
	m, err := ReadShardManifest(ctx, b, shard)
	if err != nil || m == nil {
		return err
	}
	if m.CurrentGeneration > 0 && m.CurrentGeneration-1 > compacted {
		return fmt.Errorf("generations %d..%d are flushed but not merged", compacted+1, m.CurrentGeneration-1)
	}
	positions, err := ListWALPositions(ctx, b, shard)
	if err != nil {
		return err
	}
	for _, p := range positions {
		if p <= m.ReplayAfterWalPosition {
			continue
		}
		e, err := ReadWALEntry(ctx, b, shard, p)
		if err != nil {
			return err
		}
		if len(e.Records) > 0 {
			return fmt.Errorf("WAL entry %d holds %d unflushed records", p, len(e.Records))
		}
	}
	return nil
}
