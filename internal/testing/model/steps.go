package model

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

// The step kinds and their weights.
var stepWeights = []struct {
	kind   string
	weight int
}{
	{"lancedb", 4}, {"append", 1}, {"deleteFragment", 1}, {"merge", 4}, {"catchup", 2}, {"trim", 2}, {"cleanup", 1},
	{"compact", 3}, {"remap", 1},
}

func (h *harness) pick() string {
	weight := func(kind string, def int) int {
		if h.cfg.Weights == nil {
			return def
		}
		return h.cfg.Weights[kind]
	}
	total := 0
	for _, w := range stepWeights {
		total += weight(w.kind, w.weight)
	}
	x := h.rng.IntN(total)
	for _, w := range stepWeights {
		if x -= weight(w.kind, w.weight); x < 0 {
			return w.kind
		}
	}
	return "merge"
}

func (h *harness) runStep() error {
	kind := h.pick()
	h.kind = kind
	h.stats.Ops[kind]++
	if kind == "lancedb" {
		return h.lanceStep()
	}
	return h.compactordStep(kind)
}

// lanceOp is one LanceDB operation of a step and what the model makes of
// it once acknowledged.
type lanceOp struct {
	kind  string
	step  lancedb.Step
	rows  []lancedb.Row // upserted or appended
	keys  []int64       // deleted
	tag   string
	tagV  uint64
	untag string
}

