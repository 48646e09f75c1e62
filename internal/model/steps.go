package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/trim"
)

// ---- generators ----

func (h *harness) row(k int64) table.Row {
	return table.Row{k, fmt.Sprintf("c%d", h.rng.IntN(numCats)), int64(h.rng.IntN(1_000_000))}
}

// genRows returns n rows with keys absent from the model: reused keys of
// the key space, or fresh keys (always fresh when fresh is set: a racing
// merge could insert a reused key too).
func (h *harness) genRows(n int, fresh bool) []table.Row {
	var rows []table.Row
	used := map[int64]bool{}
	for len(rows) < n {
		k := int64(-1)
		if !fresh && h.rng.IntN(2) == 0 {
			for try := 0; try < 10; try++ {
				c := int64(h.rng.IntN(keySpace))
				if _, live := h.ref.Base[c]; !live && !used[c] {
					k = c
					break
				}
			}
		}
		if k < 0 {
			k = h.nextKey
			h.nextKey++
		}
		used[k] = true
		rows = append(rows, h.row(k))
	}
	return rows
}

// genRecords returns WAL records for keys of shard's part of the key
// space (shards partition the keys: merge REQUIRES it).
func (h *harness) genRecords(shard string) []memwal.Record {
	i := slices.Index(h.shards, shard)
	n := len(h.shards)
	var recs []memwal.Record
	for j := 1 + h.rng.IntN(8); j > 0; j-- {
		k := int64(i + n*h.rng.IntN(keySpace/n))
		if h.rng.IntN(4) == 0 {
			recs = append(recs, memwal.Record{Op: memwal.Delete, Row: table.Row{k, nil, nil}})
		} else {
			recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: h.row(k)})
		}
	}
	return recs
}

func (h *harness) pickShard() string { return h.shards[h.rng.IntN(len(h.shards))] }

// sameRow reports whether a and b are the same row value (not merely
// equal): a delete planned against one row must not remove the row a
// merge wrote for the same key in the meantime.
func sameRow(a, b table.Row) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

// deleteRows returns the effect of deleting exactly these rows.
func deleteRows(rows map[int64]table.Row) func(*Ref) {
	return func(r *Ref) {
		for k, row := range rows {
			if cur, ok := r.Base[k]; ok && sameRow(cur, row) {
				delete(r.Base, k)
			}
		}
	}
}

// ---- races ----

// raceOp is a commit made by "another process" (over the raw bucket) while
// the step's operation is parked at its manifest put, so that the
// operation loses the race for that version and must classify, rebase or
// retry against it.
type raceOp struct {
	name  string
	run   func(h *harness, ctx context.Context) (func(*Ref), error)
	apply func(*Ref) // set after run
	// writer is the claimer of a "claim" race.
	writer *writerState
}

func (h *harness) pickRace() *raceOp {
	races := []raceOp{
		{name: "append", run: func(h *harness, ctx context.Context) (func(*Ref), error) {
			rows := h.genRows(1+h.rng.IntN(5), true)
			_, err := h.rawT.Append(ctx, rows)
			return func(r *Ref) { r.Append(rows) }, err
		}},
		{name: "delete", run: func(h *harness, ctx context.Context) (func(*Ref), error) {
			keys := h.ref.Keys()
			if len(keys) == 0 {
				return nil, nil
			}
			rows := map[int64]table.Row{}
			var spec []table.Row
			for i := 1 + h.rng.IntN(4); i > 0; i-- {
				k := keys[h.rng.IntN(len(keys))]
				rows[k] = h.ref.Base[k]
				spec = append(spec, table.Row{k, nil, nil})
			}
			_, _, err := h.rawT.Delete(ctx, nil, ops.DeleteSpec{Keys: spec})
			return deleteRows(rows), err
		}},
		{name: "compact", run: func(h *harness, ctx context.Context) (func(*Ref), error) {
			c, err := compact.New(h.compactConfig(h.rng.IntN(2) == 0), h.rawT, nil, nil)
			if err != nil {
				return nil, err
			}
			_, err = c.Run(ctx, nil)
			return nil, err
		}},
		{name: "merge", run: func(h *harness, ctx context.Context) (func(*Ref), error) {
			mg, err := merge.New(merge.Config{}, h.rawT)
			if err != nil {
				return nil, err
			}
			_, err = mg.Run(ctx, "")
			return nil, err
		}},
	}
	r := races[h.rng.IntN(len(races))]
	return &r
}

