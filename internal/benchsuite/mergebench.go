package benchsuite

import (
	"context"
	"fmt"
)

// MergeResult compares compactord merge with DuckDB.
type MergeResult struct {
	BaseRows   uint64           `json:"base_rows"`
	Upserts    uint64           `json:"upserts"`
	BaseBytes  uint64           `json:"base_bytes"`
	InputBytes uint64           `json:"input_bytes"` // base data plus the SSTable
	Runs       map[string][]Run `json:"runs"`
	Commands   []string         `json:"commands"`
}

// merge compares `compactord merge` (upserts of existing keys: one
// SSTable folded into the base table as deletion files plus a new
// fragment) with DuckDB doing the equivalent anti-join and union rewrite
// of the whole table (the goal's peer), and, as a stricter peer, with
// DuckDB computing only what compactord writes: the positions of the
// superseded base rows (a semi-join) and the upserted rows.
func (s *Suite) merge(ctx context.Context) (*MergeResult, error) {
	set, err := s.mergeSet(ctx)
	if err != nil {
		return nil, err
	}
	files := append(append([]string{}, set.Files...), set.SSTable)
	base, sst := sqlList(set.Files), sqlString(set.SSTable)
	rewrite := fmt.Sprintf("COPY (SELECT b.* FROM read_parquet(%s) b ANTI JOIN read_parquet(%s) u ON b.id = u.id "+
		"UNION ALL SELECT id, cat, val FROM read_parquet(%s) WHERE _op = 'upsert') TO {out0} (FORMAT parquet)", base, sst, sst)
	locate := fmt.Sprintf("COPY (SELECT b.filename, b.file_row_number FROM read_parquet(%s, filename = true, file_row_number = true) b "+
		"SEMI JOIN read_parquet(%s) u ON b.id = u.id) TO {out0} (FORMAT parquet)", base, sst)
	upserts := fmt.Sprintf("COPY (SELECT id, cat, val FROM read_parquet(%s) WHERE _op = 'upsert') TO {out1} (FORMAT parquet)", sst)
	want := uint64(s.cfg.MergeUpserts)
	check := func(out map[string]any) error {
		merged, _ := out["merged"].([]any)
		if len(merged) != 1 {
			return fmt.Errorf("merged %d jobs, want 1", len(merged))
		}
		m, _ := merged[0].(map[string]any)
		if uint64(num(m, "updated")) != want {
			return fmt.Errorf("updated %v rows, want %d", m["updated"], want)
		}
		return nil
	}
	steps := []step{
		s.jobStep(stepMerge, set, files, check, "merge", "--shard", "s0"),
		s.duckStep(stepDuckMerge, files, 1, rewrite),
		s.duckStep(stepDuckLocate, files, 2, locate, upserts),
	}
	if s.cfg.Baseline != "" {
		steps = append(steps, s.baselineStep(stepMerge, set, files, check, "merge", "--shard", "s0"))
	}
	runs, err := s.trials(ctx, "merge", steps)
	if err != nil {
		return nil, err
	}
	var sstBytes uint64
	if fi, err := statSize(set.SSTable); err == nil {
		sstBytes = fi
	}
	c := s.cfg
	return &MergeResult{BaseRows: set.Rows, Upserts: want, BaseBytes: set.Bytes, InputBytes: set.Bytes + sstBytes, Runs: runs,
		Commands: []string{
			fmt.Sprintf("benchsuite gen --kind merge --dir $W/m --base-rows %d --rows-per-fragment %d --upserts %d", c.MergeBase, c.MergeFragmentRows, c.MergeUpserts),
			fmt.Sprintf("cp -al $W/m $W/t && GOMAXPROCS=%d compactord merge file://$W/t --shard s0", c.Threads),
			fmt.Sprintf(`node bench/duckdb-rewrite.mjs %d out.parquet -- "COPY (SELECT b.* FROM read_parquet([$W/m/data/*.parquet]) b ANTI JOIN read_parquet('$SST') u ON b.id = u.id UNION ALL SELECT id, cat, val FROM read_parquet('$SST') WHERE _op = 'upsert') TO 'out.parquet' (FORMAT parquet)"`, c.Threads),
		},
	}, nil
}