func (h *harness) keys(n int, from int64, span int64) []int64 {
	set := map[int64]bool{}
	for range n {
		set[from+h.rng.Int64N(span)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (h *harness) rowsOf(keys []int64, tag string) []lancedb.Row {
	var rows []lancedb.Row
	for _, k := range keys {
		rows = append(rows, lancedb.BasicRow(k, fmt.Sprintf("%s%d", tag, k)))
	}
	return rows
}

func (h *harness) freshRows(n int, tag string) []lancedb.Row {
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = h.fresh
		h.fresh++
	}
	return h.rowsOf(keys, tag)
}

// plainOp draws a LanceDB operation on the base table: an append of
// fresh keys, a delete or a plain (non-MemWAL) merge-insert.
func (h *harness) plainOp(i int, kinds ...string) lanceOp {
	tag := fmt.Sprintf("p%d.%d-", h.step, i)
	switch kinds[h.rng.IntN(len(kinds))] {
	case "delete":
		ks := h.keys(1+h.rng.IntN(4), 0, keySpace)
		// Sometimes a fresh key an append wrote.
		if h.fresh > freshKeys && h.rng.IntN(2) == 0 {
			ks = append(ks, freshKeys+h.rng.Int64N(h.fresh-freshKeys))
		}
		where := make([]string, len(ks))
		for j, k := range ks {
			where[j] = fmt.Sprint(k)
		}
		return lanceOp{kind: "delete", step: lancedb.Delete("id IN (" + strings.Join(where, ",") + ")"), keys: ks}
	case "plainMerge":
		rows := h.rowsOf(h.keys(1+h.rng.IntN(4), 0, keySpace), tag)
		return lanceOp{kind: "plainMerge", step: lancedb.PlainMergeInsert("id", rows), rows: rows}
	}
	rows := h.freshRows(1+h.rng.IntN(3), tag)
	return lanceOp{kind: "add", step: lancedb.Add(rows), rows: rows}
}

// lanceStep runs a few LanceDB operations in one program: MemWAL
// upserts (each program's writers close at its end, flushing one
// generation per shard written), appends, deletes, plain merge-inserts,
// tags.
func (h *harness) lanceStep() error {
	var ops []lanceOp
	// The tags as the program's earlier operations leave them.
	tags := maps.Clone(h.ref.Tags)
	for i := range 1 + h.rng.IntN(4) {
		switch x := h.rng.IntN(10); {
		case x < 5:
			rows := h.rowsOf(h.keys(1+h.rng.IntN(6), 0, keySpace), fmt.Sprintf("m%d.%d-", h.step, i))
			ops = append(ops, lanceOp{kind: "lsmMerge", step: lancedb.MergeInsert("id", rows), rows: rows})
		case x < 9:
			ops = append(ops, h.plainOp(i, "add", "delete", "plainMerge"))
		default:
			if len(tags) >= 2 || h.rng.IntN(3) == 0 && len(tags) > 0 {
				name := slices.Sorted(maps.Keys(tags))[h.rng.IntN(len(tags))]
				delete(tags, name)
				ops = append(ops, lanceOp{kind: "tagDelete", step: lancedb.TagDelete(name), untag: name})
			} else {
				name := fmt.Sprintf("t%d.%d", h.step, i)
				tags[name] = h.snap.Version
				ops = append(ops, lanceOp{kind: "tagCreate", step: lancedb.TagCreate(name, h.snap.Version), tag: name, tagV: h.snap.Version})
			}
		}
	}
	steps := make([]lancedb.Step, 0, len(ops)+1)
	var names []string
	for _, op := range ops {
		steps = append(steps, op.step)
		names = append(names, op.kind)
	}
	steps = append(steps, lancedb.CloseLsmWriters())
	h.logf("lancedb %v", names)
	if _, err := h.lance(steps...); err != nil {
		return violationf("LanceDB on the table compactord maintains: %v", err)
	}
	if err := h.applyLance(ops); err != nil {
		return err
	}
	return h.check(false)
}

// applyLance applies acknowledged LanceDB operations to the model, then
// learns the generations their flushes made (checking each holds what was
// written to its bucket) and the WAL positions.
func (h *harness) applyLance(ops []lanceOp) error {
	pending := map[int]map[int64]string{}
	for _, op := range ops {
		h.stats.LanceDB[op.kind]++
		switch op.kind {
		case "lsmMerge":
			for _, r := range op.rows {
				id, _ := r.Int("id")
				b := lancedb.Bucket(id, h.cfg.Shards)
				if pending[b] == nil {
					pending[b] = map[int64]string{}
				}
				pending[b][id] = r.Str("s")
			}
		case "add", "plainMerge":
			for _, r := range op.rows {
				id, _ := r.Int("id")
				h.ref.Base[id] = r.Str("s")
			}
		case "delete":
			for _, k := range op.keys {
				delete(h.ref.Base, k)
			}
		case "tagCreate":
			h.ref.Tags[op.tag] = op.tagV
		case "tagDelete":
			delete(h.ref.Tags, op.untag)
		}
	}
	ids, err := memwal.ListShards(h.ctx, h.raw)
	if err != nil {
		return err
	}
	flushed := map[int]bool{}
	for _, id := range ids {
		ss, err := memwal.ReadShard(h.ctx, h.raw, id)
		if err != nil {
			return violationf("shard %s after LanceDB wrote: %v", id, err)
		}
		known := map[uint64]bool{}
		for _, g := range h.ref.Gens[id] {
			known[g.n] = true
		}
		ts := slices.Clone(ss.Manifest.GetSstables())
		slices.SortFunc(ts, func(a, b *pbSsTable) int { return cmpU(a.GetGeneration(), b.GetGeneration()) })
		for _, t := range ts {
			if known[t.GetGeneration()] || t.GetGeneration() <= h.ref.Top(id) {
				continue
			}
			rows, tombs, err := ReadGeneration(h.ctx, h.raw, id, t)
			if err != nil {
				return violationf("a generation LanceDB flushed: %v", err)
			}
			if len(rows) == 0 || len(tombs) > 0 {
				return violationf("shard %s generation %d holds %d rows and %d tombstones", id, t.GetGeneration(), len(rows), len(tombs))
			}
			b := lancedb.Bucket(slices.Min(slices.Collect(maps.Keys(rows))), h.cfg.Shards)
			if s, ok := h.ref.Buckets[b]; ok && s != id {
				return violationf("bucket %d went to shard %s, before to %s", b, id, s)
			}
			h.ref.Buckets[b] = id
			if flushed[b] {
				return violationf("bucket %d flushed two generations in one LanceDB program", b)
			}
			flushed[b] = true
			if d := Diff(rows, pending[b]); d != "" {
				return violationf("shard %s generation %d is not what LanceDB was given for bucket %d: %s", id, t.GetGeneration(), b, d)
			}
			g := &gen{n: t.GetGeneration(), rows: rows, dir: memwal.GenerationDir(id, t.GetPath())}
			err = h.raw.List(h.ctx, g.dir, func(a storage.Attrs) error {
				g.files = append(g.files, a.Key)
				return nil
			})
			if err != nil {
				return err
			}
			h.ref.Gens[id] = append(h.ref.Gens[id], g)
		}
		ps, err := memwal.ListWAL(h.ctx, h.raw, id)
		if err != nil {
			return err
		}
		if h.ref.WAL[id] == nil {
			h.ref.WAL[id] = map[uint64]bool{}
		}
		for _, p := range ps {
			h.ref.WAL[id][p] = true
		}
	}
	for b := range pending {
		if !flushed[b] {
			return violationf("LanceDB wrote bucket %d through the MemWAL but no new generation appeared", b)
		}
	}
	return nil
}

// injected is what was injected into one compactord step.
type injected struct {
	fault, crash bool
	race         []lanceOp
	raced        bool // the racing commit landed while ours was held
}

// compactordStep runs one compactord job in-process over the fault and
// crash wrappers, maybe with a LanceDB commit landing under its commit.
func (h *harness) compactordStep(kind string) error {
	var inj injected
	var rule *faults.FaultRule
	if h.rng.Float64() < h.cfg.FaultRate {
		inj.fault = true
		rule = h.addFault()
	}
	outage := false
	if !inj.fault && h.rng.Float64() < h.cfg.OutageRate {
		outage = true
		ops := []storage.Op{storage.OpPutIfAbsent, storage.OpPut, storage.OpDelete, storage.OpUpload}
		op := ops[h.rng.IntN(len(ops))]
		prefix := ""
		if op == storage.OpPutIfAbsent {
			prefix = meta.VersionsDir
		}
		h.outage.Arm(op, prefix, 1+h.rng.IntN(3), 1+h.rng.IntN(10))
	}
	if !inj.fault && !outage && h.rng.Float64() < h.cfg.CrashRate {
		inj.crash = true
		h.crash.Arm(h.rng.IntN(60))
	}
	commits := kind != "trim" && kind != "cleanup"
	if commits && !inj.fault && !outage && !inj.crash && h.rng.Float64() < h.cfg.RaceRate {
		kinds := []string{"add", "delete", "plainMerge", "readd"}
		if kind == "deleteFragment" {
			kinds = []string{"add"} // anything else may move rows out of the fragment
		}
		// One to three commits land while ours is held: a rebase must
		// carry each of them (two deletes of one fragment, a delete and
		// an append of the same key).
		for i := range 1 + h.rng.IntN(3) {
			if k := kinds[h.rng.IntN(len(kinds))]; k == "readd" {
				del := h.plainOp(i, "delete")
				tag := fmt.Sprintf("r%d.%d-", h.step, i)
				rows := h.rowsOf(del.keys, tag)
				inj.race = append(inj.race, del, lanceOp{kind: "add", step: lancedb.Add(rows), rows: rows})
			} else {
				inj.race = append(inj.race, h.plainOp(i, k))
			}
		}
	}
	var (
		desc   string
		err    error
		before []uint64
		retain int
		frag   []int64
	)
	run := func() {
		hd, herr := h.handle()
		if herr != nil {
			err = herr
			return
		}
		switch kind {
		case "append":
			rows := h.freshRows(1+h.rng.IntN(4), fmt.Sprintf("a%d-", h.step))
			var buf bytes.Buffer
			for _, r := range rows {
				id, _ := r.Int("id")
				fmt.Fprintf(&buf, `{"id":%d,"s":%q,"cat":%d,"f":%v}`+"\n", id, r.Str("s"), id%4, float64(id)/2)
			}
			desc = fmt.Sprintf("append %d rows", len(rows))
			if _, _, err = hd.AppendJSON(h.ctx, &buf); err == nil {
				for _, r := range rows {
					id, _ := r.Int("id")
					h.ref.Base[id] = r.Str("s")
				}
			}
		case "deleteFragment":
			ids := slices.Sorted(maps.Keys(h.snap.Frags))
			if len(ids) == 0 {
				desc = "delete fragment: none"
				return
			}
			id := ids[h.rng.IntN(len(ids))]
			frag = h.snap.Frags[id]
			desc = fmt.Sprintf("delete fragment %d (%d live rows)", id, len(frag))
			if _, err = hd.DeleteFragments(h.ctx, []uint64{id}); err == nil {
				for _, k := range frag {
					delete(h.ref.Base, k)
				}
			}
		case "merge":
			mg := []int{1, 1, 2, 3, 100}[h.rng.IntN(5)]
			desc = fmt.Sprintf("merge (max %d generations)", mg)
			var out *merge.Outcome
			out, err = merge.RunAll(h.ctx, hd, merge.Env{MaxGenerations: mg})
			if out != nil {
				desc += fmt.Sprintf(": %d landed, %d skipped", len(out.Landed), len(out.Skipped))
			}
		case "catchup":
			o := index.Options{Rebuild: h.rng.IntN(4) == 0, MaxSegments: []int{0, 1, 2}[h.rng.IntN(3)]}
			desc = fmt.Sprintf("index catch-up (rebuild %v, max segments %d)", o.Rebuild, o.MaxSegments)
			_, err = index.CatchUp(h.ctx, hd, o)
		case "compact":
			o := compact.DefaultOptions()
			o.TargetRowsPerFragment = []uint64{64, 1 << 20, 1 << 20}[h.rng.IntN(3)]
			o.MaterializeDeletions, o.DeletionThreshold = true, 0.1
			o.DeferRemap = h.rng.IntN(2) == 0
			desc = fmt.Sprintf("compact (target %d rows, defer remap %v)", o.TargetRowsPerFragment, o.DeferRemap)
			var res *compact.Result
			res, err = compact.Run(h.ctx, hd, o, compact.Env{Parallelism: 2})
			if res != nil && res.Commit != nil {
				desc += fmt.Sprintf(": %d groups, %d segments remapped, %d deletes rebased", len(res.Plan.Groups), res.RewrittenIndices, res.Rebased)
			}
		case "remap":
			desc = "index remap"
			_, err = index.RemapIndexes(h.ctx, hd, index.RemapJobOptions{NoTrim: h.rng.IntN(4) == 0})
		case "trim":
			cfg := trim.Config{ReaderGrace: 0, KeepShardManifests: 2 + h.rng.IntN(2), Concurrency: 2}
			desc = fmt.Sprintf("trim (keep %d shard manifests)", cfg.KeepShardManifests)
			var res *trim.Result
			res, err = trim.Run(h.ctx, h.faulty, cfg, time.Now())
			if res != nil {
				desc += fmt.Sprintf(": %d generations, %d WAL entries, %d shard manifests", res.DeletedGenerations, res.DeletedWAL, res.DeletedManifests)
			}
		case "cleanup":
			retain = 1 + h.rng.IntN(4)
			if before, _, err = meta.ListVersions(h.ctx, h.raw); err != nil {
				return
			}
			desc = fmt.Sprintf("cleanup (retain %d versions)", retain)
			var res *cleanup.Result
			res, err = cleanup.Run(h.ctx, h.faulty, cleanup.Config{Options: cleanup.Options{RetainVersions: retain}, Concurrency: 2}, time.Now())
			if res != nil {
				desc += fmt.Sprintf(": %d versions, %d files", res.DeletedVersions, res.DeletedFiles)
			}
		}
	}
	if len(inj.race) > 0 {
		if err := h.raced(&inj, run); err != nil {
			return err
		}
	} else {
		run()
	}
	if rule != nil {
		h.stats.Faults += rule.Fired()
		inj.fault = rule.Fired() > 0
	}
	h.faulty.Clear()
	if n := h.outage.Disarm(); outage && n > 0 {
		h.stats.Outages++
		h.stats.Faults += n
		inj.fault = true
	}
	crashed := h.crash.Disarm()
	if crashed {
		h.stats.Crashes++
	}
	tags := []string{}
	if inj.fault {
		tags = append(tags, "fault")
	}
	if outage && inj.fault {
		tags = append(tags, "outage")
	}
	if crashed {
		tags = append(tags, "crashed")
	}
	if inj.raced {
		var ks []string
		for _, op := range inj.race {
			ks = append(ks, op.kind)
		}
		tags = append(tags, fmt.Sprintf("raced by LanceDB %v", ks))
	}
	h.logf("%s %v: err %v", desc, tags, err)
	if err != nil && kind == "compact" && strings.Contains(err.Error(), "fragment-reuse versions it has not absorbed") &&
		len(meta.FindIndex(h.snap.File.Indices, meta.FragReuseIndexName)) > 0 {
		// An inline remap refuses while a deferred compaction's FRI
		// versions are not absorbed into every index (lance/compact): a
		// refusal that changes nothing, allowed only with an FRI present.
		h.stats.Refused++
		err = nil
	}
	if err != nil {
		h.stats.Failed++
		if !inj.fault && !crashed && !inj.raced {
			return violationf("%s failed with no fault, crash or race injected: %v", desc, err)
		}
	}
	was := maps.Clone(h.ref.Compacted)
	if err := h.check(kind == "merge"); err != nil {
		return err
	}
	if err != nil && kind == "merge" && !maps.Equal(was, h.ref.Compacted) {
		// The merge failed after a commit landed (a later shard's job, or
		// a put whose answer was lost): the outcome was learnt from the
		// table, and the scan agreed.
		h.stats.Ambiguous++
	}
	if kind == "cleanup" {
		return h.checkCleanup(before, retain)
	}
	return nil
}

// raced runs the step with its first manifest put held until a LanceDB
// commit has landed: compactord's commit finds a new head and must
// rebase or retry. A step that never commits runs alone, then LanceDB.
func (h *harness) raced(inj *injected, run func()) error {
	release := make(chan struct{})
	rule := h.faulty.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: meta.VersionsDir, Nth: 1, Action: faults.Block(release)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			if rule.Matched() > 0 {
				inj.raced = true
				h.stats.Races++
				break wait
			}
		}
	}
	var steps []lancedb.Step
	for _, op := range inj.race {
		steps = append(steps, op.step)
	}
	_, lerr := h.lance(steps...)
	close(release)
	<-done
	if lerr != nil {
		return violationf("the racing LanceDB operations: %v", lerr)
	}
	return h.applyLance(inj.race)
}