// pickFlushRace returns what races a flush for its shard-manifest
// version: a trim publishing a maintenance version (the flush must rebase
// on it) or a new writer's claim (the flush must be fenced).
func (h *harness) pickFlushRace(shard string) *raceOp {
	if h.rng.IntN(2) == 0 {
		return &raceOp{name: "trim", run: func(h *harness, ctx context.Context) (func(*Ref), error) {
			_, err := trim.Run(ctx, h.raw, trim.Config{Concurrency: 1, KeepShardManifests: 3, MaxAttempts: 3})
			return nil, err
		}}
	}
	r := &raceOp{name: "claim"}
	r.run = func(h *harness, ctx context.Context) (func(*Ref), error) {
		w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: h.schema}, h.faulty)
		if err != nil {
			return nil, err
		}
		if _, err := w.Claim(ctx); err != nil {
			return nil, err
		}
		r.writer = &writerState{w: w}
		return nil, nil
	}
	return r
}

// raced runs op. In race mode it parks op at its first manifest put, runs
// the racing commit, then lets op continue into the lost race.
func (h *harness) raced(ctx context.Context, st *stepCtx, op func(context.Context) error) error {
	return h.racedAt(ctx, st, table.VersionsDir, op)
}

// racedAt parks op at its first put-if-absent under prefix.
func (h *harness) racedAt(ctx context.Context, st *stepCtx, prefix string, op func(context.Context) error) error {
	if st.mode != modeRace {
		return op(ctx)
	}
	release := make(chan struct{})
	rule := h.faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: prefix, Nth: 1, Action: storage.Block(release)})
	defer h.faulty.Remove(rule)
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for rule.Fired() == 0 {
		select {
		case err := <-done:
			return err // it never reached a manifest put: nothing to race
		case <-tick.C:
		}
	}
	apply, err := st.race.run(h, ctx)
	close(release)
	opErr := <-done
	if err != nil {
		return violationf("racing %s on a clean bucket failed: %v", st.race.name, err)
	}
	st.race.apply = apply
	st.raced = true
	return opErr
}

// ---- base table ----

