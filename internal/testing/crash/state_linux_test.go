//go:build linux

package crash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// sentinelMaxBytes: a WAL entry larger than this holds batches, so it is
// neither a fence sentinel nor one trim may keep as unreadable (trim's
// own bound).
const sentinelMaxBytes = 4096

// genInfo is one flushed generation of the pristine table.
type genInfo struct {
	gen   uint64
	dir   string   // relative to the table
	files []string // every file under dir, relative to the table
}

// shardInfo is one shard of the pristine table: what trim may and may not
// delete is judged against it.
type shardInfo struct {
	id              string
	gens            []genInfo
	top             uint64            // the highest flushed generation
	wal             map[uint64]string // position → file, relative to the table
	walSize         map[uint64]int64
	replayAfter     uint64
	manifestVersion uint64
}

func openBucket(dir string) (storage.Bucket, error) {
	return storage.Open(context.Background(), "file://"+dir)
}

// loadShards reads the pristine table's shards.
func loadShards(dir string) ([]shardInfo, error) {
	ctx := context.Background()
	b, err := openBucket(dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	ids, err := memwal.ListShards(ctx, b)
	if err != nil {
		return nil, err
	}
	var out []shardInfo
	for _, id := range ids {
		ss, err := memwal.ReadShard(ctx, b, id)
		if err != nil {
			return nil, err
		}
		if ss.Manifest == nil {
			return nil, fmt.Errorf("shard %s has no manifest", id)
		}
		sh := shardInfo{id: id, wal: map[uint64]string{}, walSize: map[uint64]int64{},
			replayAfter: ss.Manifest.GetReplayAfterWalEntryPosition(), manifestVersion: ss.Manifest.GetVersion()}
		for _, t := range ss.Manifest.GetSstables() {
			g := genInfo{gen: t.GetGeneration(), dir: strings.TrimSuffix(memwal.GenerationDir(id, t.GetPath()), "/")}
			err := filepath.WalkDir(filepath.Join(dir, g.dir), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				g.files = append(g.files, rel)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("shard %s generation %d: %w", id, g.gen, err)
			}
			if !slices.ContainsFunc(g.files, func(f string) bool { return strings.Contains(f, "/_versions/") }) {
				return nil, fmt.Errorf("shard %s generation %d (%s) has no _versions/ manifest", id, g.gen, g.dir)
			}
			sh.gens = append(sh.gens, g)
			sh.top = max(sh.top, g.gen)
		}
		ps, err := memwal.ListWAL(ctx, b, id)
		if err != nil {
			return nil, err
		}
		for _, pos := range ps {
			k := memwal.WALKey(id, pos)
			fi, err := os.Stat(filepath.Join(dir, k))
			if err != nil {
				return nil, err
			}
			sh.wal[pos], sh.walSize[pos] = k, fi.Size()
		}
		out = append(out, sh)
	}
	if len(out) != shards {
		return nil, fmt.Errorf("%d shards, want %d", len(out), shards)
	}
	return out, nil
}

// memwalState is what the latest version's MemWAL index records.
type memwalState struct {
	version   uint64
	compacted map[string]uint64 // shard → merged generation
	// floor: shard → min(compacted, catch-up of every maintained index);
	// generations above it are still needed.
	floor      map[string]uint64
	maintained []string
}

func readMemWAL(b storage.Bucket) (memwalState, error) {
	ctx := context.Background()
	st := memwalState{compacted: map[string]uint64{}, floor: map[string]uint64{}}
	v, n, err := meta.Latest(ctx, b)
	if err != nil {
		return st, err
	}
	st.version = v
	f, err := meta.ReadVersion(ctx, b, n, v)
	if err != nil {
		return st, err
	}
	ix := memwal.Index(f.Indices)
	if ix == nil {
		return st, fmt.Errorf("version %d has no MemWAL index", v)
	}
	d, err := memwal.Details(ix)
	if err != nil {
		return st, err
	}
	st.compacted = memwal.Compacted(d)
	catchup := memwal.Catchup(d)
	st.maintained = d.GetMaintainedIndexes()
	if len(st.maintained) == 0 {
		return st, fmt.Errorf("version %d maintains no index", v)
	}
	for s, c := range st.compacted {
		fl := c
		for _, name := range st.maintained {
			fl = min(fl, catchup[name][s]) // absent: not caught up
		}
		st.floor[s] = fl
	}
	return st, nil
}

func exists(p string) (bool, error) {
	_, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// files lists the files under dir (none if it does not exist).
func files(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// checkRetained checks what must survive any crash of merge, catch-up or
// trim: every generation above min(compacted, catch-up) with all its
// files, the newest shard manifest, the newest covered WAL entry and every
// entry above the replay cursor. It returns the MemWAL state read.
func (c *campaign) checkRetained(p *point, when string) (memwalState, bool) {
	c.t.Helper()
	b, err := openBucket(p.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	defer b.Close()
	st, err := readMemWAL(b)
	if err != nil {
		c.pviolation(p, "%s: the MemWAL index: %v", when, err)
		return st, false
	}
	ok := true
	bad := func(format string, args ...any) {
		c.t.Helper()
		ok = false
		c.pviolation(p, "%s: %s", when, fmt.Sprintf(format, args...))
	}
	for _, sh := range c.shards {
		for _, g := range sh.gens {
			if g.gen <= st.floor[sh.id] {
				continue
			}
			var lost []string
			for _, f := range g.files {
				if e, err := exists(filepath.Join(p.dir, f)); err != nil || !e {
					lost = append(lost, fmt.Sprintf("%s (%v)", f, err))
				}
			}
			if len(lost) > 0 {
				bad("shard %s generation %d is needed (compacted %d, min(compacted, catch-up of %v) %d in version %d) but lost %d of its %d files, %s first",
					sh.id, g.gen, st.compacted[sh.id], st.maintained, st.floor[sh.id], st.version, len(lost), len(g.files), lost[0])
			}
		}
		ss, err := memwal.ReadShard(context.Background(), b, sh.id)
		if err != nil || ss.Manifest == nil {
			bad("shard %s: the shard manifest: %v", sh.id, err)
			continue
		}
		if v := ss.Manifest.GetVersion(); v != sh.manifestVersion {
			bad("shard %s: the newest shard manifest is version %d, the fixture's %d", sh.id, v, sh.manifestVersion)
		}
		cursor := ss.Manifest.GetReplayAfterWalEntryPosition()
		var newestCovered uint64
		for pos := range sh.wal {
			if pos <= cursor {
				newestCovered = max(newestCovered, pos)
			}
		}
		for _, pos := range slices.Sorted(maps.Keys(sh.wal)) {
			if pos <= cursor && pos != newestCovered {
				continue
			}
			if e, err := exists(filepath.Join(p.dir, sh.wal[pos])); err != nil || !e {
				bad("shard %s: WAL entry %d (replay cursor %d, newest covered %d) is gone (%v)", sh.id, pos, cursor, newestCovered, err)
			}
		}
	}
	return st, ok
}

// checkTrimmed checks what a finished pipeline leaves: catch-up reached
// every merged generation, trim deleted each merged, caught-up generation
// and the covered WAL entries that hold batches (all but the newest). It
// returns whether every generation is merged.
func (c *campaign) checkTrimmed(p *point, st memwalState) bool {
	c.t.Helper()
	all := true
	for _, sh := range c.shards {
		if st.floor[sh.id] != st.compacted[sh.id] {
			c.pviolation(p, "after the re-run: shard %s: maintained indexes %v caught up to %d < compacted %d", sh.id, st.maintained, st.floor[sh.id], st.compacted[sh.id])
		}
		if st.compacted[sh.id] < sh.top {
			all = false
		}
		for _, g := range sh.gens {
			if g.gen > st.floor[sh.id] {
				continue
			}
			// Deleted objects may leave empty directories on a file
			// system; the generation is gone when no file is left.
			if left, err := files(filepath.Join(p.dir, g.dir)); err != nil || len(left) > 0 {
				c.pviolation(p, "after the re-run: shard %s generation %d is merged and caught up (floor %d) but %d files of %s are still there (%v)", sh.id, g.gen, st.floor[sh.id], len(left), g.dir, err)
			}
		}
		var newestCovered uint64
		for pos := range sh.wal {
			if pos <= sh.replayAfter {
				newestCovered = max(newestCovered, pos)
			}
		}
		for pos, f := range sh.wal {
			if pos >= newestCovered || sh.walSize[pos] <= sentinelMaxBytes {
				continue
			}
			if e, err := exists(filepath.Join(p.dir, f)); err != nil || e {
				c.pviolation(p, "after the re-run: shard %s: WAL entry %d is covered (cursor %d) but still there (%v)", sh.id, pos, sh.replayAfter, err)
			}
		}
	}
	return all
}
