package benchsuite

import (
	"context"
	"fmt"
	"strconv"
)

// CompactResult is the compaction comparison: per step, one Run a trial.
type CompactResult struct {
	Fragments  int              `json:"fragments"`
	Rows       uint64           `json:"rows"`
	Bytes      uint64           `json:"bytes"`
	TargetRows int              `json:"target_rows"`
	Runs       map[string][]Run `json:"runs"`
	// Commands reproduce one trial by hand.
	Commands []string `json:"commands"`
}

// Step names of the compaction comparison.
const (
	stepCP          = "cp"
	stepCompact     = "compactord"
	stepDuck        = "duckdb"
	stepCompactDel  = "compactord-del10"
	stepDuckDel     = "duckdb-del10"
	stepMerge       = "compactord-merge"
	stepDuckMerge   = "duckdb-rewrite"
	stepDuckLocate  = "duckdb-locate"
	deleteFilterSQL = "id % 10 <> 0"
)

// targetRows makes outputs of four fragments of the few-fragment set
// (and of many more of the many-fragment set, with the same rows): every
// input is small, so every fragment is rewritten, in groups run Threads at
// a time.
func (s *Suite) targetRows() int { return 4 * (s.cfg.CompactRows / s.cfg.CompactFragments) }

func (s *Suite) compactArgs() []string {
	return []string{"compact", "--target-rows", strconv.Itoa(s.targetRows()), "--parallelism", strconv.Itoa(s.cfg.Threads), "--deletion-threshold", "0.05"}
}

func checkCompact(rows uint64, copyPath bool) func(map[string]any) error {
	return func(out map[string]any) error {
		switch {
		case uint64(num(out, "rows")) != rows:
			return fmt.Errorf("wrote %v rows, want %d", out["rows"], rows)
		case copyPath && num(out, "rows_rewritten") != 0:
			return fmt.Errorf("re-encoded rows on the copy path")
		case !copyPath && num(out, "row_groups_copied") != 0:
			return fmt.Errorf("copied row groups verbatim although every row group has deletions")
		}
		return nil
	}
}

// compaction compares compactord compact with cp and DuckDB on the same
// files, with no deletions and with 10 % deleted.
func (s *Suite) compaction(ctx context.Context) (*CompactResult, error) {
	base, err := s.compactSet(ctx, s.cfg.CompactFragments, false)
	if err != nil {
		return nil, err
	}
	del, err := s.compactSet(ctx, s.cfg.CompactFragments, true)
	if err != nil {
		return nil, err
	}
	rpf := s.cfg.CompactRows / s.cfg.CompactFragments
	args := s.compactArgs()
	files := base.Files
	all := fmt.Sprintf("COPY (SELECT * FROM read_parquet(%s)) TO {out0} (FORMAT parquet)", sqlList(files))
	filtered := fmt.Sprintf("COPY (SELECT * FROM read_parquet(%s) WHERE %s) TO {out0} (FORMAT parquet)", sqlList(files), deleteFilterSQL)
	steps := []step{
		s.cpStep(files),
		s.jobStep(stepCompact, base, files, checkCompact(base.Rows, true), args...),
		s.duckStep(stepDuck, files, 1, all),
		s.jobStep(stepCompactDel, del, files, checkCompact(del.Rows, false), args...),
		s.duckStep(stepDuckDel, files, 1, filtered),
	}
	if s.cfg.Baseline != "" {
		steps = append(steps,
			s.baselineStep(stepCompact, base, files, checkCompact(base.Rows, true), args...),
			s.baselineStep(stepCompactDel, del, files, checkCompact(del.Rows, false), args...))
	}
	runs, err := s.trials(ctx, "compaction", steps)
	if err != nil {
		return nil, err
	}
	if err := s.checkDuckRows(ctx, files, del.Rows); err != nil {
		return nil, err
	}
	t := s.cfg.Threads
	return &CompactResult{
		Fragments: s.cfg.CompactFragments, Rows: base.Rows, Bytes: base.Bytes, TargetRows: s.targetRows(), Runs: runs,
		Commands: []string{
			fmt.Sprintf("benchsuite gen --kind compact --dir $W/base --fragments %d --rows-per-fragment %d", s.cfg.CompactFragments, rpf),
			fmt.Sprintf("benchsuite gen --kind delete --from $W/base --dir $W/del10 --rows-per-fragment %d", rpf),
			"cp $W/base/data/*.parquet $W/cp/ && sync $W/cp/*",
			fmt.Sprintf("cp -al $W/base $W/t && GOMAXPROCS=%d compactord compact file://$W/t --target-rows %d --parallelism %d --deletion-threshold 0.05", t, s.targetRows(), t),
			fmt.Sprintf("cp -al $W/del10 $W/t && GOMAXPROCS=%d compactord compact file://$W/t --target-rows %d --parallelism %d --deletion-threshold 0.05", t, s.targetRows(), t),
			fmt.Sprintf(`node bench/duckdb-rewrite.mjs %d out.parquet -- "COPY (SELECT * FROM read_parquet([$W/base/data/*.parquet]) [WHERE %s]) TO 'out.parquet' (FORMAT parquet)"`, t, deleteFilterSQL),
		},
	}, nil
}

