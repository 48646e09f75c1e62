package daemon

import (
	"testing"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/trim"
)

// The trim summary gives each kind of object deleted its own bytes: a
// trim that deleted only WAL entries read "deleted 0 generations (29456
// bytes), 2 WAL entries", the WAL's bytes shown as the generations'.
func TestTrimSummaryCountsAgreeWithBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		res  trim.Result
		want string
	}{
		{"WAL entries only", trim.Result{DeletedWAL: 2, BytesTrimmed: 29456,
			Plan: trim.Plan{Generations: []trim.GenDecision{{Bytes: 500, Delete: false}}, Retained: map[string]int64{trim.ReasonNotMerged: 500}}},
			"deleted 0 generations (0 bytes), 2 WAL entries (29456 bytes) and 0 old shard manifests; kept 500 bytes of unmerged generations and 0 bytes of generations an index has not caught up with"},
		{"generations and WAL entries", trim.Result{DeletedGenerations: 2, DeletedWAL: 1, DeletedManifests: 3, BytesTrimmed: 3100,
			Plan: trim.Plan{Generations: []trim.GenDecision{{Bytes: 1000, Delete: true}, {Bytes: 2000, Delete: true}, {Bytes: 700}},
				Retained: map[string]int64{trim.ReasonIndexLag: 700}}},
			"deleted 2 generations (3000 bytes), 1 WAL entry (100 bytes) and 3 old shard manifests; kept 0 bytes of unmerged generations and 700 bytes of generations an index has not caught up with"},
	} {
		if got := trimSummary(&c.res); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// The index remaps that absorb a deferred compaction hold their memory
// from the budget the compactions hold theirs from
// (jobs.compact.memory_budget_mib), so that a table's remap and another
// table's compaction together stay within it; no budget, no bound.
func TestRemapsShareTheCompactionMemoryBudget(t *testing.T) {
	mem := &memoryBudget{}
	c := JobsConfig{Compact: compact.DefaultConfig(), Index: index.DefaultConfig()}
	c.Compact.MemoryBudgetMiB = 0
	if o := mem.remapOptions(c, nil); o.Memory != nil {
		t.Error("a remap holds memory with no budget configured")
	}
	c.Compact.MemoryBudgetMiB = 64
	o := mem.remapOptions(c, nil)
	if o.Memory == nil {
		t.Fatal("the remap holds no memory from the 64 MiB budget")
	}
	release, err := o.Memory(t.Context(), 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	budget := mem.of(c.Compact.MemoryBudgetMiB)
	if got := budget.Held(); got != 10<<20 {
		t.Errorf("the compactions' budget holds %d bytes while a remap holds 10 MiB", got)
	}
	release()
	if got := budget.Held(); got != 0 {
		t.Errorf("%d bytes held after the remap gave its memory back", got)
	}
}