func (h *harness) stepAppend(ctx context.Context, st *stepCtx) error {
	rows := h.genRows(1+h.rng.IntN(30), st.mode == modeRace)
	h.logf("step %d append %d rows [%s]", h.step, len(rows), st.desc)
	err := h.raced(ctx, st, func(ctx context.Context) error {
		_, err := h.t.Append(ctx, rows)
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, func(r *Ref) { r.Append(rows) }, err)
}

func (h *harness) stepDeleteKeys(ctx context.Context, st *stepCtx) error {
	keys := h.ref.Keys()
	rows := map[int64]table.Row{}
	var spec []table.Row
	for i := 1 + h.rng.IntN(8); i > 0 && len(keys) > 0; i-- {
		k := keys[h.rng.IntN(len(keys))]
		rows[k] = h.ref.Base[k]
		spec = append(spec, table.Row{k, nil, nil})
	}
	spec = append(spec, table.Row{int64(keySpace + 7), nil, nil}) // absent
	h.logf("step %d delete %d keys [%s]", h.step, len(spec), st.desc)
	err := h.raced(ctx, st, func(ctx context.Context) error {
		_, _, err := h.t.Delete(ctx, nil, ops.DeleteSpec{Keys: spec})
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, deleteRows(rows), err)
}

func (h *harness) stepDeletePredicate(ctx context.Context, st *stepCtx) error {
	var expr string
	var match func(table.Row) bool
	if h.rng.IntN(2) == 0 {
		a := int64(h.rng.IntN(keySpace))
		b := a + 1 + int64(h.rng.IntN(40))
		expr = fmt.Sprintf("id >= %d AND id < %d", a, b)
		match = func(r table.Row) bool { k := Key(r); return k >= a && k < b }
	} else {
		c := fmt.Sprintf("c%d", h.rng.IntN(numCats))
		x := int64(h.rng.IntN(keySpace))
		expr = fmt.Sprintf("cat = '%s' AND id < %d", c, x)
		match = func(r table.Row) bool { return r[1] == c && Key(r) < x }
	}
	p, err := ops.ParsePredicate(h.schema, expr)
	if err != nil {
		return violationf("predicate %q: %v", expr, err)
	}
	rows := map[int64]table.Row{}
	for k, r := range h.ref.Base {
		if match(r) {
			rows[k] = r
		}
	}
	h.logf("step %d delete where %s (%d rows) [%s]", h.step, expr, len(rows), st.desc)
	err = h.raced(ctx, st, func(ctx context.Context) error {
		_, _, err := h.t.Delete(ctx, nil, ops.DeleteSpec{Predicate: p})
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, deleteRows(rows), err)
}

func (h *harness) stepDeleteFragment(ctx context.Context, st *stepCtx) error {
	head, err := table.ReadLatest(ctx, h.raw)
	if err != nil {
		return violationf("read head: %v", err)
	}
	if len(head.Fragments) == 0 {
		h.logf("step %d delete fragment: none live", h.step)
		return nil
	}
	id := head.Fragments[h.rng.IntN(len(head.Fragments))].Id
	keys, err := FragmentKeys(ctx, h.raw, head, id)
	if err != nil {
		return violationf("scan fragment %d: %v", id, err)
	}
	rows := map[int64]table.Row{}
	for _, k := range keys {
		rows[k] = h.ref.Base[k]
	}
	h.logf("step %d delete fragment %d (%d rows) [%s]", h.step, id, len(rows), st.desc)
	err = h.raced(ctx, st, func(ctx context.Context) error {
		_, _, err := h.t.Delete(ctx, nil, ops.DeleteSpec{Fragment: &id})
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, deleteRows(rows), err)
}

// ---- MemWAL ----

// writer returns the shard's claimed writer, claiming a new one if there
// is none. A claim writes only a marker: no entry with records may appear.
func (h *harness) writer(ctx context.Context, shard string) (*writerState, error) {
	if ws := h.writers[shard]; ws != nil {
		return ws, nil
	}
	w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: h.schema, ReadBackTimeout: 10 * time.Second}, h.faulty)
	if err != nil {
		return nil, err
	}
	_, err = w.Claim(ctx)
	if _, serr := SyncWAL(ctx, h.raw, h.ref, shard, 0, nil); serr != nil {
		return nil, violationf("after a claim of shard %s: %v", shard, serr)
	}
	if err != nil {
		return nil, err
	}
	ws := &writerState{w: w}
	h.writers[shard] = ws
	return ws, nil
}

// writerFailed handles a failed writer operation (not a violation of the
// model, which the caller checked): a fenced or undecided writer, or one
// of a crashed process, is dropped; a failure without any disturbance is a
// violation unless the writer had failed before.
func (h *harness) writerFailed(st *stepCtx, shard string, ws *writerState, err error) error {
	h.logf("  -> %s failed: %v", st.name, err)
	h.stats.Failed++
	if isAmbiguous(err) || st.crashed {
		h.stats.Ambiguous++
	}
	if !st.disturbed() && (ws == nil || !ws.suspect) {
		return violationf("%s on shard %s failed without an injected fault or crash: %v", st.name, shard, err)
	}
	if ws == nil || !st.disturbed() || errors.Is(err, memwal.ErrFenced) || errors.Is(err, memwal.ErrUnknownOutcome) || st.crashed {
		delete(h.writers, shard)
		return nil
	}
	// Keep the writer: a definite failure must leave it usable, and its
	// next flush retries what this one could not (Lance #8293).
	ws.suspect = true
	return nil
}

func (h *harness) stepWALWrite(ctx context.Context, st *stepCtx) error {
	shard := h.pickShard()
	recs := h.genRecords(shard)
	h.logf("step %d wal write %s %d records [%s]", h.step, shard, len(recs), st.desc)
	ws, err := h.writer(ctx, shard)
	if err != nil {
		st.done(h)
		if errors.As(err, new(*Violation)) {
			return err
		}
		return h.writerFailed(st, shard, nil, err)
	}
	epoch := ws.w.Epoch()
	pos, err := ws.w.Append(ctx, recs)
	st.done(h)
	landed, serr := SyncWAL(ctx, h.raw, h.ref, shard, epoch, recs)
	if serr != nil {
		return violationf("after wal write (err=%v): %v", err, serr)
	}
	if err == nil {
		if landed != pos {
			return violationf("wal write on shard %s acknowledged position %d, but the entry is at %d", shard, pos, landed)
		}
		return nil
	}
	if landed != 0 && !isAmbiguous(err) && !errors.Is(err, memwal.ErrFenced) && !st.crashed {
		return violationf("wal write on shard %s failed definitely (%v), but its entry landed at position %d", shard, err, landed)
	}
	return h.writerFailed(st, shard, ws, err)
}

func (h *harness) stepWALFlush(ctx context.Context, st *stepCtx) error {
	shard := st.shard
	if shard == "" {
		shard = h.pickShard()
	}
	h.logf("step %d wal flush %s [%s]", h.step, shard, st.desc)
	ws, err := h.writer(ctx, shard)
	if err != nil {
		st.done(h)
		if errors.As(err, new(*Violation)) {
			return err
		}
		return h.writerFailed(st, shard, nil, err)
	}
	var res *memwal.FlushResult
	err = h.racedAt(ctx, st, memwal.ShardManifestDir(shard), func(ctx context.Context) error {
		var ferr error
		res, ferr = ws.w.Flush(ctx)
		return ferr
	})
	st.done(h)
	if _, serr := SyncWAL(ctx, h.raw, h.ref, shard, 0, nil); serr != nil {
		return violationf("after flush (err=%v): %v", err, serr)
	}
	var viol *Violation
	if errors.As(err, &viol) {
		return err
	}
	if st.raced && st.race.name == "trim" && err != nil {
		return violationf("a flush of shard %s that lost its shard-manifest version to trim failed instead of rebasing: %v", shard, err)
	}
	sm, rerr := memwal.ReadShardManifest(ctx, h.raw, shard)
	if rerr != nil {
		return violationf("read shard %s: %v", shard, rerr)
	}
	if nerr := h.ref.NoteFlushed(shard, sm); nerr != nil {
		return violationf("after flush (err=%v): %v", err, nerr)
	}
	if st.raced && st.race.name == "claim" {
		// The shard was claimed during the flush: the flush must be
		// fenced, and the claimer carries on.
		if !errors.Is(err, memwal.ErrFenced) {
			return violationf("a flush of shard %s overtaken by a claim was not fenced: %v", shard, err)
		}
		h.stats.Failed++
		h.writers[shard] = st.race.writer
		return nil
	}
	if err != nil {
		return h.writerFailed(st, shard, ws, err)
	}
	s := h.ref.Shards[shard]
	var cursor uint64
	if sm != nil {
		cursor = sm.ReplayAfterWalPosition
	}
	if last := s.LastEntry(); last > cursor && last > s.MergedPos {
		return violationf("flush of shard %s succeeded, but WAL entry %d is above the replay cursor %d (an acknowledged write was not flushed)", shard, last, cursor)
	}
	for _, sst := range res.SSTables {
		if got, ok := s.Gens[sst.Generation]; !ok || got != sst.LastWalPosition {
			return violationf("flush of shard %s reported generation %d, which the shard manifest does not list as flushed", shard, sst.Generation)
		}
	}
	return nil
}

func (h *harness) stepWALRestart(ctx context.Context, st *stepCtx) error {
	shard := h.pickShard()
	h.logf("step %d wal restart %s [%s]", h.step, shard, st.desc)
	delete(h.writers, shard)
	_, err := h.writer(ctx, shard)
	st.done(h)
	if err != nil {
		if errors.As(err, new(*Violation)) {
			return err
		}
		return h.writerFailed(st, shard, nil, err)
	}
	return nil
}

// stepWALSteal claims a shard while its writer is still alive: the stale
// writer must be fenced, and nothing it tries afterwards may land.
func (h *harness) stepWALSteal(ctx context.Context, st *stepCtx) error {
	shard := h.pickShard()
	flushFirst := h.rng.IntN(2) == 0
	h.logf("step %d wal steal %s (stale writer flushes first: %v)", h.step, shard, flushFirst)
	old, err := h.writer(ctx, shard)
	if err != nil {
		return violationf("claim shard %s: %v", shard, err)
	}
	w2, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: h.schema}, h.faulty)
	if err != nil {
		return err
	}
	if _, err := w2.Claim(ctx); err != nil {
		return violationf("second claim of shard %s: %v", shard, err)
	}
	if _, err := SyncWAL(ctx, h.raw, h.ref, shard, 0, nil); err != nil {
		return violationf("after the second claim: %v", err)
	}
	h.writers[shard] = &writerState{w: w2}
	if pending, _ := old.w.Pending(); flushFirst && pending > 0 {
		before, err := memwal.ReadShardManifest(ctx, h.raw, shard)
		if err != nil {
			return err
		}
		_, ferr := old.w.Flush(ctx)
		if !errors.Is(ferr, memwal.ErrFenced) {
			return violationf("a stale writer's flush of shard %s was not fenced: %v", shard, ferr)
		}
		after, err := memwal.ReadShardManifest(ctx, h.raw, shard)
		if err != nil {
			return err
		}
		if after.Version != before.Version {
			return violationf("a fenced flush of shard %s published shard manifest version %d", shard, after.Version)
		}
	}
	recs := h.genRecords(shard)
	epoch := old.w.Epoch()
	_, aerr := old.w.Append(ctx, recs)
	if !errors.Is(aerr, memwal.ErrFenced) {
		return violationf("a stale writer's append to shard %s was not fenced: %v", shard, aerr)
	}
	landed, err := SyncWAL(ctx, h.raw, h.ref, shard, epoch, recs)
	if err != nil {
		return violationf("after a fenced append: %v", err)
	}
	if landed != 0 {
		return violationf("a fenced append to shard %s landed at position %d", shard, landed)
	}
	return nil
}

