package model

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// The functions in this file read the table the way a checker must: from
// the bucket itself, never through a component's cache, and without fault
// injection.

// ScanLatest returns the latest manifest and its live rows by key. A key
// live twice is an error.
func ScanLatest(ctx context.Context, b storage.Bucket) (*pb.Manifest, map[int64]table.Row, error) {
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	rows, err := ScanManifest(ctx, b, m)
	return m, rows, err
}

// ScanManifest returns the live rows of m by key.
func ScanManifest(ctx context.Context, b storage.Bucket, m *pb.Manifest) (map[int64]table.Row, error) {
	rows := map[int64]table.Row{}
	for _, f := range m.Fragments {
		err := table.ScanFragment(ctx, b, m.Schema, f, func(off uint32, r table.Row) error {
			k := Key(r)
			if _, dup := rows[k]; dup {
				return fmt.Errorf("version %d: key %d is live twice (again at fragment %d offset %d)", m.Version, k, f.Id, off)
			}
			rows[k] = r
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("scan version %d fragment %d: %w", m.Version, f.Id, err)
		}
	}
	return rows, nil
}

// FragmentKeys returns the live keys of fragment id at m.
func FragmentKeys(ctx context.Context, b storage.Bucket, m *pb.Manifest, id uint32) ([]int64, error) {
	f := table.FragmentByID(m, id)
	if f == nil {
		return nil, fmt.Errorf("fragment %d is not live at version %d", id, m.Version)
	}
	var keys []int64
	err := table.ScanFragment(ctx, b, m.Schema, f, func(_ uint32, r table.Row) error {
		keys = append(keys, Key(r))
		return nil
	})
	return keys, err
}

// SyncShards brings the model's shard state up to the table: it notes the
// generations each shard manifest lists and applies the merges head
// records. It fails when the table contradicts the model (a generation
// changed, compacted went back, a merged generation never flushed).
func SyncShards(ctx context.Context, b storage.Bucket, ref *Ref, head *pb.Manifest) error {
	d := table.MemWal(head)
	for _, s := range ref.ShardNames() {
		sm, err := memwal.ReadShardManifest(ctx, b, s)
		if err != nil {
			return fmt.Errorf("read shard %s: %w", s, err)
		}
		if err := ref.NoteFlushed(s, sm); err != nil {
			return err
		}
		if err := ref.Merge(s, d.GetCompactedSstables()[s]); err != nil {
			return err
		}
	}
	return nil
}

// SyncWAL examines the shard's WAL entries above the model's Seen
// position. Empty entries (claim markers) are skipped. An entry with
// records is taken to be the write under reconciliation: recs (written by
// a writer of epoch, 0 = any) are added to the model at its position and
// the position is returned. Any other entry with records is an error: the
// model knows every write. It returns 0 when no entry with records
// appeared.
func SyncWAL(ctx context.Context, b storage.Bucket, ref *Ref, shard string, epoch uint64, recs []memwal.Record) (uint64, error) {
	s := ref.Shards[shard]
	positions, err := memwal.ListWALPositions(ctx, b, shard)
	if err != nil {
		return 0, err
	}
	slices.Sort(positions)
	var landed uint64
	for _, p := range positions {
		if p <= s.Seen {
			continue
		}
		e, err := memwal.ReadWALEntry(ctx, b, shard, p)
		if err != nil {
			return 0, fmt.Errorf("read WAL entry %d of shard %s: %w", p, shard, err)
		}
		s.Seen = p
		if len(e.Records) == 0 {
			continue
		}
		switch {
		case recs == nil:
			return 0, fmt.Errorf("shard %s: WAL entry %d (epoch %d, %d records) appeared, but no write was in progress", shard, p, e.WriterEpoch, len(e.Records))
		case landed != 0:
			return 0, fmt.Errorf("shard %s: one write landed twice, at WAL positions %d and %d", shard, landed, p)
		case len(e.Records) != len(recs) || (epoch != 0 && e.WriterEpoch != epoch):
			return 0, fmt.Errorf("shard %s: WAL entry %d holds %d records of epoch %d, the write had %d records of epoch %d", shard, p, len(e.Records), e.WriterEpoch, len(recs), epoch)
		}
		if err := ref.AddEntry(shard, p, recs); err != nil {
			return 0, err
		}
		landed = p
	}
	return landed, nil
}

// CheckShardDurable checks that nothing the model still needs from a
// shard is gone: every WAL entry above both the replay cursor and the
// merged position exists, and every flushed, unmerged generation is listed
// in the shard manifest with its file present.
func CheckShardDurable(ctx context.Context, b storage.Bucket, ref *Ref, shard string) error {
	s := ref.Shards[shard]
	sm, err := memwal.ReadShardManifest(ctx, b, shard)
	if err != nil {
		return fmt.Errorf("read shard %s: %w", shard, err)
	}
	var cursor uint64
	listed := map[uint64]*pb.SSTable{}
	if sm != nil {
		cursor = sm.ReplayAfterWalPosition
		for _, sst := range sm.Sstables {
			listed[sst.Generation] = sst
		}
	}
	for _, e := range s.Entries {
		if e.Pos <= cursor || e.Pos <= s.MergedPos {
			continue
		}
		if _, err := b.Attributes(ctx, memwal.WALKey(shard, e.Pos)); err != nil {
			return fmt.Errorf("shard %s: WAL entry %d (unflushed, %d records) is gone: %w", shard, e.Pos, len(e.Recs), err)
		}
	}
	gens := make([]uint64, 0, len(s.Gens))
	for g := range s.Gens {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	for _, g := range gens {
		if g <= s.MergedGen {
			continue
		}
		sst := listed[g]
		if sst == nil {
			return fmt.Errorf("shard %s: generation %d is flushed but not merged, and the shard manifest no longer lists it", shard, g)
		}
		if _, err := b.Attributes(ctx, sst.Path); err != nil {
			return fmt.Errorf("shard %s: SSTable of unmerged generation %d is gone: %w", shard, g, err)
		}
	}
	return nil
}