func (h *harness) addFault() *faults.FaultRule {
	err := faults.ErrInjected
	nth := 1 + h.rng.IntN(12)
	var f faults.Fault
	switch h.rng.IntN(5) {
	case 0:
		// The manifest put lands but its answer is lost: the commit's
		// outcome is ambiguous.
		f = faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: meta.VersionsDir, Nth: 1, Action: faults.LandThenFail(err)}
	case 1:
		f = faults.Fault{Ops: []storage.Op{storage.OpDelete}, Nth: nth, Action: faults.LandThenFail(err)}
	case 2:
		f = faults.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange, storage.OpAttributes}, Nth: nth, Action: faults.Fail(err)}
	case 3:
		f = faults.Fault{Ops: []storage.Op{storage.OpPut, storage.OpPutIfAbsent, storage.OpUpload, storage.OpDelete}, Nth: nth, Action: faults.Fail(err)}
	default:
		f = faults.Fault{Ops: []storage.Op{storage.OpList}, Nth: 1 + h.rng.IntN(4), Action: faults.Fail(err)}
	}
	return h.faulty.Add(f)
}

// checkCleanup: cleanup kept the latest version, the newest retain of
// those before it, and every tagged one.
func (h *harness) checkCleanup(before []uint64, retain int) error {
	after, _, err := meta.ListVersions(h.ctx, h.raw)
	if err != nil {
		return err
	}
	has := map[uint64]bool{}
	for _, v := range after {
		has[v] = true
	}
	slices.Sort(before)
	keep := before[max(0, len(before)-retain):]
	for _, v := range h.ref.Tags {
		keep = append(keep, v)
	}
	for _, v := range keep {
		if !has[v] {
			return violationf("cleanup (retain %d) deleted version %d, which it must keep (versions before %v, tags %v)", retain, v, before, h.ref.Tags)
		}
	}
	return nil
}

