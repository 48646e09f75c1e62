package compact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func raceDuration(t *testing.T) time.Duration {
	if s := os.Getenv("COMPACTORD_COMPACT_RACE_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("COMPACTORD_COMPACT_RACE_DURATION: %v", err)
		}
		return d
	}
	if os.Getenv("COMPACTORD_LONG") == "1" {
		return time.Minute
	}
	return 20 * time.Second
}

// TestRunRaceWithLanceDBDeletes: a LanceDB writer deletes (and appends)
// for 20 s (60 s with COMPACTORD_LONG=1) while compactord compacts the
// table in a loop, each compaction holding its Rewrite until another
// version landed after its read. Afterwards LanceDB reads exactly what the
// writer's acknowledged operations leave (no deleted row back, no live row
// lost), through a scan and through the btree index, and optimize()
// changes no row. Deletes that landed on rewritten fragments were rebased
// (counted, and there must be some); re-plans are counted.
func TestRunRaceWithLanceDBDeletes(t *testing.T) {
	lancedb.Require(t)
	dur := raceDuration(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 200))}
	prior := map[int64]string{}
	for id := int64(0); id < 2000; id++ {
		prior[id] = fmt.Sprintf("v%d", id)
	}
	for lo := int64(200); lo < 2000; lo += 200 {
		steps = append(steps, lancedb.Add(lancedb.BasicRows(lo, lo+200)))
	}
	steps = append(steps, lancedb.CreateIndex("id", "btree", "id_idx"))
	f.Run(t, steps...)

	h := openHandle(t, f.Dir)
	w := lancedb.StartWriter(t, lancedb.WriterOpts{URI: f.URI, Duration: dur, KeyMin: 0, KeyMax: 2999, Seed: 7, ID: "w",
		Weights: map[string]int{"append": 1, "delete": 4}, Batch: 8})
	// Deferred: the FRI chain the compactions build is absorbed below
	// (TestRunRebasesLanceDBDeletes races the default, inline remap).
	o := deferredOptions()
	o.TargetRowsPerFragment = 600
	o.DeletionThreshold = 0.02
	// Hold each Rewrite until some other version landed after its read
	// (polled, bounded), so the writer's deletes race it.
	env := Env{BeforeCommit: func(ctx context.Context, p *Plan) error {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			v, _, err := meta.Latest(ctx, h.Bucket)
			if err != nil {
				return err
			}
			if v > p.ReadVersion+1 { // +1: our own ReserveFragments
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}}
	var landed, rebased, retried, gaveUp int
	for running := true; running; {
		select {
		case <-w.Done():
			running = false
			continue
		default:
		}
		res, err := Run(t.Context(), h, o, env)
		var ce *commit.ConflictError
		switch {
		case err != nil && errors.As(err, &ce) && errors.Is(err, commit.ErrRetryable):
			gaveUp++
			retried += res.Retried + 1
			continue
		case err != nil:
			t.Fatalf("compaction %d: %v", landed+1, err)
		}
		retried += res.Retried
		if res.Commit != nil {
			landed++
			rebased += res.Rebased
		}
	}
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, op := range lancedb.Acknowledged(ops) {
		kinds[op.Op]++
	}
	t.Logf("%v: writer acknowledged %v (%d failed); compactord landed %d compactions, rebased %d deletes, re-planned %d times (%d gave up)",
		dur, kinds, len(lancedb.Failed(ops)), landed, rebased, retried, gaveUp)
	want := lancedb.Expected(prior, ops)
	if kinds["delete"] < 10 || landed < 3 {
		t.Fatalf("too little happened: writer %v, %d compactions", kinds, landed)
	}
	if rebased == 0 {
		t.Errorf("no delete was rebased")
	}
	var deleted []string
	for id := int64(0); id < 2000 && len(deleted) < 40; id++ {
		if _, ok := want[id]; !ok {
			deleted = append(deleted, fmt.Sprint(id))
		}
	}
	inList := "id IN (" + strings.Join(deleted, ",") + ", 1, 2, 3, 1999)"
	steps = []lancedb.Step{
		lancedb.Open(),
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: inList}),
	}
	out := f.Run(t, steps...)
	// The FRI chain is absorbed before LanceDB's optimize() (see
	// TestRunDeferredWithLanceDB), then optimize changes no row.
	if _, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{}); err != nil {
		t.Fatal(err)
	}
	steps = append(steps,
		lancedb.Open(),
		lancedb.Optimize(lancedb.OptimizeOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: inList}))
	out.Steps = append(out.Steps, f.Run(t, steps[3:]...).Steps...)
	inWant := filter(want, func(k int64) bool {
		for _, d := range deleted {
			if d == fmt.Sprint(k) {
				return true
			}
		}
		return k == 1 || k == 2 || k == 3 || k == 1999
	})
	for i, w := range map[int]map[int64]string{1: want, 2: inWant, 5: want, 6: inWant} {
		if d := lancedb.DiffByID(readByID(t, out, i), w); d != "" {
			t.Errorf("step %d (%v): %s", i, steps[i]["op"], d)
		}
	}
}