// ---- jobs ----

func (h *harness) stepMerge(ctx context.Context, st *stepCtx) error {
	shard := ""
	if h.rng.IntN(2) == 0 {
		shard = h.pickShard()
	}
	cfg := merge.Config{MaxGenerations: h.rng.IntN(3), IndexLookupMaxKeys: []int{0, -1, 3}[h.rng.IntN(3)]}
	h.logf("step %d merge shard=%q max_generations=%d lookup_max=%d [%s]", h.step, shard, cfg.MaxGenerations, cfg.IndexLookupMaxKeys, st.desc)
	mg, err := merge.New(cfg, h.t)
	if err != nil {
		return err
	}
	expected := map[string]uint64{}
	for _, s := range h.shards {
		expected[s] = h.ref.Shards[s].MergedGen
	}
	var results []merge.Result
	err = h.raced(ctx, st, func(ctx context.Context) error {
		var rerr error
		results, rerr = mg.Run(ctx, shard)
		return rerr
	})
	st.done(h)
	if serr := h.settle(ctx, st, h.ref, nil, err); serr != nil {
		return serr
	}
	if st.raced || st.crashed || isAmbiguous(err) {
		return nil
	}
	skipped := map[string]bool{}
	for _, r := range results {
		if r.Skipped {
			skipped[r.Shard] = true
		} else if r.Version > 0 {
			expected[r.Shard] = r.Through
		}
	}
	for _, s := range h.shards {
		sr := h.ref.Shards[s]
		if sr.MergedGen != expected[s] {
			return violationf("merge (err=%v) reported shard %s merged through %d, the table records %d", err, s, expected[s], sr.MergedGen)
		}
		if err != nil || skipped[s] || (shard != "" && s != shard) {
			continue
		}
		for g := range sr.Gens {
			if g > sr.MergedGen {
				return violationf("merge succeeded but left generation %d of shard %s unmerged (merged through %d)", g, s, sr.MergedGen)
			}
		}
	}
	return nil
}