// drain runs every job to completion without faults, then checks what a
// finished pipeline leaves and has LanceDB read the table, its tagged
// versions and the checkpoints back.
func (h *harness) drain() error {
	h.step++
	h.kind = "drain"
	hd, err := h.handle()
	if err != nil {
		return err
	}
	if _, err := merge.RunAll(h.ctx, hd, merge.Env{MaxGenerations: 1000}); err != nil {
		return violationf("drain: merge: %v", err)
	}
	if err := h.check(true); err != nil {
		return err
	}
	// As the daemon does, a pending fragment-reuse version is absorbed
	// before the (inline-remapping) compaction.
	if _, err := index.RemapIndexes(h.ctx, hd, index.RemapJobOptions{}); err != nil {
		return violationf("drain: index remap: %v", err)
	}
	if _, err := compact.Run(h.ctx, hd, compact.DefaultOptions(), compact.Env{}); err != nil {
		return violationf("drain: compact: %v", err)
	}
	if _, err := index.RemapIndexes(h.ctx, hd, index.RemapJobOptions{}); err != nil {
		return violationf("drain: index remap: %v", err)
	}
	if _, err := index.CatchUp(h.ctx, hd, index.Options{}); err != nil {
		return violationf("drain: index catch-up: %v", err)
	}
	if _, err := trim.Run(h.ctx, h.raw, trim.Config{KeepShardManifests: 2, Concurrency: 2}, time.Now()); err != nil {
		return violationf("drain: trim: %v", err)
	}
	if _, err := cleanup.Run(h.ctx, h.raw, cleanup.Config{Options: cleanup.Options{RetainVersions: 1}, Concurrency: 2}, time.Now()); err != nil {
		return violationf("drain: cleanup: %v", err)
	}
	if err := h.check(false); err != nil {
		return err
	}
	h.logf("drained")
	if n := h.ref.Pending(); n > 0 {
		return violationf("drain: %d generations still unmerged", n)
	}
	for _, name := range []string{idxID, idxCat} {
		n, err := Unindexed(h.ctx, h.raw, h.snap, name)
		if err != nil {
			return err
		}
		if n > 0 {
			return violationf("drain: %d live rows outside index %s after catch-up", n, name)
		}
	}
	f, _, err := meta.ReadLatest(h.ctx, h.raw)
	if err != nil {
		return err
	}
	mw, err := MemWALOf(f)
	if err != nil {
		return err
	}
	floor, err := h.pinnedFloor(f, mw)
	if err != nil {
		return err
	}
	// Coverage is proven against the fragments live at a commit's read
	// version, and an empty version proves nothing (an empty fragment list
	// is also what a manifest whose merge published no fragments looks
	// like, and then the SSTables hold the only copy): on an emptied table
	// a catch-up position an index change withdrew stays behind, and its
	// SSTables are kept, until rows come back. Anywhere else, the drain's
	// catch-up must have recorded what the indexes cover.
	emptied := len(f.Manifest.GetFragments()) == 0
	for shard, gs := range h.ref.Gens {
		if mw.Floor(shard) != mw.Compacted[shard] && !emptied {
			return violationf("drain: shard %s: maintained indexes %v caught up to %d, merged %d", shard, mw.Maintained, mw.Floor(shard), mw.Compacted[shard])
		}
		for _, g := range gs {
			if g.n > floor[shard] {
				continue
			}
			for _, file := range g.files {
				if _, err := h.raw.Attributes(h.ctx, file); err == nil {
					return violationf("drain: shard %s generation %d is merged and caught up (pinned floor %d) but trim left %s", shard, g.n, floor[shard], file)
				}
			}
		}
	}
	// LanceDB reads the latest version (both views, the indexes), the
	// tagged versions and the checkpoints.
	steps := []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}),
		lancedb.IndexStats(idxID), lancedb.IndexStats(idxCat)}
	tagNames := slices.Sorted(maps.Keys(h.ref.Tags))
	for _, name := range tagNames {
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Version: h.ref.Tags[name], LSM: lancedb.Bool(false)}))
	}
	for _, cp := range h.cps {
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}).On(cp.name), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}).On(cp.name))
	}
	res, err := h.lance(steps...)
	if err != nil {
		return violationf("drain: LanceDB reads the table back: %v", err)
	}
	rows := func(i int) (map[int64]string, error) {
		rs, err := res.Rows(i)
		if err != nil {
			return nil, err
		}
		m, err := lancedb.RowsByID(rs)
		if err != nil {
			return nil, violationf("LanceDB read step %d: %v", i, err)
		}
		return m, nil
	}
	names := []string{"LanceDB's LSM view", "LanceDB's base view"}
	wants := []map[int64]string{h.ref.LSM(), h.ref.Base}
	for i, name := range []string{idxID, idxCat} {
		st, err := res.IndexStats(2 + i)
		if err != nil || st == nil || st.NumUnindexedRows != 0 {
			return violationf("drain: LanceDB's indexStats(%s): %+v, %v", name, st, err)
		}
	}
	idx := []int{0, 1}
	for j, name := range tagNames {
		names = append(names, fmt.Sprintf("LanceDB's read of tag %s (version %d)", name, h.ref.Tags[name]))
		wants = append(wants, h.ref.Versions[h.ref.Tags[name]])
		idx = append(idx, 4+j)
	}
	for j, cp := range h.cps {
		names = append(names, "LanceDB's LSM view of checkpoint "+cp.name, "LanceDB's base view of checkpoint "+cp.name)
		wants = append(wants, cp.lsm, cp.base)
		idx = append(idx, 4+len(tagNames)+2*j, 4+len(tagNames)+2*j+1)
	}
	for i := range idx {
		got, err := rows(idx[i])
		if err != nil {
			return err
		}
		if d := Diff(got, wants[i]); d != "" {
			return violationf("drain: %s differs from the model: %s", names[i], d)
		}
	}
	h.stats.Checkpoints = len(h.cps)
	return nil
}
