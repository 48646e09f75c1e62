package memwal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// ErrSealed is the class of a claim refused because the shard is sealed: a
// wal configure is dropping it (or one that did failed before unsealing).
var ErrSealed = errors.New("shard is sealed")

// Configure commits a ConfigureMemWal: the shard list and the indices the
// MemWAL keeps caught up. Shards may be added freely. A shard may be
// dropped only when nothing of it is waiting: every flushed generation is
// merged and no WAL entry above its replay cursor holds a record, because
// a dropped shard's data would never reach the base table.
//
// That check would race a writer if made only at the read version, so a
// shard to drop is sealed first: a shard-manifest version with the next
// writer epoch and status SEALED. The new epoch fences every writer (an
// append re-checks its epoch after its entry lands, a flush before it
// publishes), and a sealed shard cannot be claimed; the check then runs
// after the seal, when nothing can be added. If the drop does not commit,
// the seal is lifted again (only while it is still the newest version).
// Listing a sealed shard again (after a configure that failed before it
// could unseal) unseals it once the configuration is committed.
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
	// Kept shards that a failed configure left sealed, as they are now:
	// unsealed after the commit, unless something moved them since.
	var resealed []*pb.ShardManifest
	for _, s := range shards {
		sm, err := ReadShardManifest(ctx, t.Bucket, s)
		if err != nil {
			return nil, err
		}
		if sm != nil && sm.Status == pb.ShardStatus_SHARD_STATUS_SEALED {
			resealed = append(resealed, sm)
		}
	}
	var sealed []*pb.ShardManifest
	unseal := func() {
		for _, sm := range sealed {
			if err := unsealShard(ctx, t.Bucket, sm, t.Now); err != nil {
				t.Logger.Warn("could not unseal a shard after a failed configure; list it in the next wal configure", zap.String("shard", sm.ShardId), zap.Error(err))
			}
		}
	}
	if d := table.MemWal(head); d != nil {
		for _, s := range d.Shards {
			if slices.Contains(shards, s) {
				continue
			}
			// A first check before sealing refuses the common case
			// without writing anything (nor fencing the shard's writer).
			if err := checkDrainable(ctx, t.Bucket, s, d.CompactedSstables[s]); err != nil {
				unseal()
				return nil, fmt.Errorf("configure MemWAL: cannot drop shard %q: %w", s, err)
			}
			sm, err := sealShard(ctx, t.Bucket, s, t.Now)
			if err != nil {
				unseal()
				return nil, fmt.Errorf("configure MemWAL: cannot drop shard %q: %w", s, err)
			}
			sealed = append(sealed, sm)
			if err := checkDrainable(ctx, t.Bucket, s, d.CompactedSstables[s]); err != nil {
				unseal()
				return nil, fmt.Errorf("configure MemWAL: cannot drop shard %q: %w", s, err)
			}
		}
	}
	txn := t.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_ConfigureMemWal{ConfigureMemWal: &pb.ConfigureMemWal{
		Shards: slices.Clone(shards), MaintainedIndexes: slices.Clone(maintained)}}
	res, err := t.CommitOrClean(ctx, txn, nil)
	if err != nil {
		var ae *commit.AmbiguousError
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("%w (the shards being dropped stay sealed: if the configuration did not land, run wal configure again)", err)
		}
		unseal()
		return nil, err
	}
	for _, sm := range resealed {
		if err := unsealShard(ctx, t.Bucket, sm, t.Now); err != nil {
			return res, fmt.Errorf("configure MemWAL: committed version %d, but shard %q stays sealed: %w", res.Manifest.Version, sm.ShardId, err)
		}
	}
	return res, nil
}

// sealShard publishes the next shard-manifest version with the next writer
// epoch and status SEALED (version 1 for a shard never claimed, which a
// writer could otherwise claim now).
func sealShard(ctx context.Context, b storage.Bucket, shard string, now func() time.Time) (*pb.ShardManifest, error) {
	for attempt := 0; attempt < 8; attempt++ {
		prev, err := ReadShardManifest(ctx, b, shard)
		if err != nil {
			return nil, err
		}
		next := &pb.ShardManifest{ShardId: shard, CurrentGeneration: 1}
		if prev != nil {
			next = proto.Clone(prev).(*pb.ShardManifest)
		}
		next.Version++
		next.WriterEpoch++
		next.Status = pb.ShardStatus_SHARD_STATUS_SEALED
		next.TimestampMicros = now().UnixMicro()
		data, err := table.EncodeProto(next)
		if err != nil {
			return nil, err
		}
		switch err := b.PutIfAbsent(ctx, ShardManifestKey(shard, next.Version), data); {
		case err == nil:
			return next, nil
		case !storage.IsAlreadyExists(err):
			return nil, fmt.Errorf("seal: %w", err)
		}
	}
	return nil, fmt.Errorf("seal: lost the race for a shard-manifest version 8 times")
}

// unsealShard publishes an ACTIVE version over sealed, only while the
// newest version is still that seal (or a maintenance version of it, with
// its epoch): another configure's seal since is left alone.
func unsealShard(ctx context.Context, b storage.Bucket, sealed *pb.ShardManifest, now func() time.Time) error {
	for attempt := 0; attempt < 8; attempt++ {
		cur, err := ReadShardManifest(ctx, b, sealed.ShardId)
		if err != nil {
			return err
		}
		if cur == nil || cur.WriterEpoch != sealed.WriterEpoch || cur.Status != pb.ShardStatus_SHARD_STATUS_SEALED {
			return nil
		}
		next := proto.Clone(cur).(*pb.ShardManifest)
		next.Version++
		next.Status = pb.ShardStatus_SHARD_STATUS_ACTIVE
		next.TimestampMicros = now().UnixMicro()
		data, err := table.EncodeProto(next)
		if err != nil {
			return err
		}
		switch err := b.PutIfAbsent(ctx, ShardManifestKey(sealed.ShardId, next.Version), data); {
		case err == nil:
			return nil
		case !storage.IsAlreadyExists(err):
			return fmt.Errorf("unseal: %w", err)
		}
	}
	return fmt.Errorf("unseal: lost the race for a shard-manifest version 8 times")
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
