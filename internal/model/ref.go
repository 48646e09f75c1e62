package model

import (
	"bytes"
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/table"
)

// Ref is the in-memory reference model of one table whose primary key is a
// single int64 column (the first field). Base is what a scan of the latest
// version must return. Records written to a shard's WAL are not in Base:
// they reach it only when a merge commit moves compacted_sstables past the
// generation that holds them, and the model applies them exactly then, in
// WAL position order (a later record for a key replaces an earlier one, as
// the merge's fold does).
type Ref struct {
	Base   map[int64]table.Row
	Shards map[string]*ShardRef
}

// ShardRef is the model of one MemWAL shard.
type ShardRef struct {
	// Entries are the WAL entries holding records, ascending by position.
	// Claim markers (empty entries) are not kept.
	Entries []Entry
	// Gens maps every flushed generation the model has seen to the last
	// WAL position it covers.
	Gens map[uint64]uint64
	// MergedGen is compacted_sstables[shard]; MergedPos the last WAL
	// position whose records are in Base.
	MergedGen, MergedPos uint64
	// Seen is the highest WAL position the model has examined.
	Seen uint64
}

// Entry is one WAL entry with records.
type Entry struct {
	Pos  uint64
	Recs []memwal.Record
}

// NewRef returns an empty model with the given shards.
func NewRef(shards ...string) *Ref {
	r := &Ref{Base: map[int64]table.Row{}, Shards: map[string]*ShardRef{}}
	for _, s := range shards {
		r.AddShard(s)
	}
	return r
}

// AddShard adds an empty shard (no-op if present).
func (r *Ref) AddShard(s string) {
	if r.Shards[s] == nil {
		r.Shards[s] = &ShardRef{Gens: map[uint64]uint64{}}
	}
}

// Clone returns a deep copy (rows are immutable and shared).
func (r *Ref) Clone() *Ref {
	c := &Ref{Base: make(map[int64]table.Row, len(r.Base)), Shards: map[string]*ShardRef{}}
	for k, v := range r.Base {
		c.Base[k] = v
	}
	for name, s := range r.Shards {
		cs := *s
		cs.Entries = slices.Clone(s.Entries)
		cs.Gens = make(map[uint64]uint64, len(s.Gens))
		for g, p := range s.Gens {
			cs.Gens[g] = p
		}
		c.Shards[name] = &cs
	}
	return c
}

// ShardNames returns the shards, sorted.
func (r *Ref) ShardNames() []string {
	out := make([]string, 0, len(r.Shards))
	for s := range r.Shards {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Key returns a row's primary key.
func Key(row table.Row) int64 { return row[0].(int64) }

// Append puts rows in Base.
func (r *Ref) Append(rows []table.Row) {
	for _, row := range rows {
		r.Base[Key(row)] = row
	}
}

// Delete removes keys from Base.
func (r *Ref) Delete(keys []int64) {
	for _, k := range keys {
		delete(r.Base, k)
	}
}

// Keys returns Base's keys, sorted.
func (r *Ref) Keys() []int64 {
	out := make([]int64, 0, len(r.Base))
	for k := range r.Base {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// AddEntry records a WAL entry that landed.
func (r *Ref) AddEntry(shard string, pos uint64, recs []memwal.Record) error {
	s := r.Shards[shard]
	if n := len(s.Entries); n > 0 && s.Entries[n-1].Pos >= pos {
		return fmt.Errorf("shard %s: WAL entry at position %d is not above the last known entry %d", shard, pos, s.Entries[n-1].Pos)
	}
	if pos <= s.MergedPos {
		return fmt.Errorf("shard %s: WAL entry at position %d is at or below the merged position %d", shard, pos, s.MergedPos)
	}
	s.Entries = append(s.Entries, Entry{Pos: pos, Recs: slices.Clone(recs)})
	return nil
}

// LastEntry is the position of the newest entry with records (0: none).
func (s *ShardRef) LastEntry() uint64 {
	if len(s.Entries) == 0 {
		return 0
	}
	return s.Entries[len(s.Entries)-1].Pos
}

// NoteFlushed records the generations a shard manifest lists. A generation
// the model already knows must cover the same WAL positions.
func (r *Ref) NoteFlushed(shard string, sm *pb.ShardManifest) error {
	s := r.Shards[shard]
	if sm == nil {
		return nil
	}
	for _, sst := range sm.Sstables {
		if last, ok := s.Gens[sst.Generation]; ok && last != sst.LastWalPosition {
			return fmt.Errorf("shard %s generation %d now covers WAL positions through %d, earlier through %d", shard, sst.Generation, sst.LastWalPosition, last)
		}
		s.Gens[sst.Generation] = sst.LastWalPosition
	}
	return nil
}

// Merge moves the shard's merged generation to compacted and applies the
// records of the generations in between to Base.
func (r *Ref) Merge(shard string, compacted uint64) error {
	s := r.Shards[shard]
	if compacted < s.MergedGen {
		return fmt.Errorf("shard %s: compacted_sstables went back from %d to %d", shard, s.MergedGen, compacted)
	}
	if compacted == s.MergedGen {
		return nil
	}
	for g := s.MergedGen + 1; g <= compacted; g++ {
		if _, ok := s.Gens[g]; !ok {
			return fmt.Errorf("shard %s: compacted_sstables is %d but generation %d was never seen flushed", shard, compacted, g)
		}
	}
	last := s.Gens[compacted]
	if last < s.MergedPos {
		return fmt.Errorf("shard %s: generation %d ends at WAL position %d, below the merged position %d", shard, compacted, last, s.MergedPos)
	}
	for _, e := range s.Entries {
		if e.Pos <= s.MergedPos || e.Pos > last {
			continue
		}
		applyRecords(r.Base, e.Recs)
	}
	s.MergedGen, s.MergedPos = compacted, last
	return nil
}

func applyRecords(base map[int64]table.Row, recs []memwal.Record) {
	for _, rec := range recs {
		k := Key(rec.Row)
		if rec.Op == memwal.Delete {
			delete(base, k)
		} else {
			base[k] = rec.Row
		}
	}
}

// Drained returns Base with every WAL entry of every shard applied: what
// the table must hold once everything written is flushed and merged.
func (r *Ref) Drained() map[int64]table.Row {
	out := make(map[int64]table.Row, len(r.Base))
	for k, v := range r.Base {
		out[k] = v
	}
	for _, name := range r.ShardNames() {
		s := r.Shards[name]
		for _, e := range s.Entries {
			if e.Pos > s.MergedPos {
				applyRecords(out, e.Recs)
			}
		}
	}
	return out
}

// Diff compares actual rows with want and describes up to max differences.
func Diff(schema *pb.Schema, want, actual map[int64]table.Row, max int) []string {
	var out []string
	keys := make([]int64, 0, len(want)+len(actual))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range actual {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		w, inW := want[k]
		a, inA := actual[k]
		switch {
		case inW && !inA:
			out = append(out, fmt.Sprintf("key %d lost: want %s", k, table.RowJSON(schema, w)))
		case !inW && inA:
			out = append(out, fmt.Sprintf("key %d resurrected or unexpected: got %s", k, table.RowJSON(schema, a)))
		case !bytes.Equal(table.RowJSON(schema, w), table.RowJSON(schema, a)):
			out = append(out, fmt.Sprintf("key %d: want %s, got %s", k, table.RowJSON(schema, w), table.RowJSON(schema, a)))
		default:
			continue
		}
		if len(out) >= max {
			out = append(out, "...")
			break
		}
	}
	return out
}