func (h *harness) compactConfig(inline bool) compact.Config {
	return compact.Config{TargetRowsPerFragment: 48, DeletionThreshold: 0.2, Parallelism: 1, InlineRemap: inline}
}

func (h *harness) stepCompact(inline bool) func(*harness, context.Context, *stepCtx) error {
	return func(h *harness, ctx context.Context, st *stepCtx) error {
		h.logf("step %d compact inline=%v [%s]", h.step, inline, st.desc)
		c, err := compact.New(h.compactConfig(inline), h.t, nil, nil)
		if err != nil {
			return err
		}
		err = h.raced(ctx, st, func(ctx context.Context) error {
			_, err := c.Run(ctx, nil)
			return err
		})
		st.done(h)
		return h.settle(ctx, st, h.ref, nil, err)
	}
}

func (h *harness) stepIndexCreate(ctx context.Context, st *stepCtx) error {
	head, err := table.ReadLatest(ctx, h.raw)
	if err != nil {
		return err
	}
	var spec index.Spec
	switch {
	case table.FindIndex(head, idxByID) == nil:
		spec = index.Spec{Name: idxByID, Column: "id", Type: index.TypeBTree}
	case table.FindIndex(head, idxByCat) == nil:
		spec = index.Spec{Name: idxByCat, Column: "cat", Type: index.TypeBitmap}
	default:
		h.logf("step %d index create: both exist", h.step)
		return nil
	}
	h.logf("step %d index create %s [%s]", h.step, spec.Name, st.desc)
	err = h.raced(ctx, st, func(ctx context.Context) error {
		_, err := index.Create(ctx, h.t, spec, index.BuildConfig{})
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, nil, err)
}

func (h *harness) stepIndexJob(kind string) func(*harness, context.Context, *stepCtx) error {
	return func(h *harness, ctx context.Context, st *stepCtx) error {
		h.logf("step %d index %s [%s]", h.step, kind, st.desc)
		j, err := indexjob.New(indexjob.Config{}, h.t, nil)
		if err != nil {
			return err
		}
		err = h.raced(ctx, st, func(ctx context.Context) error {
			var err error
			switch kind {
			case "catchup":
				_, err = j.CatchUp(ctx)
			case "remap":
				_, err = j.Remap(ctx)
			case "trim":
				_, err = j.Trim(ctx)
			default:
				_, err = j.Run(ctx)
			}
			return err
		})
		st.done(h)
		return h.settle(ctx, st, h.ref, nil, err)
	}
}

func (h *harness) stepIndexOptimize(ctx context.Context, st *stepCtx) error {
	head, err := table.ReadLatest(ctx, h.raw)
	if err != nil {
		return err
	}
	names := index.Names(head)
	if len(names) == 0 {
		h.logf("step %d index optimize: no index", h.step)
		return nil
	}
	name := names[h.rng.IntN(len(names))]
	h.logf("step %d index optimize %s [%s]", h.step, name, st.desc)
	err = h.raced(ctx, st, func(ctx context.Context) error {
		_, err := index.Optimize(ctx, h.t, name, index.BuildConfig{})
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, nil, err)
}

func (h *harness) stepConfigure(ctx context.Context, st *stepCtx) error {
	head, err := table.ReadLatest(ctx, h.raw)
	if err != nil {
		return err
	}
	var maintained []string
	for _, n := range index.Names(head) {
		if h.rng.IntN(3) > 0 {
			maintained = append(maintained, n)
		}
	}
	h.logf("step %d wal configure maintain=%v [%s]", h.step, maintained, st.desc)
	err = h.raced(ctx, st, func(ctx context.Context) error {
		_, err := memwal.Configure(ctx, h.t, h.shards, maintained)
		return err
	})
	st.done(h)
	return h.settle(ctx, st, h.ref, nil, err)
}

func (h *harness) stepTrim(ctx context.Context, st *stepCtx) error {
	cfg := trim.Config{Concurrency: 1, KeepShardManifests: 2 + h.rng.IntN(3), MaxAttempts: 3}
	if h.rng.IntN(2) == 0 {
		// Every retained version of this short run is within the grace.
		cfg.ReaderGrace = time.Hour
	}
	h.logf("step %d trim keep=%d grace=%s [%s]", h.step, cfg.KeepShardManifests, cfg.ReaderGrace, st.desc)
	bound, before, err := h.trimBounds(ctx, cfg.ReaderGrace > 0)
	if err != nil {
		return err
	}
	_, err = trim.Run(ctx, h.faulty, cfg)
	st.done(h)
	if err := h.settle(ctx, st, h.ref, nil, err); err != nil {
		return err
	}
	// Re-derive the trim rule independently: a retired
	// generation is merged in the latest version (and, within the reader
	// grace, in every retained version naming the shard) and covered by the
	// catch-up entry of every maintained index; an absent entry retains.
	for _, s := range h.shards {
		sm, err := memwal.ReadShardManifest(ctx, h.raw, s)
		if err != nil {
			return violationf("read shard %s: %v", s, err)
		}
		left := map[uint64]bool{}
		if sm != nil {
			for _, sst := range sm.Sstables {
				left[sst.Generation] = true
			}
		}
		for _, g := range before[s] {
			if !left[g] && g > bound[s] {
				return violationf("trim retired generation %d of shard %s, but only generations through %d were merged everywhere and caught up by every maintained index", g, s, bound[s])
			}
		}
	}
	return nil
}

// trimBounds returns, per shard, the highest generation trim may retire
// (the oldest retained version's compacted position, capped by every
// maintained index's catch-up entry at the latest version), and the
// generations each shard manifest lists now.
func (h *harness) trimBounds(ctx context.Context, allRetained bool) (map[string]uint64, map[string][]uint64, error) {
	latest, err := table.ReadLatest(ctx, h.raw)
	if err != nil {
		return nil, nil, err
	}
	var readers []*pb.MemWalIndexDetails
	if allRetained {
		versions, err := table.ListVersions(ctx, h.raw)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range versions {
			m, err := table.ReadManifest(ctx, h.raw, v)
			if err != nil {
				return nil, nil, err
			}
			readers = append(readers, table.MemWal(m))
		}
	}
	d := table.MemWal(latest)
	bound := map[string]uint64{}
	gens := map[string][]uint64{}
	for _, s := range h.shards {
		b := d.GetCompactedSstables()[s]
		for _, r := range readers {
			if slices.Contains(r.GetShards(), s) {
				b = min(b, r.GetCompactedSstables()[s])
			}
		}
		for _, n := range d.GetMaintainedIndexes() {
			b = min(b, d.GetIndexCatchup()[n].GetGenerations()[s])
		}
		bound[s] = b
		sm, err := memwal.ReadShardManifest(ctx, h.raw, s)
		if err != nil {
			return nil, nil, err
		}
		if sm != nil {
			for _, sst := range sm.Sstables {
				gens[s] = append(gens[s], sst.Generation)
			}
		}
	}
	return bound, gens, nil
}

func (h *harness) stepCleanup(ctx context.Context, st *stepCtx) error {
	cfg := cleanup.Config{Policy: cleanup.Policy{RetainVersions: 1 + h.rng.IntN(4)}, Concurrency: 1}
	h.logf("step %d cleanup retain=%d [%s]", h.step, cfg.Policy.RetainVersions, st.desc)
	_, err := cleanup.Run(ctx, h.faulty, cfg, time.Now())
	st.done(h)
	return h.settle(ctx, st, h.ref, nil, err)
}

// drain flushes every shard and merges everything, with no fault: the
// table must then equal the model with every write applied.
func (h *harness) drain(ctx context.Context) error {
	h.logf("drain")
	want := h.ref.Drained()
	for _, s := range h.shards {
		ws, err := h.writer(ctx, s)
		if err != nil {
			return violationf("drain: claim %s: %v", s, err)
		}
		if _, err := ws.w.Flush(ctx); err != nil {
			return violationf("drain: flush %s: %v", s, err)
		}
	}
	mg, err := merge.New(merge.Config{}, h.t)
	if err != nil {
		return err
	}
	if _, err := mg.Run(ctx, ""); err != nil {
		return violationf("drain: merge: %v", err)
	}
	j, err := indexjob.New(indexjob.Config{}, h.t, nil)
	if err != nil {
		return err
	}
	if _, err := j.Run(ctx); err != nil {
		return violationf("drain: index job: %v", err)
	}
	head, rows, err := ScanLatest(ctx, h.raw)
	if err != nil {
		return violationf("drain: %v", err)
	}
	if err := SyncShards(ctx, h.raw, h.ref, head); err != nil {
		return violationf("drain: %v", err)
	}
	if d := Diff(h.schema, want, rows, 10); len(d) > 0 {
		return violationf("drain: after flushing and merging everything, the table differs from base ∪ WAL:\n    %v", d)
	}
	for _, s := range h.shards {
		if sr := h.ref.Shards[s]; sr.LastEntry() > sr.MergedPos {
			return violationf("drain: shard %s still has WAL entry %d unmerged (merged through position %d)", s, sr.LastEntry(), sr.MergedPos)
		}
	}
	if err := h.checkIndices(ctx, head, true); err != nil {
		return err
	}
	return h.check(ctx)
}