// checkDuckRows checks once that DuckDB's filter keeps exactly the rows
// the deletion files keep, so both sides do the same work.
func (s *Suite) checkDuckRows(ctx context.Context, files []string, want uint64) error {
	got, err := s.duckQuery(ctx, fmt.Sprintf("SELECT count(*) AS n FROM read_parquet(%s) WHERE %s", sqlList(files), deleteFilterSQL))
	if err != nil {
		return err
	}
	if got != strconv.FormatUint(want, 10) {
		return fmt.Errorf("DuckDB's filter keeps %s rows, the deletion files %d: the comparison would be unfair", got, want)
	}
	return nil
}

// RSSResult is the peak resident set of compaction jobs on the same rows
// in few and in many fragments.
type RSSResult struct {
	Bytes uint64    `json:"bytes"`
	Cases []RSSCase `json:"cases"`
}

// RSSCase is one job.
type RSSCase struct {
	Job       string `json:"job"` // compact or merge
	Fragments int    `json:"fragments"`
	Deleted   bool   `json:"deleted"`
	Upserts   uint64 `json:"upserts,omitempty"`
	Run       Run    `json:"run"`
	Command   string `json:"command"`
}

// rss runs compaction on the same rows in CompactFragments and in
// RSSFragments fragments, with and without deletions, once each.
func (s *Suite) rss(ctx context.Context) (*RSSResult, error) {
	res := &RSSResult{}
	for _, n := range []int{s.cfg.CompactFragments, s.cfg.RSSFragments} {
		for _, deleted := range []bool{false, true} {
			base, err := s.compactSet(ctx, n, false)
			if err != nil {
				return nil, err
			}
			set := base
			if deleted {
				if set, err = s.compactSet(ctx, n, true); err != nil {
					return nil, err
				}
			}
			res.Bytes = base.Bytes
			r, err := s.jobStep(stepCompact, set, base.Files, checkCompact(set.Rows, !deleted), s.compactArgs()...).run(ctx)
			if err != nil {
				return nil, fmt.Errorf("peak RSS, %d fragments: %w", n, err)
			}
			s.logf("peak RSS: %d fragments, deleted %v: %.0f MiB (%.1fs)", n, deleted, float64(r.MaxRSS)/(1<<20), r.Wall.Seconds())
			res.Cases = append(res.Cases, RSSCase{Job: "compact", Fragments: n, Deleted: deleted, Run: *r,
				Command: fmt.Sprintf("/usr/bin/time -f %%M compactord compact file://$W/t --target-rows %d --parallelism %d --deletion-threshold 0.05", s.targetRows(), s.cfg.Threads)})
		}
	}
	if s.cfg.RSSMergeUpserts > 0 {
		set, err := s.bigMergeSet(ctx)
		if err != nil {
			return nil, err
		}
		want := uint64(s.cfg.RSSMergeUpserts)
		check := func(out map[string]any) error {
			merged, _ := out["merged"].([]any)
			if len(merged) != 1 {
				return fmt.Errorf("merged %d jobs, want 1", len(merged))
			}
			if m, _ := merged[0].(map[string]any); uint64(num(m, "updated")) != want {
				return fmt.Errorf("updated %v rows, want %d", m["updated"], want)
			}
			return nil
		}
		r, err := s.jobStep(stepMerge, set, append(append([]string{}, set.Files...), set.SSTable), check, "merge", "--shard", "s0").run(ctx)
		if err != nil {
			return nil, fmt.Errorf("peak RSS, merge: %w", err)
		}
		s.logf("peak RSS: merge of %d upserts into %d rows: %.0f MiB (%.1fs)", want, set.Rows, float64(r.MaxRSS)/(1<<20), r.Wall.Seconds())
		sst, _ := statSize(set.SSTable)
		res.Cases = append(res.Cases, RSSCase{Job: "merge", Fragments: s.cfg.CompactFragments, Upserts: want, Run: *r,
			Command: fmt.Sprintf("benchsuite gen --kind upserts --from $W/base --dir $W/up --upserts %d  # SSTable %.0f MiB; then /usr/bin/time -f %%M compactord merge file://$W/up --shard s0", want, mib(sst))})
	}
	return res, nil
}
