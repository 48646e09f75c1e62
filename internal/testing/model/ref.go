package model

import (
	"fmt"
	"maps"
	"slices"
)

// gen is one flushed MemWAL generation as the model knows it.
type gen struct {
	n    uint64
	rows map[int64]string
	// dir and files (table-relative) are what trim must not delete while
	// a pinned version still reads the generation.
	dir   string
	files []string
}

// Ref is the reference model of one table: the base rows of the latest
// version, the flushed generations of each shard, how far each shard is
// merged, the base rows of every version it saw committed, and the tags.
// It is derived only from the operations acknowledged to the harness
// (LanceDB's and compactord's), never from reading the table; the reads
// are what it is compared with.
type Ref struct {
	Base      map[int64]string
	Gens      map[string][]*gen // shard → ascending generations
	Compacted map[string]uint64
	// Versions: a version the model saw as the latest → its base rows.
	Versions map[uint64]map[int64]string
	Tags     map[string]uint64
	// Buckets: LanceDB's bucket number → the shard id its rows went to.
	Buckets map[int]string
	// WAL: shard → the WAL positions seen.
	WAL map[string]map[uint64]bool
	// Trimmable: shard → the highest floor (min over the pinned versions
	// of min(merged, catch-up)) seen: trim may have deleted up to it.
	Trimmable map[string]uint64
}

// NewRef is the model of a table holding base.
func NewRef(base map[int64]string) *Ref {
	return &Ref{Base: maps.Clone(base), Gens: map[string][]*gen{}, Compacted: map[string]uint64{},
		Versions: map[uint64]map[int64]string{}, Tags: map[string]uint64{}, Buckets: map[int]string{}, WAL: map[string]map[uint64]bool{}, Trimmable: map[string]uint64{}}
}

// LSM is the LSM view: the base, then each shard's unmerged generations
// in ascending order, the higher generation winning per key.
func (r *Ref) LSM() map[int64]string {
	v := maps.Clone(r.Base)
	for shard, gs := range r.Gens {
		for _, g := range gs {
			if g.n > r.Compacted[shard] {
				maps.Copy(v, g.rows)
			}
		}
	}
	return v
}

// Top is the highest flushed generation of shard.
func (r *Ref) Top(shard string) uint64 {
	gs := r.Gens[shard]
	if len(gs) == 0 {
		return 0
	}
	return gs[len(gs)-1].n
}

// Merge applies shard's generations above its merged position up to
// upto to the base, as a merge must: each generation's rows replace the
// base rows of their keys (a base delete or update of a key the
// generation holds is superseded, as LanceDB's LSM view already showed).
func (r *Ref) Merge(shard string, upto uint64) error {
	if upto < r.Compacted[shard] {
		return fmt.Errorf("shard %s: merged position %d is below the model's %d", shard, upto, r.Compacted[shard])
	}
	if upto > r.Top(shard) {
		return fmt.Errorf("shard %s: merged position %d is above the highest flushed generation %d", shard, upto, r.Top(shard))
	}
	for _, g := range r.Gens[shard] {
		if g.n > r.Compacted[shard] && g.n <= upto {
			maps.Copy(r.Base, g.rows)
		}
	}
	r.Compacted[shard] = upto
	return nil
}

// Pending counts the flushed generations not yet merged.
func (r *Ref) Pending() int {
	n := 0
	for shard, gs := range r.Gens {
		for _, g := range gs {
			if g.n > r.Compacted[shard] {
				n++
			}
		}
	}
	return n
}

// Diff describes how got differs from want ("" if equal), at most a few
// keys.
func Diff(got, want map[int64]string) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("key %d lost (want %q)", k, want[k]))
		case g != want[k]:
			d = append(d, fmt.Sprintf("key %d = %q, want %q", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("key %d = %q resurrected or never written", k, got[k]))
		}
	}
	if len(d) > 6 {
		d = append(d[:6], fmt.Sprintf("and %d more", len(d)-6))
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprint(d)
}
